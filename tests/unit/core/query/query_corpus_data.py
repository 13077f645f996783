"""Fixed documents and a plain-Python reference toolkit for the query corpus.

The 60 documents are built by formulas (no randomness) so every shape the
dialect cares about appears: ints, floats, numeric strings, null, missing
fields, booleans, arrays and objects in the same property; unicode names;
nested objects; arrays of objects. The helpers below are deliberately naive:
they spell out the service's rules directly in Python so that expected
results never come from the engine under test.
"""

from __future__ import annotations

from query_reference import MISSING, is_num

NOW_MS = 1_700_000_000_000  # 2023-11-14T22:13:20Z

NAMES = ["alpha", "Beta", "gamma", "Δelta", "épsilon", "zeta", "Ωmega", "naïve", "日本", "alpha beta"]
CITIES = ["Oslo", "Lima", "Kyoto", "Zürich"]


def _n_value(i: int):
    kind = i % 10
    return {
        0: i, 1: i / 2, 2: f"s{i}", 3: None, 4: MISSING, 5: i % 4 == 1, 6: -i, 7: i, 8: [i], 9: {"v": i},
    }[kind]


def make_doc(i: int) -> dict:
    doc = {"id": f"d{i:02d}", "pk": "abc"[i % 3], "n": _n_value(i), "name": NAMES[i % 10]}
    if i % 13 == 0:
        doc["name"] = MISSING
    tags = [["red", "blue"], ["blue"], [], MISSING][i % 4]
    if tags is not MISSING and i % 5 == 0:
        tags = tags + ["green"]
    doc["tags"] = tags
    doc["addr"] = {"city": CITIES[i % 4], "zip": 10000 + i} if i % 3 != 2 else MISSING
    if i % 9 == 0:
        doc["addr"] = {"city": None}
    doc["items"] = [{"sku": f"k{j}", "qty": j + i % 3} for j in range(i % 4)]
    doc["flag"] = i % 2 == 0 if i % 11 else MISSING
    doc["score"] = round(i * 1.37 % 20, 2)
    doc["group"] = f"g{i % 5}"
    doc["created"] = f"2024-{i % 12 + 1:02d}-{i % 28 + 1:02d}T10:{i % 60:02d}:00.0000000Z"
    doc["nested"] = {"a": {"b": i % 3}} if i % 2 == 0 else {"a": None}
    return {k: v for k, v in doc.items() if v is not MISSING}


DOCS = [make_doc(i) for i in range(60)]


def where(pred) -> list:
    return [d for d in DOCS if pred(d)]


def ids(docs) -> list:
    return [d["id"] for d in docs]


def rank(v):
    """The cross-type sort order, spelled out independently."""
    if v is MISSING:
        return (0, 0)
    if v is None:
        return (1, 0)
    if type(v) is bool:
        return (2, int(v))
    if is_num(v):
        return (3, v)
    if type(v) is str:
        return (4, v)
    if type(v) is list:
        return (5, tuple(rank(x) for x in v))
    return (6, tuple(sorted((k, rank(x)) for k, x in v.items())))

