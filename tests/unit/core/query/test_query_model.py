"""Proves the engine agrees with a straightforward reference evaluator on random
documents and random queries.

Invariant: for every generated document list and query from a small grammar
(WHERE with comparisons, AND/OR/NOT, IN, BETWEEN over fields that may be
missing, null or of mixed types; SELECT *, VALUE, projections, VALUE COUNT;
ORDER BY; TOP; OFFSET/LIMIT), `compile_query(text).execute(docs)` equals what
the reference below computes. The reference is written from the service's
rules directly (undefined modelled as MISSING, three-valued logic by hand) and
shares no code with the engine.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from regionlab.emulator.core.query import compile_query
from tiers import examples

MISSING = object()
FIELDS = ("a", "b", "c")
SCALARS = st.sampled_from([-2, -1, 0, 1, 2, 3, 0.5, 1.5, "a", "b", "", "B", None, True, False])
FIELD_VALUES = st.one_of(SCALARS, st.just(MISSING), st.lists(st.sampled_from([0, 1, "a"]), max_size=2))


# ------------------------------------------------------------- reference
def kind(v):
    if v is None:
        return 0
    if type(v) is bool:
        return 1
    if type(v) in (int, float):
        return 2
    return {str: 3, list: 4, dict: 5}[type(v)]


def compare(op, x, y):
    if x is MISSING or y is MISSING or kind(x) != kind(y):
        return MISSING
    if op == "=":
        return x == y
    if op == "!=":
        return x != y
    if kind(x) >= 4:
        return MISSING
    if x is None:  # null equals null, so only the inclusive ranges hold
        return op in ("<=", ">=")
    return {"<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[op]


def logic_and(x, y):
    if x is False or y is False:
        return False
    return True if (x is True and y is True) else MISSING


def logic_or(x, y):
    if x is True or y is True:
        return True
    return False if (x is False and y is False) else MISSING


def logic_not(x):
    return (not x) if type(x) is bool else MISSING


def evaluate(cond, doc):
    tag = cond[0]
    if tag == "cmp":
        _, field, op, operand = cond
        right = doc.get(operand[1], MISSING) if operand[0] == "field" else operand[1]
        return compare(op, doc.get(field, MISSING), right)
    if tag == "and":
        return logic_and(evaluate(cond[1], doc), evaluate(cond[2], doc))
    if tag == "or":
        return logic_or(evaluate(cond[1], doc), evaluate(cond[2], doc))
    if tag == "not":
        return logic_not(evaluate(cond[1], doc))
    if tag == "in":
        value = doc.get(cond[1], MISSING)
        if value is MISSING:
            return MISSING
        return any(compare("=", value, item) is True for item in cond[2])
    value = doc.get(cond[1], MISSING)  # between
    return logic_and(compare(">=", value, cond[2]), compare("<=", value, cond[3]))


def rank(v):
    if v is MISSING:
        return (-1, 0)
    if type(v) is list:
        return (4, tuple(rank(x) for x in v))
    return (kind(v), v if v is not None else 0)


def reference(docs, spec):
    rows = [d for d in docs if spec["where"] is None or evaluate(spec["where"], d) is True]
    for field, descending in reversed(spec["order"]):
        rows.sort(key=lambda d: rank(d.get(field, MISSING)), reverse=descending)
    select = spec["select"]
    if select == "count":
        out = [len(rows)]
    elif select == "star":
        out = list(rows)
    elif select == "value":
        out = [d[spec["fields"][0]] for d in rows if spec["fields"][0] in d]
    else:
        out = [{f: d[f] for f in spec["fields"] if f in d} for d in rows]
    if spec["top"] is not None:
        out = out[:spec["top"]]
    if spec["offset"] is not None:
        out = out[spec["offset"]:spec["offset"] + spec["limit"]]
    return out


# ------------------------------------------------------------ generation
def literal(v) -> str:
    return json.dumps(v)


def render(cond) -> str:
    tag = cond[0]
    if tag == "cmp":
        _, field, op, operand = cond
        right = f"c.{operand[1]}" if operand[0] == "field" else literal(operand[1])
        return f"c.{field} {op} {right}"
    if tag in ("and", "or"):
        return f"({render(cond[1])} {tag.upper()} {render(cond[2])})"
    if tag == "not":
        return f"NOT ({render(cond[1])})"
    if tag == "in":
        return f"c.{cond[1]} IN ({', '.join(literal(v) for v in cond[2])})"
    return f"c.{cond[1]} BETWEEN {literal(cond[2])} AND {literal(cond[3])}"


field_names = st.sampled_from(FIELDS)
operand = st.one_of(st.tuples(st.just("lit"), SCALARS), st.tuples(st.just("field"), field_names))
leaf = st.one_of(
    st.tuples(st.just("cmp"), field_names, st.sampled_from(["=", "!=", "<", "<=", ">", ">="]), operand),
    st.tuples(st.just("in"), field_names, st.lists(SCALARS, min_size=1, max_size=3)),
    st.tuples(st.just("between"), field_names, SCALARS, SCALARS),
)
conditions = st.recursive(
    leaf,
    lambda inner: st.one_of(
        st.tuples(st.just("and"), inner, inner), st.tuples(st.just("or"), inner, inner), st.tuples(st.just("not"), inner)
    ),
    max_leaves=5,
)


@st.composite
def specs(draw):
    select = draw(st.sampled_from(["star", "value", "fields", "count"]))
    spec = {
        "select": select,
        "fields": draw(st.lists(field_names, min_size=1, max_size=3, unique=True)),
        "where": draw(st.none() | conditions),
        "order": [] if select == "count" else draw(st.lists(st.tuples(field_names, st.booleans()), max_size=2)),
        "top": draw(st.none() | st.integers(0, 6)),
        "offset": None,
        "limit": None,
    }
    if spec["top"] is None and draw(st.booleans()):
        spec["offset"], spec["limit"] = draw(st.integers(0, 5)), draw(st.integers(0, 5))
    return spec


def to_text(spec) -> str:
    top = f"TOP {spec['top']} " if spec["top"] is not None else ""
    projection = {
        "star": "*", "count": "VALUE COUNT(1)", "value": f"VALUE c.{spec['fields'][0]}",
        "fields": ", ".join(f"c.{f}" for f in spec["fields"]),
    }[spec["select"]]
    text = f"SELECT {top}{projection} FROM c"
    if spec["where"] is not None:
        text += f" WHERE {render(spec['where'])}"
    if spec["order"]:
        text += " ORDER BY " + ", ".join(f"c.{f} {'DESC' if d else 'ASC'}" for f, d in spec["order"])
    if spec["offset"] is not None:
        text += f" OFFSET {spec['offset']} LIMIT {spec['limit']}"
    return text


@st.composite
def documents(draw):
    docs = []
    for index in range(draw(st.integers(0, 12))):
        doc = {"id": str(index)}
        for field in FIELDS:
            value = draw(FIELD_VALUES)
            if value is not MISSING:
                doc[field] = value
        docs.append(doc)
    return docs


@settings(max_examples=examples(200), deadline=None)
@given(docs=documents(), spec=specs())
def test_engine_matches_reference(docs, spec):
    text = to_text(spec)
    assert compile_query(text).execute(docs, 0) == reference(docs, spec), text


@settings(max_examples=examples(100), deadline=None)
@given(docs=documents(), cond=conditions)
def test_filter_matches_matches_reference(docs, cond):
    query = compile_query(f"SELECT * FROM c WHERE {render(cond)}")
    assert [query.filter_matches(d, 0) for d in docs] == [evaluate(cond, d) is True for d in docs]
