"""Reading every item of a container (or of some of its partitions) page by page.

Theory of operation: items are visited partition by partition, and inside a partition in key
order (partition key JSON, then id). The continuation names the partition index and the last
key returned, so a page boundary survives concurrent writes: an item created behind the
cursor is not returned, one ahead of it is, and nothing is returned twice. Each partition is
read at one replica chosen by the consistency level, like a point read. A page ends at
max_items or before an item that would take it past PAGE_MAX_BYTES (a page always holds at
least one item), as the service caps its pages.
"""
import base64
import json

from .documents import choose_replica
from .errors import bad_request
from .validation import ValidationError, parse_json_body
from .limits import PAGE_DEFAULT_ITEMS, PAGE_MAX_BYTES, PAGE_MAX_ITEMS



def encode_continuation(partition_index: int, key: tuple) -> str:
    raw = json.dumps([partition_index, key[0], key[1]], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode()


def decode_continuation(token: str) -> tuple[int, tuple]:
    try:
        pidx, pk_json, id = parse_json_body(base64.urlsafe_b64decode(token.encode()))
        if type(pidx) is int and type(pk_json) is str and type(id) is str:
            return pidx, (pk_json, id)
    except (ValueError, TypeError, ValidationError):
        pass
    raise bad_request(f"Invalid continuation token '{token[:60]}': pass back exactly the "
                      "x-ms-continuation value of the previous page.")


def page_size(max_item_count: int | None) -> int:
    if max_item_count is None or max_item_count <= 0:
        return PAGE_DEFAULT_ITEMS
    return min(max_item_count, PAGE_MAX_ITEMS)


def read_page(container, region: str, consistency: str, session: dict | None,
              continuation: str | None, max_items: int, partition_indexes=None,
              pk_json: str | None = None, bytes_max: int = PAGE_MAX_BYTES, primary_ok: bool = True,
              pins=None):
    """(versions, next continuation or None, [(replica set, the LSN it was read at), ...]);
    primary_ok and pins as in choose_replica."""
    indexes = list(partition_indexes) if partition_indexes is not None else list(range(len(container.partitions)))
    start_pidx, after_key = (indexes[0], None) if continuation is None else decode_continuation(continuation)
    out = []
    touched = []
    nbytes, last = 0, None
    ttl = container.ttl
    now_ms = ttl.now_ms(region) if ttl is not None else 0
    for pidx in indexes:
        if pidx < start_pidx:
            continue
        rs = container.partitions[pidx].for_read(region)
        _, lsn = choose_replica(rs, consistency, session, primary_ok, pins)
        touched.append((rs, lsn))
        after = after_key if pidx == start_pidx else None
        for v in rs.store.scan(lsn, after_key=after, prefix=pk_json):
            if ttl is not None and ttl.expired_at(v, now_ms):
                continue                # past its time to live (core/ttl.py)
            if out and nbytes + len(v.body) > bytes_max:
                return out, encode_continuation(*last), touched
            out.append(v)
            nbytes += len(v.body)
            last = (pidx, v.key)
            if len(out) >= max_items:
                return out, encode_continuation(pidx, v.key), touched
    return out, None, touched
