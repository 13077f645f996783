"""Tally: the request counters of the hot paths.

A `collections.Counter` would do, but Counter defines `__delitem__` in Python, and CPython then
gives the class a Python-level item-assignment slot: every `counter[key] += 1` stores through
`dict.__setitem__` looked up on the type and called as a wrapper (about 1 k instructions more
per increment than a dict's own store, and the direct path counts twice per request:
docs/performance.md, "Counters"). A dict subclass that defines only `__missing__` keeps the
dict's own slots. A missing key reads as 0 without being added, as in a Counter.
"""


class Tally(dict):
    __slots__ = ()

    def __missing__(self, key) -> int:
        return 0
