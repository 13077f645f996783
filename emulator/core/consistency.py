"""Consistency levels: their order, and the lowest LSN a read at each level may be served at.

Levels from strongest to weakest: Strong, BoundedStaleness, Session, ConsistentPrefix,
Eventual. A request may only weaken the account's default (`x-ms-consistency-level`), never
strengthen it; asking for more is a 400, as the service answers.
"""
from .errors import bad_request

STRONG = "Strong"
BOUNDED = "BoundedStaleness"
SESSION = "Session"
PREFIX = "ConsistentPrefix"
EVENTUAL = "Eventual"

LEVELS = (STRONG, BOUNDED, SESSION, PREFIX, EVENTUAL)
_RANK = {name.lower(): i for i, name in enumerate(LEVELS)}
_CANON = {name.lower(): name for name in LEVELS}


def canonical(level: str) -> str:
    try:
        return _CANON[level.strip().lower()]
    except KeyError:
        raise bad_request(f"Invalid consistency level '{level}': use one of {', '.join(LEVELS)}.") from None


def effective(account_level: str, requested: str | None) -> str:
    if not requested:
        return account_level
    level = canonical(requested)
    if _RANK[level.lower()] < _RANK[account_level.lower()]:
        raise bad_request(f"Consistency level '{level}' is stronger than the account's default "
                          f"'{account_level}'; a request may only weaken it.")
    return level
