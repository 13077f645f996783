"""Checks the gateway runs on a request body before anything is applied.

Theory of operation. Each check either returns or raises ValidationError carrying the status
and substatus to answer with; a validation failure always means the operation definitely did not
happen. ``parse_json_body`` is the only way a body becomes a Python object, so every later stage
may assume: the bytes were UTF-8; the value is plain JSON (dict, list, str, int, float, bool,
None) with finite numbers, no lone surrogates and no duplicate member names; and it nests at
most NESTING_DEPTH_MAX deep.

Decisions where the service is vague:
* Duplicate member names are rejected. Python would keep the last one silently, so the stored
  item could differ from what the client believes it sent (and its partition key with it).
* NaN, Infinity and number literals that overflow to infinity (``1e400``) are rejected: JSON
  has no such numbers and the SDKs cannot read them back. An integer written out past a
  double's range is kept in a body (Python and the SDKs read it back; finding one would cost a
  scan of every body) but refused where it would be hashed as a double: in a partition key
  (``check_numbers_in_double_range``).
* Lone UTF-16 surrogates (``"\\ud800"``) are rejected: they cannot be encoded as UTF-8 and
  would break every later serialisation.
* Ids containing ``/ \\ ? #`` are rejected up front. The service accepts them on create, but
  such an item can never be read, replaced or deleted by URL afterwards. The ids ``.`` and
  ``..`` are rejected for the same reason: HTTP clients collapse them out of the path.
"""

import json
import math
import re
from itertools import accumulate
from typing import Any

ITEM_BYTES_MAX = 2 * 1024 * 1024
ID_BYTES_MAX = 1023
NESTING_DEPTH_MAX = 128
ID_FORBIDDEN_CHARS = ("/", "\\", "?", "#")
ID_DOT_SEGMENTS = (".", "..")

_BAD_REQUEST = 400
_TOO_LARGE = 413
_MAYBE_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


class ValidationError(Exception):
    """The request is invalid; nothing was applied (a definite failure)."""

    definite = True

    def __init__(self, status: int, substatus: int, message: str):
        super().__init__(message)
        self.status = status
        self.substatus = substatus
        self.message = message


def _bad(message: str) -> ValidationError:
    return ValidationError(_BAD_REQUEST, 0, message)


def check_id(id_value: Any) -> None:
    """The ``id`` property of a resource: a non-empty string of at most 1023 UTF-8 bytes
    without ``/ \\ ? #``, and neither ``.`` nor ``..``."""
    if not isinstance(id_value, str):
        # The service gives the same answer for a missing id and for an id that is not a string.
        raise _bad("The input content is invalid because the required properties - 'id; ' - "
                   "are missing")
    if not id_value:
        raise _bad("The 'id' property must not be empty.")
    size = len(id_value.encode("utf-8", "surrogatepass"))
    if size > ID_BYTES_MAX:
        raise _bad(f"The 'id' is {size} bytes long in UTF-8; at most {ID_BYTES_MAX} are allowed.")
    for ch in ID_FORBIDDEN_CHARS:
        if ch in id_value:
            raise _bad(f"The 'id' {id_value!r} contains the character {ch!r}. The characters "
                       f"'/', '\\', '?' and '#' are not allowed in an id, because an item with "
                       f"one could not be addressed by URL.")
    if id_value in ID_DOT_SEGMENTS:
        raise _bad(f"The 'id' {id_value!r} is not allowed: HTTP clients remove '.' and '..' path "
                   f"segments, so no URL could address a resource with this id.")


def check_item_size(body_bytes_len: int) -> None:
    if body_bytes_len > ITEM_BYTES_MAX:
        raise ValidationError(_TOO_LARGE, 0, f"Request size is too large: {body_bytes_len} bytes, "
                                             f"the limit is {ITEM_BYTES_MAX}.")


def _too_deep() -> ValidationError:
    return _bad(f"The JSON nests deeper than the maximum of {NESTING_DEPTH_MAX} levels of "
                f"objects and arrays.")


# What decides nesting once the strings are gone: brackets; every other byte is dropped.
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_BRACKET_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
BRACKETS_PER_STEP = 65_536          # brackets whose depths are summed at once (an early stop)


def text_nests_at_most(text: str, limit: int = NESTING_DEPTH_MAX) -> bool:
    """Whether JSON text opens at most ``limit`` objects and arrays inside each other, found
    without parsing it (so without recursion); brackets inside strings do not count."""
    if text.count("[") + text.count("{") <= limit:
        return True
    return bytes_nest_at_most(text.encode("utf-8", "surrogatepass"), limit)


def bytes_nest_at_most(raw: bytes, limit: int = NESTING_DEPTH_MAX) -> bool:
    """text_nests_at_most of UTF-8 JSON text. The work is done by bytes methods and itertools,
    never a Python step per token: a batch body holds hundreds of objects, and a loop over its
    tokens cost more than parsing it. Escapes go first (an escaped backslash, then an escaped
    quote: left to right, as a tokenizer pairs them); then the text is split at its quotes, and
    what lies between the quotes of a pair is a string's, the rest is structure. (UTF-8 never
    uses a quote, a backslash or a bracket byte inside a multi-byte character.)"""
    if len(raw) <= limit:
        return True
    # find, not `in`: bytes.__contains__ first tries the needle as an integer, which costs a
    # formatted TypeError (about 1.8 k instructions, on every write) before it searches.
    if raw.find(b"\\") >= 0:
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    parts = raw.split(b'"')
    outside = parts[::2]
    if len(parts) % 2 == 0:             # an odd quote opens no string: what follows it is structure
        outside.append(parts[-1])
    brackets = b"".join(outside).translate(None, _NOT_BRACKETS)
    if brackets.count(b"[") + brackets.count(b"{") <= limit:
        return True
    step, depth = _BRACKET_STEP.__getitem__, 0
    for start in range(0, len(brackets), BRACKETS_PER_STEP):
        depths = list(accumulate(map(step, brackets[start:start + BRACKETS_PER_STEP]), initial=depth))
        if max(depths) > limit:
            return False
        depth = depths[-1]
    return True


def check_depth(obj: Any) -> None:
    """Objects and arrays may nest at most NESTING_DEPTH_MAX deep (``{}`` is depth 1).

    Iterative, so a hostile value cannot exhaust the stack; it stops at the first container
    past the limit, so it also terminates on self-referencing Python structures."""
    stack = [(obj, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > NESTING_DEPTH_MAX:
            raise _too_deep()
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text} is out of range")
    return value


def _unique_members(pairs: list[tuple[str, Any]]) -> dict:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"duplicate member name {key!r}")
            seen.add(key)
    return obj


def _check_no_surrogates(obj: Any) -> None:
    stack = [obj]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            if _SURROGATE.search(node):
                raise _bad("The JSON contains an unpaired UTF-16 surrogate escape (\\ud800-\\udfff).")
        elif isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


# One decoder for every body: json.loads with hooks would build a new one per call.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float,
                            object_pairs_hook=_unique_members)


_SCAN = _DECODER.scan_once


def _decode(text: str) -> Any:
    """json.loads(text, **the hooks above), including its refusal of a leading BOM."""
    if text.startswith("\ufeff"):
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    # The usual body, an object with nothing around it, goes straight to the C scanner, which
    # is what JSONDecoder.decode runs between two whitespace matches. Anything else, an error
    # included, takes the full path, which raises the error with its message and position.
    if text[:1] == "{" and text[-1:] == "}":
        try:
            value, end = _SCAN(text, 0)
        except (StopIteration, json.JSONDecodeError):
            pass
        else:
            if end == len(text):
                return value
    return _DECODER.decode(text)


def check_numbers_in_double_range(obj: Any) -> None:
    """Every number in obj fits in a double. JSON integers are arbitrarily long in Python; the
    service reads numbers as doubles, so an integer past about 1.8e308 is no number it has."""
    stack = [obj]
    while stack:
        node = stack.pop()
        t = type(node)
        if t is int:
            try:
                float(node)
            except OverflowError:
                raise _bad(f"The number {str(node)[:20]}... ({len(str(node))} digits) is beyond the "
                           "range of a double (about 1.8e308).") from None
        elif t is dict:
            stack.extend(node.values())
        elif t is list:
            stack.extend(node)


def parse_json_body(raw: bytes) -> Any:
    """The JSON value in ``raw``, or ValidationError(400) saying what is wrong and where."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _bad(f"The request body is not valid UTF-8 (byte {e.start}).") from None
    # Depth is checked on the text, before parsing: the parser recurses per level, and a stack
    # run deep enough to raise RecursionError also fails whatever the collector runs on it then.
    if not bytes_nest_at_most(raw):
        raise _too_deep()
    try:
        value = _decode(text)
    except json.JSONDecodeError as e:
        raise _bad(f"The request body is not valid JSON: {e.msg} at line {e.lineno} column "
                   f"{e.colno} (char {e.pos}).") from None
    except RecursionError:
        raise _too_deep() from None
    except ValueError as e:   # raised by our hooks, or int() on a number with too many digits
        raise _bad(f"The request body is not valid JSON: {e}.") from None
    if raw.find(b"\\u") >= 0 and _MAYBE_SURROGATE.search(raw):     # find: see bytes_nest_at_most
        _check_no_surrogates(value)
    return value
