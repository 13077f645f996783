"""Partial document update follows the service's documented semantics (unit cases per operation and
per error), and hypothesis checks that the input is never mutated, a failed patch changes nothing,
and set-then-read returns the value that was set."""

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regionlab.emulator.core.patch import PatchError, apply_patch, parse_pointer
from tiers import examples
from regionlab.emulator.core.limits import PATCH_MAX_OPERATIONS

DOC = {
    "id": "e1",
    "pk": "road",
    "name": "R-410",
    "price": 455.95,
    "inventory": {"quantity": 15},
    "used": False,
    "tags": ["r-series"],
    "_rid": "AAAAAYAAAAEBAAAAAAAAAA==",
    "_ts": 1,
}


def patched(*ops, doc=None, **kw):
    doc = DOC if doc is None else doc
    before = copy.deepcopy(doc)
    out = apply_patch(doc, list(ops), **kw)
    assert doc == before
    return out


def fails(*ops, doc=None, match=None, **kw):
    doc = DOC if doc is None else doc
    before = copy.deepcopy(doc)
    with pytest.raises(PatchError, match=match) as e:
        apply_patch(doc, list(ops), **kw)
    assert doc == before
    assert e.value.status == 400
    return e.value


def test_documented_example():
    out = patched(
        {"op": "add", "path": "/color", "value": "silver"},
        {"op": "remove", "path": "/used"},
        {"op": "set", "path": "/price", "value": 355.45},
        {"op": "incr", "path": "/inventory/quantity", "value": 10},
        {"op": "add", "path": "/tags/-", "value": "featured-bikes"},
        {"op": "move", "from": "/color", "path": "/inventory/color"},
    )
    assert out["price"] == 355.45 and "used" not in out and "color" not in out
    assert out["inventory"] == {"quantity": 25, "color": "silver"}
    assert out["tags"] == ["r-series", "featured-bikes"]


def test_add():
    doc = {"id": "x", "a": [1, 2, 3], "o": {"k": 1}}
    assert patched({"op": "add", "path": "/o/k", "value": 9}, doc=doc)["o"] == {"k": 9}
    assert patched({"op": "add", "path": "/a/1", "value": 9}, doc=doc)["a"] == [1, 9, 2, 3]
    assert patched({"op": "add", "path": "/a/3", "value": 9}, doc=doc)["a"] == [1, 2, 3, 9]
    assert patched({"op": "add", "path": "/a/-", "value": 9}, doc=doc)["a"] == [1, 2, 3, 9]
    fails({"op": "add", "path": "/a/4", "value": 9}, doc=doc, match="out of bounds")
    fails({"op": "add", "path": "/a/01", "value": 9}, doc=doc, match="not a valid index")


def test_set():
    doc = {"id": "x", "a": [1, 2, 3]}
    assert patched({"op": "set", "path": "/a/1", "value": 9}, doc=doc)["a"] == [1, 9, 3]
    assert patched({"op": "set", "path": "/a/3", "value": 9}, doc=doc)["a"] == [1, 2, 3, 9]
    assert patched({"op": "set", "path": "/new", "value": None}, doc=doc)["new"] is None
    fails({"op": "set", "path": "/a/5", "value": 9}, doc=doc, match="out of bounds")


def test_replace():
    doc = {"id": "x", "a": [1, 2], "o": {"k": 1}}
    assert patched({"op": "replace", "path": "/o/k", "value": [7]}, doc=doc)["o"] == {"k": [7]}
    assert patched({"op": "replace", "path": "/a/0", "value": 7}, doc=doc)["a"] == [7, 2]
    fails({"op": "replace", "path": "/o/missing", "value": 1}, doc=doc, match="does not exist")
    fails({"op": "replace", "path": "/a/2", "value": 1}, doc=doc, match="out of bounds")
    fails({"op": "replace", "path": "/a/-", "value": 1}, doc=doc)


def test_remove():
    doc = {"id": "x", "a": [1, 2, 3], "o": {"k": 1}}
    assert patched({"op": "remove", "path": "/a/0"}, doc=doc)["a"] == [2, 3]
    assert patched({"op": "remove", "path": "/o/k"}, doc=doc)["o"] == {}
    fails({"op": "remove", "path": "/o/missing"}, doc=doc, match="does not exist")
    fails({"op": "remove", "path": "/a/3"}, doc=doc, match="out of bounds")


def test_incr():
    doc = {"id": "x", "n": 1, "f": 1.5, "s": "1", "b": True, "a": [1, "x"]}
    assert patched({"op": "incr", "path": "/n", "value": 2}, doc=doc)["n"] == 3
    assert isinstance(patched({"op": "incr", "path": "/n", "value": 2}, doc=doc)["n"], int)
    assert patched({"op": "incr", "path": "/n", "value": -0.5}, doc=doc)["n"] == 0.5
    assert patched({"op": "incr", "path": "/f", "value": 1}, doc=doc)["f"] == 2.5
    assert patched({"op": "incr", "path": "/missing", "value": 4}, doc=doc)["missing"] == 4
    assert patched({"op": "incr", "path": "/a/0", "value": 4}, doc=doc)["a"] == [5, "x"]
    fails({"op": "incr", "path": "/s", "value": 1}, doc=doc, match="string, not a number")
    fails({"op": "incr", "path": "/b", "value": 1}, doc=doc, match="boolean")
    fails({"op": "incr", "path": "/a/1", "value": 1}, doc=doc)
    fails({"op": "incr", "path": "/a/2", "value": 1}, doc=doc)
    fails({"op": "incr", "path": "/n", "value": "1"}, doc=doc, match="numeric value")
    fails({"op": "incr", "path": "/n", "value": True}, doc=doc, match="numeric value")
    fails({"op": "incr", "path": "/f", "value": 1.7e308}, doc={"id": "x", "f": 1.7e308}, match="overflow")


def test_move():
    doc = {"id": "x", "a": {"b": 1}, "l": [1, 2, 3]}
    assert patched({"op": "move", "from": "/a/b", "path": "/c"}, doc=doc) == {"id": "x", "a": {}, "c": 1, "l": [1, 2, 3]}
    assert patched({"op": "move", "from": "/l/0", "path": "/l/-"}, doc=doc)["l"] == [2, 3, 1]
    assert patched({"op": "move", "from": "/a", "path": "/a"}, doc=doc) == doc
    fails({"op": "move", "from": "/nope", "path": "/c"}, doc=doc, match="does not exist")
    fails({"op": "move", "from": "/a", "path": "/a/b/c"}, doc=doc, match="its own child")
    fails({"op": "move", "path": "/c"}, doc=doc, match="'from'")


def test_pointer_escapes():
    assert parse_pointer("/a~1b/c~0d/~01") == ["a/b", "c~d", "~1"]
    doc = {"id": "x", "a/b": {"~": 1}}
    assert patched({"op": "set", "path": "/a~1b/~0", "value": 2}, doc=doc)["a/b"] == {"~": 2}
    fails({"op": "set", "path": "/a~2", "value": 1}, doc=doc, match="escape")
    fails({"op": "set", "path": "a", "value": 1}, doc=doc, match="starting with '/'")
    fails({"op": "set", "path": "", "value": 1}, doc=doc)


def test_paths_are_not_created_recursively():
    fails({"op": "set", "path": "/no/such/path", "value": 1}, match="'/no' does not exist")
    fails({"op": "set", "path": "/name/x", "value": 1}, match="is a string")
    fails({"op": "add", "path": "/tags/0/x", "value": 1}, match="is a string")


def test_identity_and_system_properties_are_protected():
    for path in ("/id", "/_rid", "/_ts", "/_etag", "/_self", "/_attachments"):
        fails({"op": "set", "path": path, "value": "y"}, match="cannot change")
        fails({"op": "remove", "path": path}, match="cannot change")
    fails({"op": "move", "from": "/id", "path": "/x"}, match="cannot change")
    fails({"op": "set", "path": "/pk", "value": "y"}, partition_key_paths=("/pk",), match="partition key")
    doc = {"id": "x", "a": {"b": 1, "c": 2}}
    fails({"op": "remove", "path": "/a"}, doc=doc, partition_key_paths=("/a/b",), match="partition key")
    fails({"op": "set", "path": "/a/b/z", "value": 1}, doc=doc, partition_key_paths=("/a/b",))
    assert patched({"op": "set", "path": "/a/c", "value": 3}, doc=doc, partition_key_paths=("/a/b",))["a"]["c"] == 3
    assert patched({"op": "set", "path": "/pk", "value": "y"})["pk"] == "y"   # no pk paths given


def test_shape_errors():
    fails(match="non-empty")
    fails(*[{"op": "set", "path": f"/k{i}", "value": i} for i in range(PATCH_MAX_OPERATIONS + 1)],
          match="at most 10")
    assert len(patched(*[{"op": "set", "path": f"/k{i}", "value": i} for i in range(PATCH_MAX_OPERATIONS)])) == len(DOC) + 10
    fails({"op": "copy", "from": "/a", "path": "/b"}, match="unknown op")
    fails({"op": "Set", "path": "/a", "value": 1}, match="unknown op")
    fails({"op": "set", "path": "/a"}, match="needs a 'value'")
    fails("set /a 1", match="must be an object")
    with pytest.raises(PatchError):
        apply_patch(DOC, {"op": "set", "path": "/a", "value": 1})


def test_a_late_failure_undoes_earlier_operations():
    fails({"op": "set", "path": "/inventory/quantity", "value": 0},
          {"op": "add", "path": "/tags/0", "value": "first"},
          {"op": "remove", "path": "/nope"})


def test_result_shares_nothing_mutable_with_operations():
    value = {"deep": [1, 2]}
    out = patched({"op": "set", "path": "/v", "value": value})
    value["deep"].append(3)
    assert out["v"] == {"deep": [1, 2]}


def test_untouched_subtrees_are_shared_and_touched_ones_copied():
    doc = {"id": "x", "big": {"k": list(range(10))}, "edit": {"n": 1}}
    out = apply_patch(doc, [{"op": "incr", "path": "/edit/n", "value": 1}])
    assert out["big"] is doc["big"]
    assert out["edit"] is not doc["edit"] and doc["edit"] == {"n": 1}


# --- Properties ------------------------------------------------------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False, allow_infinity=False, width=32) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text("abc", max_size=2), inner, max_size=4),
    max_leaves=20,
)
_docs = st.dictionaries(st.text("abc", max_size=2), _json, max_size=5).map(lambda d: {**d, "id": "x"})


@st.composite
def _paths_into(draw, doc):
    """A path that mostly walks existing members and indexes of ``doc``, sometimes one step
    past them, sometimes into a protected property."""
    if draw(st.integers(0, 19)) == 7:
        return draw(st.sampled_from(["/id", "/_ts", "/nope/deeper", "/a~2"]))
    tokens, node = [], doc
    while True:
        keys = sorted(k for k in node if k != "id") if isinstance(node, dict) else []
        if keys and draw(st.booleans()):
            key = draw(st.sampled_from(keys))
        elif isinstance(node, list) and draw(st.booleans()):
            key = draw(st.sampled_from([str(i) for i in range(len(node) + 2)] + ["-"]))
        else:
            key = draw(st.text("abc", max_size=2))
        tokens.append(key)
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            break
        if not isinstance(node, (dict, list)) or draw(st.booleans()):
            break
    return "/" + "/".join(t.replace("~", "~0").replace("/", "~1") for t in tokens)


@st.composite
def _patches(draw):
    doc = draw(_docs)
    n = draw(st.integers(0, 12)) if draw(st.integers(0, 19)) == 7 else draw(st.integers(1, 4))
    ops = []
    for _ in range(n):
        ops.append({"op": draw(st.sampled_from(["add", "set", "replace", "remove", "incr", "move"])),
                    "path": draw(_paths_into(doc)), "from": draw(_paths_into(doc)),
                    "value": draw(st.integers(-5, 5) | _json)})
    return doc, ops


@settings(max_examples=examples(150), deadline=None)
@given(_patches())
def test_input_is_never_mutated_and_failure_changes_nothing(patch):
    doc, ops = patch
    before = copy.deepcopy(doc)
    ops_before = copy.deepcopy(ops)
    try:
        out = apply_patch(doc, ops)
    except PatchError:
        pass
    else:
        assert out["id"] == "x"
    assert doc == before
    assert ops == ops_before


@settings(max_examples=examples(150), deadline=None)
@given(st.data(), _docs, _json)
def test_set_then_read_gives_the_value(data, doc, value):
    path = data.draw(_paths_into(doc))
    try:
        out = apply_patch(doc, [{"op": "set", "path": path, "value": value}])
    except PatchError:
        return
    node = out
    for token in parse_pointer(path)[:-1]:
        node = node[int(token)] if isinstance(node, list) else node[token]
    last = parse_pointer(path)[-1]
    if isinstance(node, list):
        index = len(node) - 1 if last == "-" else int(last)
        assert node[index] == value
    else:
        assert node[last] == value
    # And a later patch on the result leaves the first result untouched too.
    snapshot = copy.deepcopy(out)
    later = [{"op": "remove", "path": path}, {"op": "set", "path": path, "value": [value]}]
    try:
        apply_patch(out, later)
    except PatchError:
        pass
    assert out == snapshot
