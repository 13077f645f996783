"""Partial document update (the PATCH verb): apply a list of operations to a document, atomically.

Theory of operation. Paths are JSON Pointers (``/a/b/0``; ``~1`` is ``/`` and ``~0`` is ``~``
inside a name). All operations are checked for shape first, then applied in order to a working
copy; any failure raises PatchError and the caller's document is untouched, because containers
are copied on the way down the first time an operation writes below them (copy-on-write), and
containers we did not copy are never written. Inserted values are deep-copied, so the result
shares nothing mutable with ``operations`` either. Semantics, per the service's documentation:

* add      object: create or overwrite the member. array: insert at the index (shifting the
           rest right); the index may equal the length, or be ``-``, to append.
* set      like add, except that an existing array index is overwritten, not inserted before.
* replace  the target must already exist (``-`` never does); overwrite it.
* remove   the target must exist; array elements after it shift left.
* incr     the value must be a number. A missing object member is created with that value; an
           existing target must be a number and is increased (int + int stays int).
* move     ``from`` must exist and must not be a proper prefix of ``path``; remove it, then add
           it at ``path``.

Every operation needs the parent of its target to exist: paths are not created recursively.
At most PATCH_MAX_OPERATIONS operations per request. ``id``, system properties (``_rid``,
``_ts``, ``_etag`` …) and, when the caller names them, the partition key paths cannot be
touched: an item's identity never changes through a patch.
"""

import copy
import math
import re
from typing import Any, NamedTuple

from .limits import PATCH_MAX_OPERATIONS

SYSTEM_PROPERTIES = frozenset({"_rid", "_self", "_etag", "_ts", "_attachments", "_lsn"})
OPERATIONS = frozenset({"add", "set", "replace", "remove", "incr", "move"})
_NEEDS_VALUE = frozenset({"add", "set", "replace", "incr"})
_ARRAY_INDEX = re.compile(r"(0|[1-9][0-9]*)\Z")
_APPEND = "-"


class PatchError(Exception):
    """The patch is invalid or does not apply: 400 BadRequest; nothing was changed."""

    status = 400
    substatus = 0

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def parse_pointer(path: Any, field: str = "path") -> list[str]:
    """Split a JSON Pointer into unescaped tokens; "/a~1b/0" -> ["a/b", "0"]."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise PatchError(f"The '{field}' of a patch operation must be a string starting with '/'; "
                         f"got {path!r}.")
    tokens = path[1:].split("/")
    for token in tokens:
        if re.search(r"~(?![01])", token):
            raise PatchError(f"Invalid escape in {field} {path!r}: '~' must be followed by 0 or 1.")
    return [t.replace("~1", "/").replace("~0", "~") for t in tokens]


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _fits_double(v: int | float) -> bool:
    if isinstance(v, float):
        return math.isfinite(v)
    try:
        float(v)
    except OverflowError:
        return False
    return True


def _overlaps(a: list[str], b: list[str]) -> bool:
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def _check_protected(tokens: list[str], path: str, pk_tokens: list[list[str]]) -> None:
    head = tokens[0]
    if head == "id" or head in SYSTEM_PROPERTIES:
        raise PatchError(f"Patch cannot change '/{head}' (path {path!r}): the id and system "
                         f"properties are set by the service, not by a patch.")
    for pk in pk_tokens:
        if _overlaps(tokens, pk):
            raise PatchError(f"Patch cannot change the partition key '/{'/'.join(pk)}' "
                             f"(path {path!r}): an item's partition key is fixed at creation.")


class _Op(NamedTuple):
    name: str
    path: str
    tokens: list[str]
    from_path: str | None
    from_tokens: list[str] | None
    value: Any


def _validated(operations: Any, pk_tokens: list[list[str]]) -> list[_Op]:
    if not isinstance(operations, list) or not operations:
        raise PatchError("A patch needs a non-empty list of operations.")
    if len(operations) > PATCH_MAX_OPERATIONS:
        raise PatchError(f"A patch may hold at most {PATCH_MAX_OPERATIONS} operations; "
                         f"this one has {len(operations)}.")
    checked = []
    for i, op in enumerate(operations):
        if not isinstance(op, dict):
            raise PatchError(f"Patch operation {i} must be an object, got {op!r}.")
        name = op.get("op")
        if name not in OPERATIONS:
            raise PatchError(f"Patch operation {i} has unknown op {name!r}; expected one of "
                             f"{', '.join(sorted(OPERATIONS))}.")
        tokens = parse_pointer(op.get("path"))
        _check_protected(tokens, op["path"], pk_tokens)
        from_tokens = None
        if name == "move":
            from_tokens = parse_pointer(op.get("from"), "from")
            _check_protected(from_tokens, op["from"], pk_tokens)
        if name in _NEEDS_VALUE and "value" not in op:
            raise PatchError(f"Patch operation {i} ({name} {op['path']!r}) needs a 'value'.")
        if name == "incr" and not (_is_number(op["value"]) and math.isfinite(op["value"])):
            raise PatchError(f"Patch operation {i} (incr {op['path']!r}) needs a numeric value; "
                             f"got {op['value']!r}.")
        checked.append(_Op(name, op["path"], tokens, op.get("from"), from_tokens, op.get("value")))
    return checked


class _WorkingCopy:
    """A document under edit. Containers in ``_owned`` are ours to write; any other container
    is still shared with the caller's document and is copied before its first write."""

    def __init__(self, doc: dict):
        self.root = dict(doc)
        self._owned: dict[int, Any] = {id(self.root): self.root}   # id -> object, kept alive

    def _own(self, obj: Any) -> Any:
        self._owned[id(obj)] = obj
        return obj

    def lookup(self, tokens: list[str]) -> tuple[bool, Any]:
        """(exists, value) without copying anything."""
        node: Any = self.root
        for token in tokens:
            if isinstance(node, dict) and token in node:
                node = node[token]
            elif isinstance(node, list) and _ARRAY_INDEX.match(token) and int(token) < len(node):
                node = node[int(token)]
            else:
                return False, None
        return True, node

    def parent(self, tokens: list[str], path: str) -> Any:
        """The writable container holding the target of ``tokens``, copying on the way down."""
        node: Any = self.root
        for depth, token in enumerate(tokens[:-1]):
            exists, child = _child(node, token)
            where = "/" + "/".join(tokens[: depth + 1])
            if not exists:
                raise PatchError(f"Path {path!r} cannot be applied: {where!r} does not exist, and "
                                 f"a patch only creates the last segment of a path.")
            if not isinstance(child, (dict, list)):
                raise PatchError(f"Path {path!r} cannot be applied: {where!r} is a "
                                 f"{_json_type(child)}, not an object or array.")
            if id(child) not in self._owned:
                child = self._own(dict(child) if isinstance(child, dict) else list(child))
                _put(node, token, child)
            node = child
        return node

    def fresh(self, value: Any) -> Any:
        return self._own(copy.deepcopy(value)) if isinstance(value, (dict, list)) else value


def _child(node: Any, token: str) -> tuple[bool, Any]:
    if isinstance(node, dict):
        return (token in node), node.get(token)
    if isinstance(node, list) and _ARRAY_INDEX.match(token) and int(token) < len(node):
        return True, node[int(token)]
    return False, None


def _put(node: Any, token: str, value: Any) -> None:
    if isinstance(node, dict):
        node[token] = value
    else:
        node[int(token)] = value


def _json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if _is_number(v):
        return "number"
    return "string" if isinstance(v, str) else type(v).__name__


def _array_index(parent: list, token: str, path: str, allow_end: bool) -> int:
    """The index ``token`` names in ``parent``; ``allow_end`` admits len(parent) and '-'."""
    if token == _APPEND and allow_end:
        return len(parent)
    if not _ARRAY_INDEX.match(token):
        raise PatchError(f"Path {path!r}: {token!r} is not a valid index into an array.")
    index = int(token)
    limit = len(parent) if allow_end else len(parent) - 1
    if index > limit:
        raise PatchError(f"Path {path!r}: index {index} is out of bounds for an array of "
                         f"length {len(parent)}.")
    return index


def _add(w: _WorkingCopy, tokens: list[str], value: Any, path: str, overwrite_index: bool) -> None:
    parent = w.parent(tokens, path)
    if isinstance(parent, dict):
        parent[tokens[-1]] = value
        return
    index = _array_index(parent, tokens[-1], path, allow_end=True)
    if overwrite_index and index < len(parent):
        parent[index] = value
    else:
        parent.insert(index, value)


def _replace(w: _WorkingCopy, tokens: list[str], value: Any, path: str) -> None:
    parent = w.parent(tokens, path)
    if isinstance(parent, dict):
        if tokens[-1] not in parent:
            raise PatchError(f"Replace needs an existing target, and {path!r} does not exist.")
        parent[tokens[-1]] = value
        return
    parent[_array_index(parent, tokens[-1], path, allow_end=False)] = value


def _remove(w: _WorkingCopy, tokens: list[str], path: str) -> Any:
    parent = w.parent(tokens, path)
    if isinstance(parent, dict):
        if tokens[-1] not in parent:
            raise PatchError(f"Cannot remove {path!r}: it does not exist.")
        return parent.pop(tokens[-1])
    return parent.pop(_array_index(parent, tokens[-1], path, allow_end=False))


def _incr(w: _WorkingCopy, tokens: list[str], delta: int | float, path: str) -> None:
    parent = w.parent(tokens, path)
    if isinstance(parent, dict):
        if tokens[-1] not in parent:
            parent[tokens[-1]] = delta
            return
        key: Any = tokens[-1]
    else:
        key = _array_index(parent, tokens[-1], path, allow_end=False)
    current = parent[key]
    if not _is_number(current):
        raise PatchError(f"Cannot increment {path!r}: it holds a {_json_type(current)}, "
                         f"not a number.")
    total = current + delta
    if not _fits_double(total):
        raise PatchError(f"Incrementing {path!r} by {delta!r} overflows.")
    parent[key] = total


def _move(w: _WorkingCopy, op: _Op) -> None:
    assert op.from_tokens is not None and op.from_path is not None
    exists, _ = w.lookup(op.from_tokens)
    if not exists:
        raise PatchError(f"Cannot move from {op.from_path!r}: it does not exist.")
    n = len(op.from_tokens)
    if op.tokens[:n] == op.from_tokens and len(op.tokens) > n:
        raise PatchError(f"Cannot move {op.from_path!r} into its own child {op.path!r}.")
    if op.tokens == op.from_tokens:
        return
    value = _remove(w, op.from_tokens, op.from_path)
    _add(w, op.tokens, value, op.path, overwrite_index=False)


def apply_patch(doc: dict, operations: list, *, partition_key_paths: tuple[str, ...] = ()) -> dict:
    """The document after applying ``operations`` in order; ``doc`` itself is never modified.

    ``partition_key_paths`` (the container's ``partitionKey.paths``, e.g. ``("/pk",)``) marks
    paths a patch may not touch. Raises PatchError (400) when any operation is invalid or fails.
    """
    if not isinstance(doc, dict):
        raise PatchError("Only a JSON object can be patched.")
    pk_tokens = [parse_pointer(p, "partition key path") for p in partition_key_paths]
    ops = _validated(operations, pk_tokens)
    w = _WorkingCopy(doc)
    for op in ops:
        if op.name in ("add", "set"):
            _add(w, op.tokens, w.fresh(op.value), op.path, overwrite_index=(op.name == "set"))
        elif op.name == "replace":
            _replace(w, op.tokens, w.fresh(op.value), op.path)
        elif op.name == "remove":
            _remove(w, op.tokens, op.path)
        elif op.name == "incr":
            _incr(w, op.tokens, op.value, op.path)
        else:
            _move(w, op)
    return w.root
