"""Proves the LIKE matcher: on random patterns (%, _, sets, ranges, escapes) and values it agrees
with a regular-expression translation of the same pattern (hypothesis), a reversed range is no
error but matches nothing, and a pattern with many `%` runs against a long string that does not
match finishes (with a regular expression it would backtrack exponentially)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from regionlab.emulator.core.query.like import like_matcher, match_like
from regionlab.emulator.core.query.values import UNDEFINED
from tiers import examples


def _reference(pattern: str, escape: str | None) -> str:
    out, i = [], 0
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
            body = pattern[i + 1:end]
            neg = body.startswith("^")
            body = body[1:] if neg else body
            parts, j = [], 0
            while j < len(body):
                if j + 2 < len(body) and body[j + 1] == "-":
                    lo, hi = body[j], body[j + 2]
                    parts.append(f"{re.escape(lo)}-{re.escape(hi)}" if lo <= hi else "(?!)")
                    j += 3
                else:
                    parts.append(re.escape(body[j]))
                    j += 1
            alts = "|".join(f"[{p}]" if p != "(?!)" else p for p in parts) or "(?!)"
            out.append(f"(?!(?:{alts}))." if neg else f"(?:{alts})")
            i = end + 1
            continue
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


PATTERN_CHARS = st.sampled_from(list("ab%_[]^-!z"))


@settings(max_examples=examples(500), deadline=None)
@given(pattern=st.text(PATTERN_CHARS, max_size=10), value=st.text(st.sampled_from(list("abz-^[]!")), max_size=8),
       escape=st.sampled_from([None, "!"]))
def test_like_agrees_with_a_regular_expression(pattern, value, escape):
    expected = re.fullmatch(_reference(pattern, escape), value, re.DOTALL) is not None
    assert match_like(value, pattern, escape) is expected
    assert like_matcher(pattern, escape)(value) is expected


def test_a_reversed_range_matches_nothing():
    assert match_like("m", "[z-a]") is False
    assert match_like("m", "[^z-a]") is True
    assert like_matcher(5)("x") is UNDEFINED


def test_many_runs_against_a_long_string_finish():
    assert match_like("a" * 20_000, "%a" * 30 + "%b") is False
    assert match_like("a" * 20_000 + "b", "%a" * 30 + "%b") is True
