"""String and type-checking system functions.

Theory of operation: each function takes already-evaluated argument values and
returns a value; none raises. An argument of the wrong type makes the result
undefined, as in the service. Optional boolean flags (CONTAINS, STARTSWITH,
ENDSWITH, StringEquals: ignore case) must be real booleans. Lengths and
offsets count Python code points. `TABLE` maps upper-case name to
(function, min_args, max_args) for the registry in `functions`.
"""

from __future__ import annotations

import json
import math

from regionlab.emulator.core import jsontext
from regionlab.emulator.core.validation import text_nests_at_most
from regionlab.emulator.core.query.values import NUMBER_TYPES, UNDEFINED
from regionlab.emulator.core.limits import FUNCTION_MAX_ARGS, REPLICATE_MAX_CHARS



def _int_arg(value):
    """A numeric argument as an int, or None when it is not a finite number."""
    if type(value) not in NUMBER_TYPES or not math.isfinite(value):
        return None
    return int(value)


def _flag(value):
    """An optional ignore-case flag: False when absent, None when malformed."""
    if value is UNDEFINED:
        return False
    return value if type(value) is bool else None


def _strings(*values) -> bool:
    return all(type(v) is str for v in values)


def _fold_pair(a: str, b: str, ignore_case: bool):
    return (a.casefold(), b.casefold()) if ignore_case else (a, b)


def _string_test(test):
    def fn(s, sub, ignore_case=False):
        if type(s) is not str or type(sub) is not str:
            return UNDEFINED
        if ignore_case is False or ignore_case is UNDEFINED:
            return test(s, sub)
        if ignore_case is True:
            return test(s.casefold(), sub.casefold())
        return UNDEFINED

    return fn


def concat(*values):
    return "".join(values) if _strings(*values) else UNDEFINED


def substring(s, start, length):
    start, length = _int_arg(start), _int_arg(length)
    if type(s) is not str or start is None or length is None:
        return UNDEFINED
    start = max(start, 0)
    return s[start:start + max(length, 0)]


def index_of(s, sub, start=UNDEFINED):
    begin = 0 if start is UNDEFINED else _int_arg(start)
    if not _strings(s, sub) or begin is None:
        return UNDEFINED
    return s.find(sub, max(begin, 0))


def left(s, count):
    count = _int_arg(count)
    return s[:max(count, 0)] if type(s) is str and count is not None else UNDEFINED


def right(s, count):
    count = _int_arg(count)
    if type(s) is not str or count is None:
        return UNDEFINED
    return s[len(s) - min(max(count, 0), len(s)):]


def replace(s, find, replacement):
    if not _strings(s, find, replacement):
        return UNDEFINED
    return s.replace(find, replacement) if find else s


def replicate(s, count):
    count = _int_arg(count)
    if type(s) is not str or count is None or count < 0 or len(s) * count > REPLICATE_MAX_CHARS:
        return UNDEFINED
    return s * count


def _text_fn(transform):
    return lambda s: transform(s) if type(s) is str else UNDEFINED


def to_string(value):
    if value is UNDEFINED:
        return UNDEFINED
    if type(value) is str:
        return value
    if type(value) is float and value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return jsontext.dumps(value)


def _reject_constant(name):
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is out of range")
    return value


def _parse_json(s):
    if type(s) is not str or not text_nests_at_most(s):     # deeper than an item may nest
        return UNDEFINED
    try:
        return json.loads(s.strip(), parse_constant=_reject_constant, parse_float=_finite)
    except ValueError:
        return UNDEFINED


def _string_to(accept):
    def fn(s):
        value = _parse_json(s)
        return value if value is not UNDEFINED and accept(value) else UNDEFINED

    return fn


def string_equals(a, b, ignore_case=UNDEFINED):
    flag = _flag(ignore_case)
    if not _strings(a, b) or flag is None:
        return UNDEFINED
    x, y = _fold_pair(a, b, flag)
    return x == y


_IS = {
    "IS_DEFINED": lambda v: v is not UNDEFINED,
    "IS_NULL": lambda v: v is None,
    "IS_STRING": lambda v: type(v) is str,
    "IS_NUMBER": lambda v: type(v) in NUMBER_TYPES,
    "IS_BOOL": lambda v: type(v) is bool,
    "IS_ARRAY": lambda v: type(v) is list,
    "IS_OBJECT": lambda v: type(v) is dict,
    "IS_PRIMITIVE": lambda v: v is None or type(v) in (bool, int, float, str),
    "IS_INTEGER": lambda v: type(v) is int or (type(v) is float and v.is_integer()),
    "IS_FINITE_NUMBER": lambda v: type(v) is int or (type(v) is float and math.isfinite(v)),
}

TABLE = {name: (fn, 1, 1) for name, fn in _IS.items()}
TABLE.update({
    "CONCAT": (concat, 2, FUNCTION_MAX_ARGS),
    "CONTAINS": (_string_test(lambda s, sub: sub in s), 2, 3),
    "STARTSWITH": (_string_test(lambda s, sub: s.startswith(sub)), 2, 3),
    "ENDSWITH": (_string_test(lambda s, sub: s.endswith(sub)), 2, 3),
    "STRINGEQUALS": (string_equals, 2, 3),
    "LOWER": (_text_fn(str.lower), 1, 1),
    "UPPER": (_text_fn(str.upper), 1, 1),
    "LENGTH": (_text_fn(len), 1, 1),
    "LTRIM": (_text_fn(str.lstrip), 1, 1),
    "RTRIM": (_text_fn(str.rstrip), 1, 1),
    "TRIM": (_text_fn(str.strip), 1, 1),
    "REVERSE": (_text_fn(lambda s: s[::-1]), 1, 1),
    "SUBSTRING": (substring, 3, 3),
    "INDEX_OF": (index_of, 2, 3),
    "LEFT": (left, 2, 2),
    "RIGHT": (right, 2, 2),
    "REPLACE": (replace, 3, 3),
    "REPLICATE": (replicate, 2, 2),
    "TOSTRING": (to_string, 1, 1),
    "STRINGTONUMBER": (_string_to(lambda v: type(v) in NUMBER_TYPES), 1, 1),
    "STRINGTOBOOLEAN": (_string_to(lambda v: type(v) is bool), 1, 1),
    "STRINGTONULL": (_string_to(lambda v: v is None), 1, 1),
    "STRINGTOARRAY": (_string_to(lambda v: type(v) is list), 1, 1),
    "STRINGTOOBJECT": (_string_to(lambda v: type(v) is dict), 1, 1),
})
