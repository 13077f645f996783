"""Request-unit charges: what each operation costs.

A first cost model close to the service's published behaviour: a point read of an item up to
1 KB costs 1 RU and grows with size; a write costs several times more and grows with size;
metadata reads cost 1 RU and metadata writes more. The throughput issue refines this (indexed
paths, budgets, queries); every caller goes through these functions so there is one model.
"""
READ_RU_PER_KB = 1.0
WRITE_RU_BASE = 5.71
WRITE_RU_PER_KB = 1.0        # each KB after the first
DELETE_RU_BASE = 5.71
METADATA_READ_RU = 1.0
METADATA_WRITE_RU = 4.0
NOT_MODIFIED_RU = 1.0
KB = 1024


def _kb(nbytes: int) -> int:
    return max(1, -(-nbytes // KB))


def read(nbytes: int) -> float:
    return READ_RU_PER_KB * _kb(nbytes)


def write(nbytes: int) -> float:
    return round(WRITE_RU_BASE + WRITE_RU_PER_KB * (_kb(nbytes) - 1), 2)


def delete() -> float:
    return DELETE_RU_BASE


def feed(items: int, nbytes: int) -> float:
    return round(max(1.0, 1.0 + 0.1 * items + READ_RU_PER_KB * (nbytes / KB) * 0.25), 2)
