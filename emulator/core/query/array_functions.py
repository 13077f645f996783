"""Array system functions.

Theory of operation: array arguments must be JSON arrays or the result is
undefined. Element matching uses the same deep, type-aware equality as `=`;
ARRAY_CONTAINS with the partial flag set matches an object element that holds
at least the given object's top-level members. ARRAY_SLICE counts a negative
start from the end and clamps everything else into range, so it never fails.
`TABLE` maps upper-case name to (function, min_args, max_args).
"""

from __future__ import annotations

import math

from regionlab.emulator.core.query.values import NUMBER_TYPES, UNDEFINED, canonical
from regionlab.emulator.core.limits import FUNCTION_MAX_ARGS



def _matches(element, wanted, partial: bool) -> bool:
    if partial and type(wanted) is dict:
        if type(element) is not dict:
            return False
        return all(k in element and canonical(element[k]) == canonical(v) for k, v in wanted.items())
    return canonical(element) == canonical(wanted)


def array_contains(array, wanted, partial=UNDEFINED):
    if type(array) is not list or wanted is UNDEFINED:
        return UNDEFINED
    if partial is not UNDEFINED and type(partial) is not bool:
        return UNDEFINED
    return any(_matches(element, wanted, partial is True) for element in array)


def array_contains_any(array, *wanted):
    if type(array) is not list:
        return UNDEFINED
    present = {canonical(element) for element in array}
    return any(canonical(w) in present for w in wanted)


def array_contains_all(array, *wanted):
    if type(array) is not list:
        return UNDEFINED
    present = {canonical(element) for element in array}
    return all(canonical(w) in present for w in wanted)


def array_length(array):
    return len(array) if type(array) is list else UNDEFINED


def _int_arg(value):
    if type(value) not in NUMBER_TYPES or not math.isfinite(value):
        return None
    return int(value)


def array_slice(array, start, length=UNDEFINED):
    begin = _int_arg(start)
    count = len(array) if length is UNDEFINED and type(array) is list else _int_arg(length)
    if type(array) is not list or begin is None or count is None:
        return UNDEFINED
    if begin < 0:
        begin = max(len(array) + begin, 0)
    return array[begin:begin + max(count, 0)]


def array_concat(*arrays):
    if any(type(a) is not list for a in arrays):
        return UNDEFINED
    return [element for a in arrays for element in a]


def _set_op(combine):
    def fn(a, b):
        if type(a) is not list or type(b) is not list:
            return UNDEFINED
        return combine(a, b)

    return fn


def _distinct(values):
    seen, out = set(), []
    for v in values:
        key = canonical(v)
        if key not in seen:
            seen.add(key)
            out.append(v)
    return out


def _intersect(a, b):
    keys = {canonical(v) for v in b}
    return _distinct(v for v in a if canonical(v) in keys)


def choose(index, *values):
    position = _int_arg(index)
    if position is None or not 1 <= position <= len(values):
        return UNDEFINED
    return values[position - 1]


TABLE = {
    "ARRAY_CONTAINS": (array_contains, 2, 3),
    "ARRAY_CONTAINS_ANY": (array_contains_any, 2, FUNCTION_MAX_ARGS),
    "ARRAY_CONTAINS_ALL": (array_contains_all, 2, FUNCTION_MAX_ARGS),
    "ARRAY_LENGTH": (array_length, 1, 1),
    "ARRAY_SLICE": (array_slice, 2, 3),
    "ARRAY_CONCAT": (array_concat, 2, FUNCTION_MAX_ARGS),
    "SETINTERSECT": (_set_op(_intersect), 2, 2),
    "SETUNION": (_set_op(lambda a, b: _distinct(a + b)), 2, 2),
    "CHOOSE": (choose, 2, FUNCTION_MAX_ARGS),
}
