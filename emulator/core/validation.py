"""Checks the gateway runs on a request body before anything is applied.

Theory of operation. Each check either returns or raises ValidationError carrying the status
and substatus to answer with; a validation failure always means the operation definitely did not
happen. ``parse_json_body`` (and ``parse_item_body``, its form for an item's body, which also
says whether the body can be stored as sent) is the only way a body becomes a Python object, so
every later stage may assume: the bytes were UTF-8; the value is plain JSON (dict, list, str,
int, float, bool, None) with finite numbers, no lone surrogates and no duplicate member names;
and it nests at most ITEM_NESTING_MAX_LEVELS deep.

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

from .limits import ID_MAX_BYTES, ITEM_MAX_BYTES, ITEM_NESTING_MAX_LEVELS

ID_FORBIDDEN_CHARS = ("/", "\\", "?", "#")
ID_DOT_SEGMENTS = (".", "..")

_BAD_REQUEST = 400
_TOO_LARGE = 413
_MAYBE_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_ID_FORBIDDEN = re.compile("[" + re.escape("".join(ID_FORBIDDEN_CHARS)) + "]")


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
    # An ASCII id is as long in UTF-8 as in characters (isascii needs no pass over the text).
    size = len(id_value) if id_value.isascii() else len(id_value.encode("utf-8", "surrogatepass"))
    if size > ID_MAX_BYTES:
        raise _bad(f"The 'id' is {size} bytes long in UTF-8; at most {ID_MAX_BYTES} are allowed.")
    if _ID_FORBIDDEN.search(id_value) is not None:
        _refuse_forbidden_char(id_value)
    if id_value in ID_DOT_SEGMENTS:
        raise _bad(f"The 'id' {id_value!r} is not allowed: HTTP clients remove '.' and '..' path "
                   f"segments, so no URL could address a resource with this id.")


def _refuse_forbidden_char(id_value: str) -> None:
    """check_id's 400 for the first of ID_FORBIDDEN_CHARS that id_value holds."""
    for ch in ID_FORBIDDEN_CHARS:
        if ch in id_value:
            raise _bad(f"The 'id' {id_value!r} contains the character {ch!r}. The characters "
                       f"'/', '\\', '?' and '#' are not allowed in an id, because an item with "
                       f"one could not be addressed by URL.")


def check_item_size(body_bytes_len: int) -> None:
    if body_bytes_len > ITEM_MAX_BYTES:
        raise ValidationError(_TOO_LARGE, 0, f"Request size is too large: {body_bytes_len} bytes, "
                                             f"the limit is {ITEM_MAX_BYTES}.")


def _too_deep() -> ValidationError:
    return _bad(f"The JSON nests deeper than the maximum of {ITEM_NESTING_MAX_LEVELS} levels of "
                f"objects and arrays.")


# What decides nesting once the strings are gone: brackets; every other byte is dropped.
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_BRACKET_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
BRACKETS_PER_STEP = 65_536          # brackets whose depths are summed at once (an early stop)


def text_nests_at_most(text: str, limit: int = ITEM_NESTING_MAX_LEVELS) -> bool:
    """Whether JSON text opens at most ``limit`` objects and arrays inside each other, found
    without parsing it (so without recursion); brackets inside strings do not count."""
    if text.count("[") + text.count("{") <= limit:
        return True
    return bytes_nest_at_most(text.encode("utf-8", "surrogatepass"), limit)


def bytes_nest_at_most(raw: bytes, limit: int = ITEM_NESTING_MAX_LEVELS) -> bool:
    """text_nests_at_most of UTF-8 JSON text. The work is done by bytes methods and itertools,
    never a Python step per token: a batch body holds hundreds of objects, and a loop over its
    tokens cost more than parsing it (see outside_strings)."""
    if len(raw) <= limit:
        return True
    return structure_nests_at_most(outside_strings(raw), limit)


def outside_strings(raw: bytes) -> bytes:
    """The bytes of UTF-8 JSON text that lie outside its strings: its structure (brackets,
    colons, commas, whitespace, numbers and literals). Escapes go first (an escaped backslash,
    then an escaped quote: left to right, as a tokenizer pairs them); then the text is split at
    its quotes, and what lies between the quotes of a pair is a string's, the rest is structure.
    (UTF-8 never uses a quote, a backslash or a bracket byte inside a multi-byte character.)"""
    if raw.partition(b"\\")[1]:        # (one argument: cheaper than find's optional bounds)
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    parts = raw.split(b'"')
    outside = parts[::2]
    if len(parts) % 2 == 0:             # an odd quote opens no string: what follows it is structure
        outside.append(parts[-1])
    return b"".join(outside)


def structure_nests_at_most(structure: bytes, limit: int = ITEM_NESTING_MAX_LEVELS) -> bool:
    """bytes_nest_at_most of the structure outside_strings found."""
    if structure.count(b"[") + structure.count(b"{") <= limit:
        return True
    brackets = structure.translate(None, _NOT_BRACKETS)
    step, depth = _BRACKET_STEP.__getitem__, 0
    for start in range(0, len(brackets), BRACKETS_PER_STEP):
        depths = list(accumulate(map(step, brackets[start:start + BRACKETS_PER_STEP]), initial=depth))
        if max(depths) > limit:
            return False
        depth = depths[-1]
    return True


def check_depth(obj: Any) -> None:
    """Objects and arrays may nest at most ITEM_NESTING_MAX_LEVELS deep (``{}`` is depth 1).

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
        if depth > ITEM_NESTING_MAX_LEVELS:
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


# As Python writes a float back (jsontext.dumps: float.__repr__). parse_item_body's decoders note
# here whether a float of the body it is parsing was written otherwise ("1E5", "0.000001"): a
# flag in a list, since the parser's hook takes nothing but the number's text.
_FLOAT_RECAST = [False]


def _item_float(text: str) -> float:
    """_finite_float, noting a float not written as Python writes it."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text} is out of range")
    if repr(value) != text:
        _FLOAT_RECAST[0] = True
    return value


# One decoder for every body: json.loads with hooks would build a new one per call. An item has
# its own two, which note recast floats; the flat one leaves out the duplicate check (a Python
# call per object), which parse_item_body makes by counting members instead.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float,
                            object_pairs_hook=_unique_members)
_ITEM_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_item_float,
                                 object_pairs_hook=_unique_members)
_FLAT_ITEM_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_item_float)


def _decode(text: str, decoder: json.JSONDecoder = _DECODER) -> Any:
    """json.loads(text, **the hooks above), including its refusal of a leading BOM."""
    if text[:1] == "{" and text[-1:] == "}":
        value = _scanned_object(text, decoder)
        if value is not None:
            return value
    if text.startswith("\ufeff"):
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    return decoder.decode(text)


def _scanned_object(text: str, decoder: json.JSONDecoder) -> dict | None:
    """The usual body, text that opens with '{' and closes with '}' (so no BOM either), straight
    from the C scanner, which is what JSONDecoder.decode runs between two whitespace matches;
    None when the scan does not end at the closing brace or fails in any way (a hook's refusal
    included). The caller then takes the full path, which raises the error with its message and
    position."""
    try:
        value, end = decoder.scan_once(text, 0)
    except Exception:
        return None
    return value if end == len(text) else None


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


def _text_of(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _bad(f"The request body is not valid UTF-8 (byte {e.start}).") from None


def _parsed(text: str, decoder: json.JSONDecoder = _DECODER) -> Any:
    """_decode(text), its errors as ValidationError(400)."""
    try:
        return _decode(text, decoder)
    except json.JSONDecodeError as e:
        raise _bad(f"The request body is not valid JSON: {e.msg} at line {e.lineno} column "
                   f"{e.colno} (char {e.pos}).") from None
    except RecursionError:
        raise _too_deep() from None
    except ValueError as e:   # raised by our hooks, or int() on a number with too many digits
        raise _bad(f"The request body is not valid JSON: {e}.") from None


def parse_json_body(raw: bytes) -> Any:
    """The JSON value in ``raw``, or ValidationError(400) saying what is wrong and where."""
    text = _text_of(raw)
    # Depth is checked on the text, before parsing: the parser recurses per level, and a stack
    # run deep enough to raise RecursionError also fails whatever the collector runs on it then.
    if not bytes_nest_at_most(raw):
        raise _too_deep()
    value = _parsed(text)
    if "\\u" in text and _MAYBE_SURROGATE.search(raw):
        _check_no_surrogates(value)
    return value


def parse_item_body(raw: bytes) -> tuple[Any, bool]:
    """parse_json_body(raw) for an item's body, and whether raw is, byte for byte, the text
    jsontext.dumps_bytes writes for the value: an object in compact form (no whitespace outside
    strings), without escapes (dumps writes every other character as itself), with each number
    written as Python writes it back (not "1E5", "0.000001" or "-0"). Then the stored body can
    be raw itself with the system properties spliced in (documents.Writer), the same bytes as
    encoding the value again: what the SDKs send is compact (azure-cosmos: json.dumps with
    separators=(",", ":"); @azure/cosmos: JSON.stringify).

    The checks come from the text's structure (outside_strings), found once: the nesting
    depth; and in an object holding no other object, its member count (a colon each), so that
    the C parser needs no duplicate check per object: the object has one iff it parsed to fewer
    members. The errors, their order and their messages are parse_json_body's."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _bad(f"The request body is not valid UTF-8 (byte {e.start}).") from None
    escaped = "\\" in text                   # (a str's `in`: a bytes one costs an exception inside)
    structure = outside_strings(raw)
    if len(structure) > ITEM_NESTING_MAX_LEVELS and not structure_nests_at_most(structure):
        raise _too_deep()
    _FLOAT_RECAST[0] = False
    # An object holding no other: its structure opens with its brace and has no other, so the
    # last brace is at 0 (rpartition takes one argument: cheaper than count's optional bounds).
    if structure[:1] == b"{" and structure[-1:] == b"}" and not structure.rpartition(b"{")[0]:
        value = _scanned_object(text, _FLAT_ITEM_DECODER)
        if value is None:
            value = _parsed(text, _FLAT_ITEM_DECODER)       # raises the error
        if len(value) != structure.count(b":"):
            _parsed(text, _ITEM_DECODER)                # raises the duplicate's 400
        verbatim = not escaped and not _FLOAT_RECAST[0]
    else:
        value = _parsed(text, _ITEM_DECODER)
        verbatim = (not escaped and not _FLOAT_RECAST[0] and structure[:1] == b"{"
                    and structure[-1:] == b"}")
    if escaped and "\\u" in text and _MAYBE_SURROGATE.search(raw):
        _check_no_surrogates(value)
    if verbatim:
        # No whitespace outside strings (split() makes one piece), and no "-0" there: a number
        # that Python writes back as 0 (floats were checked as they were parsed).
        verbatim = (len(structure.split()) == 1 and type(raw) is bytes
                    and ("-0" not in text or structure.find(b"-0") < 0))
    return value, verbatim
