"""A container's indexing policy as a question: is this document path indexed?

Theory of operation: the policy is the container's `indexingPolicy` (cosmos-wire §4): lists of
included and excluded path patterns. A pattern is a list of segments from the document root
ending in a terminal:
* `/a/b/?`   the scalar value at exactly /a/b;
* `/a/*`     /a itself and every path below it (`/*` is the whole document);
* `/a/[]/?`  `[]` stands for any array index (`/tags/[]/?` covers tags[0], tags[1], ...);
* `/"x y"/?` a quoted segment holds any characters, `/` included;
* a numeric segment (`/a/0/?`) also matches that array index (an extension; the service
  spells array indexes `[]`).
A query path is indexed when some included pattern matches it and no excluded pattern that
matches it is at least as precise. Precision, as the service ranks conflicts ("the more
precise path wins"), is the number of segments, with `?` more precise than `*` at equal
length; on a tie the exclusion wins. `indexingMode: none` indexes nothing; `id` and `_ts` are
indexed whenever the mode is not none, as the service always does.

A pattern that does not end in `?` or `*` is ignored (the service rejects it at container
creation). Decisions are cached per compiled policy; policies are compiled once per policy
object (a replaced container definition is a new object, so it is compiled afresh).
Pure: no state beyond those bounded caches.
"""
from __future__ import annotations

from .limits import INDEX_POLICIES_CACHE_MAX_ENTRIES, PATH_DECISIONS_CACHE_MAX_ENTRIES

ARRAY_SEGMENT = "[]"
ALWAYS_INDEXED = (("id",), ("_ts",))


class Pattern:
    __slots__ = ("segments", "terminal", "precision")

    def __init__(self, segments: tuple, terminal: str):
        self.segments = segments
        self.terminal = terminal
        self.precision = (len(segments), terminal == "?")

    def matches(self, path: tuple) -> bool:
        segments = self.segments
        if len(path) < len(segments) or (self.terminal == "?" and len(path) != len(segments)):
            return False
        return all(_segment_matches(seg, step) for seg, step in zip(segments, path))


def _segment_matches(segment: str, step) -> bool:
    if type(step) is int:
        return segment == ARRAY_SEGMENT or segment == str(step)
    return segment == step


def parse_pattern(text) -> Pattern | None:
    """`/a/"b c"/[]/?` -> Pattern(("a", "b c", "[]"), "?"); None when it is not a valid pattern."""
    if type(text) is not str or not text.startswith("/"):
        return None
    segments, i = [], 1
    while i <= len(text):
        if i < len(text) and text[i] == '"':
            end = _closing_quote(text, i)
            if end is None:
                return None
            segments.append(text[i + 1:end].replace('\\"', '"'))
            i = end + 1
            if i < len(text) and text[i] != "/":
                return None
        else:
            end = text.find("/", i)
            end = len(text) if end < 0 else end
            segments.append(text[i:end])
            i = end
        i += 1
    if not segments or segments[-1] not in ("?", "*") or any(s in ("?", "*", "") for s in segments[:-1]):
        return None
    return Pattern(tuple(segments[:-1]), segments[-1])


def _closing_quote(text: str, start: int) -> int | None:
    i = start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == '"':
            return i
        i += 1
    return None


class IndexPolicy:
    """The compiled policy; `indexes(path)` answers for a query path such as ("a", "b", 0)."""
    __slots__ = ("enabled", "included", "excluded", "_decisions")

    def __init__(self, policy: dict | None):
        policy = policy if isinstance(policy, dict) else {}
        self.enabled = str(policy.get("indexingMode", "consistent")).lower() != "none"
        self.included = _patterns(policy.get("includedPaths", [{"path": "/*"}]))
        self.excluded = _patterns(policy.get("excludedPaths", []))
        self._decisions: dict = {}

    def indexes(self, path: tuple) -> bool:
        decision = self._decisions.get(path)
        if decision is None:
            decision = self._decide(path)
            if len(self._decisions) >= PATH_DECISIONS_CACHE_MAX_ENTRIES:
                self._decisions.clear()
            self._decisions[path] = decision
        return decision

    def _decide(self, path: tuple) -> bool:
        if not self.enabled or not path:
            return False
        if path in ALWAYS_INDEXED:
            return True
        included = _best_precision(self.included, path)
        if included is None:
            return False
        excluded = _best_precision(self.excluded, path)
        return excluded is None or included > excluded


def _patterns(entries) -> tuple:
    out = []
    for entry in entries if isinstance(entries, list) else ():
        pattern = parse_pattern(entry.get("path") if isinstance(entry, dict) else None)
        if pattern is not None:
            out.append(pattern)
    return tuple(out)


def _best_precision(patterns: tuple, path: tuple):
    best = None
    for pattern in patterns:
        if pattern.matches(path) and (best is None or pattern.precision > best):
            best = pattern.precision
    return best


_compiled: dict = {}        # id(policy dict) -> (policy dict, IndexPolicy)


def policy_of(policy: dict | None) -> IndexPolicy:
    """The compiled form of a container's indexingPolicy object, compiled once per object."""
    entry = _compiled.get(id(policy))
    if entry is not None and entry[0] is policy:
        return entry[1]
    compiled = IndexPolicy(policy)
    if len(_compiled) >= INDEX_POLICIES_CACHE_MAX_ENTRIES:
        _compiled.clear()
    _compiled[id(policy)] = (policy, compiled)
    return compiled
