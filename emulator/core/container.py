"""Databases and containers: the metadata of an account, and routing of keys to partitions.

Theory of operation: metadata (databases, containers, offers) is account-wide and takes effect
in every region at once, as it does in the service from the client's point of view (metadata
writes go to the write region and are read back from there). Items are not: they live in the
partitions' replica sets per region. A container splits the EPK space into contiguous ranges,
one physical partition each; `partition_for_epk` finds a key's partition by bisection.
Partition count follows throughput as the service derives it (one per 10,000 RU/s, at least
one) unless the account config overrides it.
"""
import bisect
import json

from . import epk as epks
from . import jsontext
from .cache import Cache, text_bytes
from .errors import bad_request
from .scripts import Scripts
from .store import TrackedDict
from .ttl import check_default_ttl
from .limits import EPK_CACHE_MAX_BYTES

RU_PER_PARTITION = 10_000
_EPK_BYTES = 200                           # an EPK's text: 32 hex digits per path, up to 3 paths


class Database:
    __slots__ = ("id", "rid", "ts", "etag", "containers", "offer_rid", "_doc_seq")

    def __init__(self, id: str, rid: str, ts: int, etag: str):
        self.id = id
        self.rid = rid
        self.ts = ts
        self.etag = etag
        self.containers: dict[str, "Container"] = {}
        self.offer_rid = None

    @property
    def self_link(self) -> str:
        return f"dbs/{self.rid}/"

    def properties(self) -> dict:
        return {"id": self.id, "_rid": self.rid, "_self": self.self_link, "_etag": self.etag,
                "_colls": "colls/", "_users": "users/", "_ts": self.ts}


class Container:
    __slots__ = ("id", "rid", "db", "definition", "pk_def", "partitions", "_bounds", "ts", "etag",
                 "offer_rid", "doc_seq", "rid_index", "_epk_cache", "pkranges_etag", "conflicts",
                 "docs_link", "scripts", "ttl")

    def __init__(self, db: Database, definition: dict, rid: str, ts: int, etag: str,
                 partitions: list):
        self.id = definition["id"]
        self.rid = rid
        self.db = db
        self.definition = definition
        self.pk_def = epks.PartitionKeyDef.from_json(definition["partitionKey"])
        self.partitions = partitions
        self._bounds = [p.min_epk for p in partitions]
        self.ts = ts
        self.etag = etag
        self.offer_rid = None
        self.doc_seq = 0
        # doc _rid -> the newest live Version written under it (its .key locates the item). Its
        # values are settled versions, which the collector does not track, so a plain dict would
        # be untracked by a full collection and tracked again, in the young generation, by the
        # next insert: every collection after a full one walked its million entries again (30-60
        # ms each). A TrackedDict never leaves the generation it reached (store.py).
        self.rid_index = TrackedDict()
        self._epk_cache = Cache(EPK_CACHE_MAX_BYTES)    # canonical pk JSON -> EPK
        self.pkranges_etag = f'"{rid}-{len(partitions)}"'
        self.conflicts = None                       # ConflictLog (multi-write losers)
        self.docs_link = f"{self.self_link}docs/"    # a document's _self is this + its rid + "/"
        self.scripts = Scripts()                     # stored procedures, triggers, UDFs (core/scripts.py)
        self.ttl = None                             # ttl.Expiry while defaultTtl is set (ttl.attach)

    @property
    def self_link(self) -> str:
        return f"dbs/{self.db.rid}/colls/{self.rid}/"

    @property
    def name_path(self) -> str:
        return f"dbs/{self.db.id}/colls/{self.id}"

    def properties(self) -> dict:
        props = dict(self.definition)
        props.update({"_rid": self.rid, "_self": self.self_link, "_etag": self.etag, "_ts": self.ts,
                      "_docs": "docs/", "_sprocs": "sprocs/", "_triggers": "triggers/",
                      "_udfs": "udfs/", "_conflicts": "conflicts/"})
        return props

    # ---- routing -----------------------------------------------------------------------
    def epk_of(self, pk_json: str, values: list) -> str:
        """EPK of a partition key, cached by its canonical JSON."""
        cached = self._epk_cache.get(pk_json)
        if cached is None:
            cached = self._epk_cache.put(pk_json, epks.effective_partition_key(self.pk_def, values),
                                         text_bytes(pk_json) + _EPK_BYTES)
        return cached

    def partition_index(self, epk: str) -> int:
        return bisect.bisect_right(self._bounds, epk) - 1

    def partition_for_epk(self, epk: str):
        return self.partitions[bisect.bisect_right(self._bounds, epk) - 1]

    def pkranges(self) -> list[dict]:
        out = []
        for p in self.partitions:
            out.append({"id": p.range_id, "minInclusive": p.min_epk, "maxExclusive": p.max_epk,
                        "ridPrefix": int(p.range_id), "throughputFraction": 1.0 / len(self.partitions),
                        "status": "online", "parents": [], "_rid": f"{self.rid}{p.range_id}",
                        "_self": f"{self.self_link}pkranges/{p.range_id}/", "_etag": self.pkranges_etag,
                        "_ts": self.ts})
        return out


def partition_count_for(throughput: int | None, autoscale_max: int | None,
                        ru_per_partition: int = RU_PER_PARTITION) -> int:
    ru = autoscale_max or throughput or 0
    return max(1, -(-ru // ru_per_partition))


# What json.dumps(..., ensure_ascii=False) writes for a str.
_encode_str = json.encoder.encode_basestring


def canonical_pk_json(values: list) -> str:
    """The key under which a logical partition's items are stored: compact JSON of its values,
    integral floats folded to ints (5 and 5.0 are one key, as their hashes are)."""
    if len(values) == 1 and type(values[0]) is str:
        return f"[{_encode_str(values[0])}]"      # the common key, without an encoder run
    norm = []
    for v in values:
        if v is epks.UNDEFINED:
            norm.append({})
        elif type(v) is float and v.is_integer() and abs(v) < 2 ** 53:
            norm.append(int(v))
        else:
            norm.append(v)
    return jsontext.dumps(norm)


ETAG_EXCLUDED_PATH = "/\"_etag\"/?"
DEFAULT_INDEXING_POLICY = {"indexingMode": "consistent", "automatic": True,
                           "includedPaths": [{"path": "/*"}],
                           "excludedPaths": [{"path": ETAG_EXCLUDED_PATH}]}


def _with_etag_excluded(policy):
    """The policy as the service stores it: `_etag` is never indexed, so a policy that does not
    exclude it gets `/"_etag"/?` appended to its excludedPaths (not with indexingMode none,
    which indexes nothing). A malformed policy is returned as given, for its validation."""
    if not isinstance(policy, dict) or str(policy.get("indexingMode", "consistent")).lower() == "none":
        return policy
    excluded = policy.get("excludedPaths", [])
    if not isinstance(excluded, list):
        return policy
    if any(isinstance(p, dict) and p.get("path") == ETAG_EXCLUDED_PATH for p in excluded):
        return policy
    return {**policy, "excludedPaths": [*excluded, {"path": ETAG_EXCLUDED_PATH}]}


def container_definition(body: dict) -> dict:
    definition = {k: v for k, v in body.items() if not k.startswith("_")}
    pk = definition.get("partitionKey")
    if pk is None:
        raise bad_request("A container needs a partitionKey definition, e.g. "
                          '{"paths":["/pk"],"kind":"Hash","version":2}.')
    try:
        definition["partitionKey"] = epks.PartitionKeyDef.from_json(pk).to_json()
    except (ValueError, TypeError, AttributeError) as e:
        raise bad_request(f"Invalid partitionKey definition: {e}") from None
    if "computedProperties" in definition:
        from .query import compile_query
        from .query.computed import check
        try:
            check(definition["computedProperties"], compile_query)
        except ValueError as e:
            raise bad_request(f"Invalid computedProperties: {e}") from None
    definition["indexingPolicy"] = _with_etag_excluded(definition.get("indexingPolicy", DEFAULT_INDEXING_POLICY))
    definition.setdefault("conflictResolutionPolicy",
                          {"mode": "LastWriterWins", "conflictResolutionPath": "/_ts",
                           "conflictResolutionProcedure": ""})
    definition.setdefault("geospatialConfig", {"type": "Geography"})
    check_default_ttl(definition)
    if definition.get("defaultTtl", 0) is None:
        del definition["defaultTtl"]            # null is TTL off, as absent: the service lists neither
    return definition
