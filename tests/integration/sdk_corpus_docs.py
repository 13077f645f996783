"""Documents for the SDK query corpus, and the plain-Python toolkit its reference answers use.

The ~200 documents come from a seeded generator, so every run stores the same data, and every
shape the dialect cares about appears: ints, floats, numeric strings, null, missing fields and
booleans in the same property; nested objects (sometimes null, sometimes absent); arrays of
strings and of objects (sometimes empty or absent); unicode in values and in property names;
string and numeric partition keys. The helpers below are deliberately naive: they spell the
service's rules out directly (three-valued comparisons, the cross-type sort order, numbers
without an int/float distinction) so expected results never come from the engine under test.
"""
import datetime
import json
import math
import random

from query_reference import MISSING, is_num
DOC_COUNT = 200
SEED = 20240605

# Partition keys: strings (some unicode) and one number, so the PK header carries both.
PKS = ["p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7", "ünï", "日本", "Ωmega", 42]
NAMES = ["Alice", "bob", "Zoë", "Łukasz", "東京", "Ωmega", "naïve café", "Émile", "carol", "Dave",
         "eve", "Ärger", "Mallory", "trent"]
CITIES = ["Oslo", "Lima", "Kyoto", "Zürich", "São Paulo", "Montréal"]
TAGS = ["red", "green", "blue", "ünï", "x y"]
KINDS = ["a", "b", "c", "d"]
SYSTEM_PROPERTIES = ("_rid", "_self", "_etag", "_ts", "_attachments")


def _n_value(i: int):
    kind = i % 12
    if kind <= 6:
        return i
    return {7: i + 0.5, 8: str(i), 9: None, 10: MISSING, 11: i % 24 == 11}[kind]


def _mixed(i: int):
    return [i, f"m{i}", [i, i + 1], {"v": i}, None, i % 2 == 0][i % 6]


def _addr(i: int, rng):
    if i % 7 == 0:
        return None
    if i % 7 == 3:
        return MISSING
    addr = {"city": CITIES[i % len(CITIES)], "zip": 10000 + i * 7,
            "geo": {"lat": round(rng.uniform(-60, 60), 3), "lon": round(rng.uniform(-170, 170), 3)}}
    if i % 5 == 0:
        del addr["zip"]
    return addr


def make_doc(i: int, rng) -> dict:
    doc = {
        "id": f"d{i:03d}", "pk": PKS[i % len(PKS)], "rank": i, "kind": KINDS[i % 4],
        "n": _n_value(i),
        "name": NAMES[i % len(NAMES)] if i % 13 else MISSING,
        "tags": rng.sample(TAGS, rng.randint(0, 3)) if i % 11 else MISSING,
        "addr": _addr(i, rng),
        "items": [{"sku": f"k{rng.randint(0, 9)}", "qty": rng.randint(1, 5), "price": round(rng.uniform(1, 50), 2)}
                  for _ in range(rng.randint(0, 3))],
        "score": round(rng.uniform(0, 100), 2),
        "active": (i % 3 == 0) if i % 9 else MISSING,
        "created": f"2024-{i % 12 + 1:02d}-{i % 28 + 1:02d}T{i % 24:02d}:{i % 60:02d}:00.0000000Z",
        "mixed": _mixed(i),
        "größe": i % 5 if i % 4 else MISSING,
        "note": "🙂 ok" if i % 17 == 0 else MISSING,
    }
    return {k: v for k, v in doc.items() if v is not MISSING}


def make_docs() -> list:
    rng = random.Random(SEED)
    return [make_doc(i, rng) for i in range(DOC_COUNT)]


# ---- reference toolkit ------------------------------------------------------------------------
def user_part(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k not in SYSTEM_PROPERTIES}


def type_rank(v) -> int:
    """undefined < null < boolean < number < string < array < object."""
    if v is MISSING:
        return 0
    if v is None:
        return 1
    if type(v) is bool:
        return 2
    if is_num(v):
        return 3
    if type(v) is str:
        return 4
    return 5 if type(v) is list else 6


def same_type(a, b) -> bool:
    return a is not MISSING and b is not MISSING and type_rank(a) == type_rank(b)


def eq(a, b):
    """`a = b`: True/False for values of one type, MISSING (undefined) otherwise."""
    if not same_type(a, b):
        return MISSING
    return canon(a) == canon(b)


def lt(a, b):
    """`a < b` for two numbers or two strings (or null/bool); undefined across types."""
    if not same_type(a, b) or type(a) in (list, dict):
        return MISSING
    if a is None:
        return False
    return a < b


def gt(a, b):
    return lt(b, a)


def sort_key(v):
    """The cross-type order of ORDER BY."""
    r = type_rank(v)
    if r in (0, 1):
        return (r, 0)
    if r in (2, 3, 4):
        return (r, v)
    return (r, canon(v))


def order(docs, *keys):
    """Sort by (key function, descending) pairs, most significant first."""
    out = list(docs)
    for key, desc in reversed(keys):
        out.sort(key=lambda d: sort_key(key(d)), reverse=desc)
    return out


def values(seq) -> list:
    """SELECT VALUE: undefined results are dropped."""
    return [v for v in seq if v is not MISSING]


def _norm(v):
    if type(v) is float:
        if v == int(v) and abs(v) < 2 ** 53:
            return int(v)
        return float(f"{v:.10g}")
    if isinstance(v, list):
        return [_norm(x) for x in v]
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items()}
    return v


def canon(v) -> str:
    """JSON text of a value: object member order ignored, 2.0 == 2, floats to 10 digits."""
    return json.dumps(_norm(v), sort_keys=True, ensure_ascii=False)


def distinct(seq) -> list:
    seen, out = set(), []
    for v in seq:
        if canon(v) not in seen:
            seen.add(canon(v))
            out.append(v)
    return out


def bag(results) -> list:
    return sorted(canon(r) for r in results)


# ---- reference aggregates ---------------------------------------------------------------------
def agg_sum(vals):
    vals = [v for v in vals if v is not MISSING]
    return MISSING if any(not is_num(v) for v in vals) else sum(vals)


def agg_avg(vals):
    vals = [v for v in vals if v is not MISSING]
    if not vals or any(not is_num(v) for v in vals):
        return MISSING
    return sum(vals) / len(vals)


def agg_extreme(vals, biggest: bool):
    vals = [v for v in vals if v is not MISSING]
    if not vals or any(type(v) in (list, dict) for v in vals):
        return MISSING
    return (max if biggest else min)(vals, key=sort_key)


def agg_count(vals) -> int:
    return sum(1 for v in vals if v is not MISSING)


def groups(docs, key) -> dict:
    """{canonical key: (key value, [docs])} in first-seen order."""
    out = {}
    for d in docs:
        k = key(d)
        out.setdefault(canon(k) if k is not MISSING else "<undefined>", (k, []))[1].append(d)
    return out


# ---- reference scalar functions ---------------------------------------------------------------
def s(v):
    """v when it is a string, else MISSING (string functions are undefined elsewhere)."""
    return v if type(v) is str else MISSING


def n(v):
    return v if is_num(v) else MISSING


def ticks_add(iso: str, part: str, amount: int) -> str:
    t = datetime.datetime.strptime(iso[:19], "%Y-%m-%dT%H:%M:%S")
    delta = {"dd": datetime.timedelta(days=amount), "hh": datetime.timedelta(hours=amount),
             "mi": datetime.timedelta(minutes=amount)}[part]
    return (t + delta).strftime("%Y-%m-%dT%H:%M:%S") + ".0000000Z"


def iso_parts(iso: str) -> dict:
    return {"yyyy": int(iso[0:4]), "mm": int(iso[5:7]), "dd": int(iso[8:10]), "hh": int(iso[11:13]),
            "mi": int(iso[14:16])}


