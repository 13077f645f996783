"""Mathematical system functions.

Theory of operation: arguments must be numbers (never booleans) or the result
is undefined; so is any result JSON cannot carry (NaN, infinity, a domain
error). Rounding functions (CEILING, FLOOR, ROUND, TRUNC, SIGN) return ints,
and ABS and POWER keep int inputs as ints while the result stays exactly
representable, so `ROUND(2.5)` is `3` on the wire rather than `3.0`. ROUND
rounds half away from zero, as the service does. `TABLE` maps upper-case name
to (function, min_args, max_args).
"""

from __future__ import annotations

import math

from regionlab.emulator.core.query.values import NUMBER_TYPES, UNDEFINED

EXACT_INT_MAX = 2 ** 53  # largest magnitude a double holds exactly


def _numeric(fn):
    """Wrap fn so that non-numbers and domain errors give undefined."""

    def wrapped(*args):
        if any(type(a) not in NUMBER_TYPES for a in args):
            return UNDEFINED
        try:
            result = fn(*args)
        except (ValueError, OverflowError, ZeroDivisionError):
            return UNDEFINED
        if type(result) is float and not math.isfinite(result):
            return UNDEFINED
        return result

    return wrapped


def _integral(fn):
    """fn's result as an int (it is integral by construction)."""
    return lambda x: x if type(x) is int else int(fn(x))


def round_half_away(x):
    if type(x) is int:
        return x
    magnitude = math.floor(abs(x) + 0.5)
    return -magnitude if x < 0 else magnitude


def power(base, exponent):
    if type(base) is int and type(exponent) is int and exponent >= 0:
        if base in (0, 1, -1) or exponent * math.log2(abs(base)) < 53:
            return base ** exponent
    return math.pow(base, exponent)


def log(x, base=None):
    if x <= 0:
        raise ValueError("log of a non-positive number")
    return math.log(x) if base is None else math.log(x, base)


def sign(x):
    return (x > 0) - (x < 0)


def number_bin(x, size=1):
    if size <= 0:
        raise ValueError("bin size must be positive")
    result = math.floor(x / size) * size
    return int(result) if type(x) is int and type(size) is int else result


def cot(x):
    return 1.0 / math.tan(x)


_FUNCTIONS = {
    "ABS": (abs, 1, 1),
    "CEILING": (_integral(math.ceil), 1, 1),
    "FLOOR": (_integral(math.floor), 1, 1),
    "ROUND": (round_half_away, 1, 1),
    "TRUNC": (_integral(math.trunc), 1, 1),
    "SIGN": (sign, 1, 1),
    "POWER": (power, 2, 2),
    "SQRT": (math.sqrt, 1, 1),
    "SQUARE": (lambda x: x * x, 1, 1),
    "LOG": (log, 1, 2),
    "LOG10": (math.log10, 1, 1),
    "EXP": (math.exp, 1, 1),
    "SIN": (math.sin, 1, 1),
    "COS": (math.cos, 1, 1),
    "TAN": (math.tan, 1, 1),
    "COT": (cot, 1, 1),
    "ASIN": (math.asin, 1, 1),
    "ACOS": (math.acos, 1, 1),
    "ATAN": (math.atan, 1, 1),
    "ATN2": (lambda y, x: math.atan2(x, y), 2, 2),
    "DEGREES": (math.degrees, 1, 1),
    "RADIANS": (math.radians, 1, 1),
    "NUMBERBIN": (number_bin, 1, 2),
}

TABLE = {name: (_numeric(fn), low, high) for name, (fn, low, high) in _FUNCTIONS.items()}
TABLE["PI"] = (lambda: math.pi, 0, 0)
