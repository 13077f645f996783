"""Operators of the dialect, as closure builders.

Theory of operation: each builder takes already-compiled operand closures
(`row -> value`) and returns a new closure; the rules of the service live in
the small value-level helpers underneath:
* comparisons between values of different types, with undefined, or (for
  `<`-style ranges) between two arrays or two objects yield undefined;
* AND / OR / NOT are three-valued over true, false and undefined, and any
  non-boolean operand counts as undefined;
* arithmetic takes numbers only (else undefined); int op int stays an int
  where the result is integral, and a result that JSON cannot hold (division
  by zero, overflow, NaN) is undefined;
* `||` joins two strings, `??` takes the left value unless it is undefined;
* bitwise operators work on 32-bit integers, like the service's JavaScript
  heritage.
Builders specialise the common `path <op> constant` shapes so a WHERE over
small documents costs a few function calls per document.
"""

from __future__ import annotations

import math
import operator

from regionlab.emulator.core.query.values import (
    NUMBER_TYPES, TAG_ARRAY, TAG_NULL, TAG_UNDEFINED, TYPE_TAGS, TYPES_OF_TAG, UNDEFINED, json_equal,
)

INT32_MODULUS = 1 << 32
INT32_MAX = (1 << 31) - 1
SHIFT_BITS_MASK = 31  # shift counts are taken modulo 32

_RANGE_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
# null is a one-value type: it equals itself, so only the inclusive ranges hold.
_NULL_RESULTS = {"=": True, "!=": False, "<": False, "<=": True, ">": False, ">=": True}


# ---------------------------------------------------------------- comparisons
def compare(op: str, left, right):
    """Apply a comparison operator to two values under the service's rules."""
    tag = TYPE_TAGS.get(type(left), TAG_UNDEFINED)
    if tag == TAG_UNDEFINED or tag != TYPE_TAGS.get(type(right), TAG_UNDEFINED):
        return UNDEFINED
    if op == "=":
        return json_equal(left, right)
    if op == "!=":
        return not json_equal(left, right)
    if tag >= TAG_ARRAY:
        return UNDEFINED
    if tag == TAG_NULL:
        return _NULL_RESULTS[op]
    return _RANGE_OPS[op](left, right)


def make_compare(op: str, left, right):
    def evaluate(row):
        return compare(op, left(row), right(row))

    return evaluate


def make_compare_constant(op: str, left, constant):
    """`left <op> constant`, with the constant's type checked once."""
    tag = TYPE_TAGS.get(type(constant), TAG_UNDEFINED)
    if tag == TAG_UNDEFINED or tag >= TAG_ARRAY or tag == TAG_NULL:
        return make_compare(op, left, lambda row: constant)
    same = TYPES_OF_TAG[tag]
    if op == "=":
        def evaluate(row):
            value = left(row)
            return value == constant if type(value) in same else UNDEFINED
    elif op == "!=":
        def evaluate(row):
            value = left(row)
            return value != constant if type(value) in same else UNDEFINED
    else:
        test = _RANGE_OPS[op]

        def evaluate(row):
            value = left(row)
            return test(value, constant) if type(value) in same else UNDEFINED
    return evaluate


FLIPPED = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


# -------------------------------------------------------------------- logic
def make_and(left, right):
    def evaluate(row):
        a = left(row)
        if a is False:
            return False
        b = right(row)
        if b is False:
            return False
        return True if (a is True and b is True) else UNDEFINED

    return evaluate


def make_or(left, right):
    def evaluate(row):
        a = left(row)
        if a is True:
            return True
        b = right(row)
        if b is True:
            return True
        return False if (a is False and b is False) else UNDEFINED

    return evaluate


def logical_not(value):
    if value is True:
        return False
    if value is False:
        return True
    return UNDEFINED


def make_not(operand):
    return lambda row: logical_not(operand(row))


# --------------------------------------------------------------- arithmetic
def number_result(value):
    """A computed number as the service would return it, or undefined."""
    if type(value) is float and not math.isfinite(value):
        return UNDEFINED
    return value


def _divide(a, b):
    if b == 0:
        return UNDEFINED
    if type(a) is int and type(b) is int and a % b == 0:
        return a // b
    return a / b


def _modulo(a, b):
    if b == 0:
        return UNDEFINED
    if type(a) is int and type(b) is int:
        remainder = abs(a) % abs(b)  # sign follows the dividend, as in C#
        return -remainder if a < 0 else remainder
    return math.fmod(a, b)


ARITHMETIC = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": _divide, "%": _modulo}


def arithmetic(op: str, a, b):
    if type(a) not in NUMBER_TYPES or type(b) not in NUMBER_TYPES:
        return UNDEFINED
    try:
        return number_result(ARITHMETIC[op](a, b))
    except (OverflowError, ValueError):
        return UNDEFINED


def make_arithmetic(op: str, left, right):
    return lambda row: arithmetic(op, left(row), right(row))


def negate(value):
    return -value if type(value) in NUMBER_TYPES else UNDEFINED


def make_unary(op: str, operand):
    if op == "NOT":
        return make_not(operand)
    if op == "-":
        return lambda row: negate(operand(row))
    if op == "+":
        return lambda row: _plus(operand(row))
    return lambda row: bitwise("~", operand(row), 0)


# ----------------------------------------------------------- strings, misc
def concat(a, b):
    return a + b if type(a) is str and type(b) is str else UNDEFINED


def make_concat(left, right):
    return lambda row: concat(left(row), right(row))


def make_coalesce(left, right):
    def evaluate(row):
        value = left(row)
        return right(row) if value is UNDEFINED else value

    return evaluate


def _to_int32(value) -> int | None:
    if type(value) not in NUMBER_TYPES or not math.isfinite(value):
        return None
    wrapped = int(value) % INT32_MODULUS
    return wrapped - INT32_MODULUS if wrapped > INT32_MAX else wrapped


def bitwise(op: str, a, b):
    x, y = _to_int32(a), _to_int32(b)
    if x is None or y is None:
        return UNDEFINED
    if op == "~":
        return ~x
    if op == ">>>":
        return (x % INT32_MODULUS) >> (y & SHIFT_BITS_MASK)
    result = {"&": x & y, "|": x | y, "^": x ^ y, "<<": x << (y & SHIFT_BITS_MASK), ">>": x >> (y & SHIFT_BITS_MASK)}[op]
    return _to_int32(result)


def make_bitwise(op: str, left, right):
    return lambda row: bitwise(op, left(row), right(row))


def make_binary(op: str, left, right):
    """Any binary operator other than the comparisons."""
    if op == "AND":
        return make_and(left, right)
    if op == "OR":
        return make_or(left, right)
    if op in ARITHMETIC:
        return make_arithmetic(op, left, right)
    if op == "||":
        return make_concat(left, right)
    if op == "??":
        return make_coalesce(left, right)
    return make_bitwise(op, left, right)


# ------------------------------------------------ one link of a long chain
def _plus(value):
    return value if type(value) in NUMBER_TYPES else UNDEFINED


UNARY_VALUE = {"NOT": logical_not, "-": negate, "+": _plus, "~": lambda value: bitwise("~", value, 0)}


def binary_step(op: str, right):
    """`(value, row) -> value op right(row)`: one link of a left-deep chain evaluated in a loop,
    with the same rules (and the same short cuts of AND, OR and ??) as make_binary and
    make_compare."""
    if op == "AND":
        def step(a, row):
            if a is False:
                return False
            b = right(row)
            if b is False:
                return False
            return True if (a is True and b is True) else UNDEFINED
    elif op == "OR":
        def step(a, row):
            if a is True:
                return True
            b = right(row)
            if b is True:
                return True
            return False if (a is False and b is False) else UNDEFINED
    elif op == "??":
        def step(a, row):
            return right(row) if a is UNDEFINED else a
    elif op in FLIPPED:
        def step(a, row):
            return compare(op, a, right(row))
    elif op in ARITHMETIC:
        def step(a, row):
            return arithmetic(op, a, right(row))
    elif op == "||":
        def step(a, row):
            return concat(a, right(row))
    else:
        def step(a, row):
            return bitwise(op, a, right(row))
    return step
