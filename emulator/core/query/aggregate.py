"""Accumulators for COUNT, SUM, AVG, MIN and MAX.

Theory of operation: one accumulator per aggregate call per group; the
pipeline feeds it the argument's value for every row of the group and reads
`result()` once at the end. Undefined values are skipped by all of them.
SUM and AVG accept numbers only: any other defined value poisons the result to
undefined. SUM of nothing is 0; AVG, MIN and MAX of nothing are undefined.
SUM keeps ints exact; AVG is always a float. MIN and MAX order mixed types as
null < boolean < number < string (the service's documented priority) and give
undefined when they meet an array or an object.

A query page that stops before the last row hands its accumulators on: `partial()` is an
accumulator's state as a JSON list, `resumed(calls, partials)` rebuilds the accumulators
from such lists (raising ValueError for anything an accumulator could not have produced,
since they come back from a client in a continuation).
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

    def partial(self) -> list:
        return [self.count]

    def resume(self, state: list) -> None:
        (self.count,) = state
        if not _is_count(self.count):
            raise ValueError("not a count")


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

    def partial(self) -> list:
        return [self.total, self.count, self.poisoned]

    def resume(self, state: list) -> None:
        self.total, self.count, self.poisoned = state
        if type(self.total) not in NUMBER_TYPES or not _is_count(self.count) or type(self.poisoned) is not bool:
            raise ValueError("not a sum")


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

    def partial(self) -> list:
        return [[] if self.best is UNDEFINED else [self.best], self.poisoned]

    def resume(self, state: list) -> None:
        best, self.poisoned = state
        if type(self.poisoned) is not bool or type(best) is not list or len(best) > 1:
            raise ValueError("not an extreme")
        if best:
            tag = TYPE_TAGS.get(type(best[0]), TAG_UNDEFINED)
            if tag == TAG_UNDEFINED or tag >= TAG_ARRAY:
                raise ValueError("not a scalar")
            self.best, self.best_key = best[0], sort_key(best[0])


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


def resumed(calls, partials) -> list:
    """The accumulators of calls in the states `partial()` gave (ValueError if they are not)."""
    accumulators = new_accumulators(calls)
    if type(partials) is not list or len(partials) != len(accumulators):
        raise ValueError("not the partials of this query")
    for accumulator, state in zip(accumulators, partials):
        if type(state) is not list:
            raise ValueError("not a partial")
        accumulator.resume(state)
    return accumulators


def _is_count(n) -> bool:
    return type(n) is int and n >= 0
