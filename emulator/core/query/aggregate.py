"""Accumulators for COUNT, SUM, AVG, MIN and MAX.

Theory of operation: one accumulator per aggregate call per group; the
pipeline feeds it the argument's value for every row of the group and reads
`result()` once at the end. Undefined values are skipped by all of them.
SUM and AVG accept numbers only: any other defined value poisons the result to
undefined. SUM of nothing is 0; AVG, MIN and MAX of nothing are undefined.
SUM keeps ints exact; AVG is always a float. MIN and MAX order mixed types as
null < boolean < number < string (the service's documented priority) and give
undefined when they meet an array or an object.
"""

from __future__ import annotations

from regionlab.emulator.core.query.values import NUMBER_TYPES, TAG_ARRAY, TAG_UNDEFINED, TYPE_TAGS, UNDEFINED, sort_key


class Count:
    __slots__ = ("count",)

    def __init__(self):
        self.count = 0

    def add(self, value):
        if value is not UNDEFINED:
            self.count += 1

    def result(self):
        return self.count


class Sum:
    __slots__ = ("total", "count", "poisoned")

    def __init__(self):
        self.total, self.count, self.poisoned = 0, 0, False

    def add(self, value):
        if value is UNDEFINED:
            return
        if type(value) in NUMBER_TYPES:
            self.total += value
            self.count += 1
        else:
            self.poisoned = True

    def result(self):
        return UNDEFINED if self.poisoned else self.total


class Avg(Sum):
    __slots__ = ()

    def result(self):
        if self.poisoned or self.count == 0:
            return UNDEFINED
        return self.total / self.count


class _Extreme:
    __slots__ = ("best", "best_key", "poisoned")
    wants_larger = True

    def __init__(self):
        self.best, self.best_key, self.poisoned = UNDEFINED, None, False

    def add(self, value):
        tag = TYPE_TAGS.get(type(value), TAG_UNDEFINED)
        if tag == TAG_UNDEFINED:
            return
        if tag >= TAG_ARRAY:
            self.poisoned = True
            return
        key = sort_key(value)
        if self.best_key is None or (key > self.best_key if self.wants_larger else key < self.best_key):
            self.best, self.best_key = value, key

    def result(self):
        return UNDEFINED if self.poisoned else self.best


class Max(_Extreme):
    __slots__ = ()
    wants_larger = True


class Min(_Extreme):
    __slots__ = ()
    wants_larger = False


ACCUMULATORS = {"COUNT": Count, "SUM": Sum, "AVG": Avg, "MIN": Min, "MAX": Max}


def new_accumulators(calls) -> list:
    """Fresh accumulators for a list of (aggregate name, argument closure)."""
    return [ACCUMULATORS[name]() for name, _ in calls]
