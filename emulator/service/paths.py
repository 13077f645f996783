"""What a request's path addresses: names or rids, and the resource family it counts under."""
from regionlab.client.protocol.auth import is_name_based

from ..core.cache import Cache, text_bytes
from ..core.errors import CosmosError, not_found
from ..core.limits import RID_PATHS_CACHE_MAX_BYTES

# Resource kinds counted in a Service's `requests_served`; anything else (a garbage path) counts
# as "other", so a client cannot grow the counter without bound.
COUNTED_KINDS = frozenset(("account", "dbs", "colls", "docs", "pkranges", "offers", "conflicts", "operations",
                           "addresses", "users", "permissions", "sprocs", "triggers", "udfs"))
UNSUPPORTED_CHILDREN = ("attachments", "clientencryptionkeys", "schemas")

_RID_BASED = Cache(RID_PATHS_CACHE_MAX_BYTES)


def rid_based(db_segment: str) -> bool:
    """Whether a path addresses resources by _rid (cosmos-wire §3: decided by the db segment)."""
    hit = _RID_BASED.get(db_segment)
    if hit is None:
        hit = _RID_BASED.put(db_segment, not is_name_based("dbs/" + db_segment), text_bytes(db_segment))
    return hit


def resource_kind(segs: list) -> str:
    """The resource family a path addresses: the last collection segment ('docs' for both
    /dbs/d/colls/c/docs and /dbs/d/colls/c/docs/x), 'account' for /."""
    kind = segs[(len(segs) - 1) & ~1] if segs else "account"
    return kind if kind in COUNTED_KINDS else "other"


def unknown(segs: list) -> CosmosError:
    return not_found(f"Unknown resource path '/{'/'.join(segs)}'. regionlab serves /, /dbs/..., "
                     "/dbs/{db}/colls/{coll}/docs/..., .../sprocs, .../triggers, .../udfs, .../pkranges, "
                     ".../operations/partitionkeydelete, /dbs/{db}/users/{user}/permissions/... and /offers.")


def unsupported_or_unknown(segs: list, segment: str) -> CosmosError:
    if segment in UNSUPPORTED_CHILDREN:
        return CosmosError(501, 0, f"'{segment}' resources (attachments, client encryption keys, schemas) are "
                                   "not implemented by regionlab.")
    return unknown(segs)
