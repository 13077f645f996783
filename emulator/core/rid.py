"""Resource ids (``_rid``): their byte layout, deterministic allocation, and parsing.

Theory of operation. A rid is the base64 of a hierarchical byte string, with ``/`` written as
``-`` so it can sit in a URL path segment:

    offer       3 bytes   counter, little-endian                         (4 chars, "AQAA")
    database    4 bytes   counter, big-endian                            (8 chars, "AAAAAQ==")
    collection  8 bytes   database + 4 bytes big-endian, high bit SET    (12 chars)
    user        8 bytes   database + 4 bytes big-endian, high bit clear
    document   16 bytes   collection + 8 bytes little-endian; the top nibble of the last byte
                          is the child type: 0 document, 8 sproc, 7 trigger, 6 udf,
                          4 conflict, 5 partition key range
    permission 16 bytes   user + 8 bytes
    attachment 20 bytes   document + 4 bytes

This is the layout the service uses and the SDKs parse. The SDK's ``IsNameBased`` depends on the
database part: a path whose database segment is 8 characters decoding to 4 bytes is rid-based,
so every database rid we hand out is exactly that, and (by the same rule) a database *named*
like one is treated as a rid by the SDK.

Allocation is a pure function of a counter, so a run is reproducible; ``RidAllocator`` keeps the
counters (one for databases and offers, one per parent for children).
"""

import base64
import binascii
import struct

from .limits import COLLECTION_RIDS_CACHE_MAX_ENTRIES

OFFER_BYTES = 3
DATABASE_BYTES = 4
COLLECTION_BYTES = 8
CHILD_BYTES = 16
ATTACHMENT_BYTES = 20

_COLLECTION_BIT = 0x80
_OFFER_COUNTER_MAX = 2**24 - 1
_DATABASE_COUNTER_MAX = 2**32 - 1
_COLLECTION_COUNTER_MAX = 2**31 - 1
_CHILD_COUNTER_MAX = 2**60 - 1          # the top nibble of the 8 bytes is the child type

# Top nibble of the last byte of a collection child's rid -> the path segment naming its type.
_CHILD_KIND_BY_NIBBLE = {0: "docs", 8: "sprocs", 7: "triggers", 6: "udfs", 4: "conflicts", 5: "pkranges"}
_CHILD_NIBBLE_BY_KIND = {kind: nibble for nibble, kind in _CHILD_KIND_BY_NIBBLE.items()}


def encode(raw: bytes) -> str:
    # base64.b64encode(raw) without its Python-level wrapper: one is made per document.
    return binascii.b2a_base64(raw, newline=False).decode("ascii").replace("/", "-")


def _decode(rid: str) -> bytes:
    if not rid or len(rid) % 4 != 0 or "/" in rid:
        raise ValueError(f"{rid!r} is not a resource id")
    try:
        raw = base64.b64decode(rid.replace("-", "/"), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"{rid!r} is not a resource id") from None
    if encode(raw) != rid:       # non-zero padding bits: a second spelling of another rid
        raise ValueError(f"{rid!r} is not a canonical resource id")
    return raw


def _check_counter(n: int, counter_max: int, what: str) -> None:
    if not 1 <= n <= counter_max:
        raise ValueError(f"{what} counter {n} is outside 1..{counter_max}")


def database_rid(n: int) -> str:
    _check_counter(n, _DATABASE_COUNTER_MAX, "database")
    return encode(n.to_bytes(DATABASE_BYTES, "big"))


def collection_rid(db_rid: str, n: int) -> str:
    _check_counter(n, _COLLECTION_COUNTER_MAX, "collection")
    db = _expect(db_rid, "dbs")
    return encode(db + (n | (_COLLECTION_BIT << 24)).to_bytes(4, "big"))


_COLL_BYTES_CACHE: dict = {}


def _child_rid(coll_rid: str, n: int, kind: str) -> str:
    _check_counter(n, _CHILD_COUNTER_MAX, kind)
    coll = _COLL_BYTES_CACHE.get(coll_rid)
    if coll is None:                      # a container's rid is parsed once, not per document
        if len(_COLL_BYTES_CACHE) >= COLLECTION_RIDS_CACHE_MAX_ENTRIES:
            _COLL_BYTES_CACHE.clear()
        coll = _COLL_BYTES_CACHE[coll_rid] = _expect(coll_rid, "colls")
    value = n | (_CHILD_NIBBLE_BY_KIND[kind] << 60)
    return encode(coll + value.to_bytes(8, "little"))


_DOC_RID_BYTES = struct.Struct("<8sQ").pack   # a collection's 8 bytes, then the counter little-endian


def document_rid(coll_rid: str, n: int) -> str:
    coll = _COLL_BYTES_CACHE.get(coll_rid)
    if coll is not None and 1 <= n <= _CHILD_COUNTER_MAX:
        # _child_rid for a container seen before (a document's type nibble is 0), in one call:
        # every create draws a rid. (One struct pack makes the 16 bytes.)
        return binascii.b2a_base64(_DOC_RID_BYTES(coll, n), newline=False).decode().replace("/", "-")
    return _child_rid(coll_rid, n, "docs")


def user_rid(db_rid: str, n: int) -> str:
    _check_counter(n, _COLLECTION_COUNTER_MAX, "user")
    return encode(_expect(db_rid, "dbs") + n.to_bytes(4, "big"))     # high bit clear: not a collection


def permission_rid(user_rid_: str, n: int) -> str:
    _check_counter(n, _CHILD_COUNTER_MAX, "permission")
    return encode(_expect(user_rid_, "users") + n.to_bytes(8, "little"))


def script_rid(coll_rid: str, n: int, kind: str) -> str:
    """The rid of a container's stored procedure, trigger or user-defined function (kind is its
    path segment: sprocs, triggers, udfs)."""
    return _child_rid(coll_rid, n, kind)


def pkrange_rid(coll_rid: str, n: int) -> str:
    return _child_rid(coll_rid, n, "pkranges")


def offer_rid(n: int) -> str:
    _check_counter(n, _OFFER_COUNTER_MAX, "offer")
    return encode(n.to_bytes(OFFER_BYTES, "little"))


def _expect(rid: str, kind: str) -> bytes:
    got, raw = parse_rid(rid)
    if got != kind:
        raise ValueError(f"{rid!r} is a {got} rid, expected {kind}")
    return raw


def parse_rid(s: str) -> tuple[str, bytes]:
    """(kind, raw bytes) of a rid; kind is the path segment that names its type ("dbs", "colls",
    "docs", "pkranges", "offers", …). Raises ValueError for anything that is not a valid rid,
    so ``parse_rid`` doubles as "is this path segment a rid?"."""
    raw = _decode(s)
    n = len(raw)
    if n == OFFER_BYTES:
        return "offers", raw
    if n == DATABASE_BYTES:
        if raw == bytes(DATABASE_BYTES):
            raise ValueError(f"{s!r}: database 0 does not exist")
        return "dbs", raw
    if n not in (COLLECTION_BYTES, CHILD_BYTES, ATTACHMENT_BYTES):
        raise ValueError(f"{s!r} decodes to {n} bytes, which no resource id has")
    is_collection = bool(raw[4] & _COLLECTION_BIT)
    if n == COLLECTION_BYTES:
        return ("colls" if is_collection else "users"), raw
    if not is_collection:
        if n == CHILD_BYTES:
            return "permissions", raw
        raise ValueError(f"{s!r}: a user has no 20-byte children")
    kind = _CHILD_KIND_BY_NIBBLE.get(raw[15] >> 4)
    if kind is None:
        raise ValueError(f"{s!r}: unknown collection child type {raw[15] >> 4}")
    if n == ATTACHMENT_BYTES:
        if kind != "docs":
            raise ValueError(f"{s!r}: only documents have attachments")
        return "attachments", raw
    return kind, raw


_PARENT_BYTES = {
    "colls": DATABASE_BYTES, "users": DATABASE_BYTES,
    "docs": COLLECTION_BYTES, "sprocs": COLLECTION_BYTES, "triggers": COLLECTION_BYTES,
    "udfs": COLLECTION_BYTES, "conflicts": COLLECTION_BYTES, "pkranges": COLLECTION_BYTES,
    "permissions": COLLECTION_BYTES, "attachments": CHILD_BYTES,
}


def parent_rid(s: str) -> str | None:
    """The rid of the resource that owns ``s`` (a document's collection, a collection's
    database); None for databases and offers, which have no parent."""
    kind, raw = parse_rid(s)
    size = _PARENT_BYTES.get(kind)
    return None if size is None else encode(raw[:size])


class RidAllocator:
    """Hands out rids from counters, in order. Deterministic: the same calls give the same rids."""

    def __init__(self) -> None:
        self._databases = 0
        self._offers = 0
        self._children: dict[tuple[str, str], int] = {}

    def _next_child(self, parent: str, kind: str) -> int:
        n = self._children.get((parent, kind), 0) + 1
        self._children[(parent, kind)] = n
        return n

    def database(self) -> str:
        self._databases += 1
        return database_rid(self._databases)

    def offer(self) -> str:
        self._offers += 1
        return offer_rid(self._offers)

    def collection(self, db_rid: str) -> str:
        return collection_rid(db_rid, self._next_child(db_rid, "colls"))

    def document(self, coll_rid: str) -> str:
        return document_rid(coll_rid, self._next_child(coll_rid, "docs"))

    def pkrange(self, coll_rid: str) -> str:
        return pkrange_rid(coll_rid, self._next_child(coll_rid, "pkranges"))
