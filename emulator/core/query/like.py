"""The LIKE operator: SQL patterns translated to anchored regular expressions.

Theory of operation: `%` matches any run of characters, `_` exactly one,
`[abc]` / `[a-f]` one character from a set and `[^...]` one character outside
it; the optional ESCAPE character makes the next pattern character literal.
Matching is case-sensitive and covers the whole string. A value or pattern
that is not a string gives undefined; a reversed range (`[z-a]`) matches
nothing. Simple patterns run as regular expressions; a pattern with sets or
more than two `%` runs runs through a matcher that backtracks only to the last
`%`, so no pattern can take exponential time and hold the event loop.
Translated patterns are cached (bounded) because a parameterised or computed
pattern is usually the same for every row.
"""

from __future__ import annotations

import re

from regionlab.emulator.core.query.values import UNDEFINED
from regionlab.emulator.core.limits import LIKE_PATTERNS_CACHE_MAX_ENTRIES



_ANY_RUN = object()          # a `%` token


def _tokens(pattern: str, escape: str | None) -> list:
    """The pattern as tokens: _ANY_RUN for `%`, None for `_` (any one character), a str for a
    literal character, or (negated, chars, ranges) for a `[...]` set."""
    out: list = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if escape is not None and ch == escape and i + 1 < len(pattern):
            out.append(pattern[i + 1])
            i += 2
            continue
        if ch == "%":
            if not out or out[-1] is not _ANY_RUN:
                out.append(_ANY_RUN)
        elif ch == "_":
            out.append(None)
        elif ch == "[" and "]" in pattern[i + 2:]:
            end = pattern.index("]", i + 2)
            out.append(_char_set(pattern[i + 1:end]))
            i = end + 1
            continue
        else:
            out.append(ch)
        i += 1
    return out


def _char_set(body: str) -> tuple:
    negated = body.startswith("^")
    if negated:
        body = body[1:]
    chars, ranges, i = set(), [], 0
    while i < len(body):
        if i + 2 < len(body) and body[i + 1] == "-":
            ranges.append((body[i], body[i + 2]))      # a reversed range (z-a) matches nothing
            i += 3
        else:
            chars.add(body[i])
            i += 1
    return negated, frozenset(chars), tuple(ranges)


def _one(token, ch: str) -> bool:
    if token is None:
        return True
    if type(token) is str:
        return token == ch
    negated, chars, ranges = token
    hit = ch in chars or any(lo <= ch <= hi for lo, hi in ranges)
    return hit is not negated


def _match(tokens: list, value: str) -> bool:
    """Whole-string match, backtracking only to the last `%`: O(len(value) * len(tokens)) at
    worst, where a regular expression with several `.*` can take exponential time."""
    t = v = 0
    star_t, star_v = -1, 0
    n_tokens, n_value = len(tokens), len(value)
    while v < n_value:
        if t < n_tokens and tokens[t] is _ANY_RUN:
            star_t, star_v = t, v
            t += 1
        elif t < n_tokens and _one(tokens[t], value[v]):
            t += 1
            v += 1
        elif star_t >= 0:
            star_v += 1
            t, v = star_t + 1, star_v
        else:
            return False
    while t < n_tokens and tokens[t] is _ANY_RUN:
        t += 1
    return t == n_tokens


def _matcher(pattern: str, escape: str | None):
    """`value -> bool`. A pattern of literals, `_` and at most two `%` runs becomes a regular
    expression's fullmatch (fast, and at most linear for such shapes: the matcher returns a
    match object or None); anything else uses _match."""
    tokens = _tokens(pattern, escape)
    if sum(t is _ANY_RUN for t in tokens) <= 2 and not any(type(t) is tuple for t in tokens):
        return re.compile("".join(".*" if t is _ANY_RUN else "." if t is None else re.escape(t) for t in tokens),
                          re.DOTALL).fullmatch
    return lambda value: _match(tokens, value)


_cache: dict = {}


def _compiled(pattern: str, escape: str | None):
    key = (pattern, escape)
    matcher = _cache.get(key)
    if matcher is None:
        if len(_cache) >= LIKE_PATTERNS_CACHE_MAX_ENTRIES:
            _cache.clear()
        matcher = _cache[key] = _matcher(pattern, escape)
    return matcher


def _valid_escape(escape) -> bool:
    return escape is None or (type(escape) is str and len(escape) == 1)


def match_like(value, pattern, escape=None):
    if type(value) is not str or type(pattern) is not str or not _valid_escape(escape):
        return UNDEFINED
    return _compiled(pattern, escape)(value) not in (None, False)


def like_matcher(pattern, escape=None):
    """A one-argument matcher for a pattern known at compile time."""
    if type(pattern) is not str or not _valid_escape(escape):
        return lambda value: UNDEFINED
    matcher = _matcher(pattern, escape)
    return lambda value: (matcher(value) not in (None, False)) if type(value) is str else UNDEFINED
