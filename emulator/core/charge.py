"""Request-unit charges: what each operation costs.

A first cost model close to the service's published behaviour: a point read of an item up to
1 KB costs 1 RU and grows with size; a write costs several times more and grows with size;
metadata reads cost 1 RU and metadata writes more. A query pays a floor plus the documents it
loaded (read and tested: all of them on a scan, only the index candidates otherwise) and what
it returned, so an index that saves work shows in the charge. The throughput issue refines
this (indexed paths, budgets); every caller goes through these functions so there is one model.
"""
READ_RU_PER_KB = 1.0
WRITE_RU_BASE = 5.71
WRITE_RU_PER_KB = 1.0        # each KB after the first
DELETE_RU_BASE = 5.71
METADATA_READ_RU = 1.0
METADATA_WRITE_RU = 4.0
NOT_MODIFIED_RU = 1.0
QUERY_RU_BASE = 2.31            # the service's floor for a query page
QUERY_RU_PER_DOC_LOADED = 0.02  # per document read and tested
QUERY_RU_PER_DOC_RETURNED = 0.05
QUERY_RU_PER_KB_RETURNED = 0.25
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


def query(loaded: int, returned: int, nbytes: int) -> float:
    """A query page that loaded `loaded` documents and returned `returned` results of nbytes."""
    return round(QUERY_RU_BASE + QUERY_RU_PER_DOC_LOADED * loaded + QUERY_RU_PER_DOC_RETURNED * returned
                 + QUERY_RU_PER_KB_RETURNED * (nbytes / KB), 2)
