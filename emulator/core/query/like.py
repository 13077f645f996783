"""The LIKE operator: SQL patterns translated to anchored regular expressions.

Theory of operation: `%` matches any run of characters, `_` exactly one,
`[abc]` / `[a-f]` one character from a set and `[^...]` one character outside
it; the optional ESCAPE character makes the next pattern character literal.
Matching is case-sensitive and covers the whole string. A value or pattern
that is not a string gives undefined. Translated patterns are cached (bounded)
because a parameterised or computed pattern is usually the same for every row.
"""

from __future__ import annotations

import re

from emulator.core.query.values import UNDEFINED

LIKE_CACHE_ENTRIES_MAX = 256


def translate(pattern: str, escape: str | None) -> str:
    """The regular expression equivalent to a LIKE pattern."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if escape is not None and ch == escape and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        if ch == "%":
            out.append(".*")
        elif ch == "_":
            out.append(".")
        elif ch == "[" and "]" in pattern[i + 2:]:
            end = pattern.index("]", i + 2)
            out.append(_char_class(pattern[i + 1:end]))
            i = end + 1
            continue
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


def _char_class(body: str) -> str:
    negated = body.startswith("^")
    if negated:
        body = body[1:]
    parts = []
    for index, ch in enumerate(body):
        parts.append("-" if ch == "-" and 0 < index < len(body) - 1 else re.escape(ch))
    return "[" + ("^" if negated else "") + "".join(parts) + "]"


_cache: dict = {}


def _compiled(pattern: str, escape: str | None):
    key = (pattern, escape)
    regex = _cache.get(key)
    if regex is None:
        if len(_cache) >= LIKE_CACHE_ENTRIES_MAX:
            _cache.clear()
        regex = _cache[key] = re.compile(translate(pattern, escape), re.DOTALL)
    return regex


def _valid_escape(escape) -> bool:
    return escape is None or (type(escape) is str and len(escape) == 1)


def match_like(value, pattern, escape=None):
    if type(value) is not str or type(pattern) is not str or not _valid_escape(escape):
        return UNDEFINED
    return _compiled(pattern, escape).fullmatch(value) is not None


def like_matcher(pattern, escape=None):
    """A one-argument matcher for a pattern known at compile time."""
    if type(pattern) is not str or not _valid_escape(escape):
        return lambda value: UNDEFINED
    regex = re.compile(translate(pattern, escape), re.DOTALL)
    return lambda value: (regex.fullmatch(value) is not None) if type(value) is str else UNDEFINED
