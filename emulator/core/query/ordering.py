"""ORDER BY: a stable multi-key sort under the service's cross-type order.

Theory of operation: every sort expression is evaluated once per row (the
keys are decorated onto the rows), then the rows are sorted once per key from
the last key to the first; Python's sort is stable, also with reverse=True,
so ties keep the order of the previous passes and finally the input order.
Values order as undefined < null < false < true < numbers < strings <
arrays < objects (`values.sort_key`); rows whose key is undefined are kept,
sorting first ascending and last descending.
"""

from __future__ import annotations

from regionlab.emulator.core.query.values import sort_key


def sort_rows(rows: list, order: list) -> list:
    """rows sorted by order, a list of (key closure, descending)."""
    decorated = [([sort_key(key(row)) for key, _ in order], row) for row in rows]
    for index in range(len(order) - 1, -1, -1):
        descending = order[index][1]
        decorated.sort(key=lambda item: item[0][index], reverse=descending)
    return [row for _, row in decorated]
