"""Databases, containers, offers and partition key ranges (the metadata surface).

Metadata is account-wide (see core/container.py); any regional endpoint serves it. Feeds use
the service's envelope `{"_rid", "<Key>": [...], "_count"}`; queries over them run through the
same query engine as items.
"""

from regionlab.client.protocol import headers as H

from ..core import charge
from ..core.errors import CosmosError, bad_request
from ..core.offers import checked_auto_upgrade
from ..core.validation import ValidationError, parse_json_body
from . import responses

METADATA_FEED_KEYS = {"dbs": "Databases", "colls": "DocumentCollections", "offers": "Offers",
                      "pkranges": "PartitionKeyRanges", "conflicts": "Conflicts"}


def feed(call, rid: str, key: str, items: list, extra=None):
    raw = [responses.dumps(i) for i in items]
    hdrs = {H.ITEM_COUNT: str(len(raw))}
    if extra:
        hdrs.update(extra)
    return responses.reply(200, responses.feed_body(rid, key, raw), call.activity_id,
                           charge.METADATA_READ_RU, hdrs)


async def query_feed(call, rid: str, key: str, items: list):
    from .queries import run_metadata_query
    body = call.json_body()
    return feed(call, rid, key, run_metadata_query(call, body, items))


def _offer_args(call) -> tuple:
    throughput = call.int_header(H.OFFER_THROUGHPUT)
    auto = call.header(H.OFFER_AUTOPILOT)
    auto_max = upgrade = None
    if auto:
        try:
            settings = parse_json_body(auto.encode("utf-8", "surrogatepass"))
            auto_max = int(settings["maxThroughput"])
        except (ValueError, KeyError, TypeError, ValidationError):
            raise bad_request(f"{H.OFFER_AUTOPILOT} must be JSON like {{\"maxThroughput\":4000}}, got '{auto[:80]}'.") from None
        upgrade = checked_auto_upgrade(settings.get("autoUpgradePolicy"))
    if throughput is not None and auto_max is not None:
        raise bad_request("Give either manual throughput or autoscale settings, not both.")
    return throughput, auto_max, upgrade


def is_query(call) -> bool:
    """Whether a POST to a feed is a query (not a create)."""
    return call.flag(H.IS_QUERY) or (call.header(H.CONTENT_TYPE) or "").lower().startswith("application/query+json")


def created(call, props: dict):
    return responses.reply(201, props, call.activity_id, charge.METADATA_WRITE_RU)


def ok(call, props: dict, extra: dict | None = None):
    return responses.reply(200, props, call.activity_id, charge.METADATA_READ_RU,
                           {H.ETAG: props.get("_etag", ""), **(extra or {})})


def not_allowed(call, what: str):
    raise CosmosError(405, 0, f"{call.method} is not supported on {what}.")


# ---- databases -----------------------------------------------------------------------------
async def databases(call):
    account = call.svc.account
    if call.method == "GET":
        return feed(call, "", "Databases", [d.properties() for d in account.databases.values()])
    if call.method == "POST":
        if is_query(call):
            return await query_feed(call, "", "Databases", [d.properties() for d in account.databases.values()])
        body = call.json_body()
        throughput, auto_max, upgrade = _offer_args(call)
        return created(call, account.create_database(body, throughput, auto_max, upgrade).properties())
    not_allowed(call, "the databases feed")


async def database(call, db):
    if call.method == "GET":
        return ok(call, db.properties())
    if call.method == "DELETE":
        call.svc.account.delete_database(db)
        return responses.reply(204, None, call.activity_id, charge.METADATA_WRITE_RU)
    not_allowed(call, "a database")


# ---- containers ----------------------------------------------------------------------------
async def containers(call, db):
    account = call.svc.account
    if call.method == "GET":
        return feed(call, db.rid, "DocumentCollections", [c.properties() for c in db.containers.values()])
    if call.method == "POST":
        if is_query(call):
            return await query_feed(call, db.rid, "DocumentCollections", [c.properties() for c in db.containers.values()])
        body = call.json_body()
        throughput, auto_max, upgrade = _offer_args(call)
        return created(call, account.create_container(db, body, throughput, auto_max, upgrade).properties())
    not_allowed(call, "the containers feed")


async def container(call, db, c):
    if call.method == "GET":
        return _read_container(call, c)
    if call.method == "PUT":
        body = call.json_body()
        return ok(call, call.svc.account.replace_container(c, body).properties())
    if call.method == "DELETE":
        call.svc.account.delete_container(c)
        return responses.reply(204, None, call.activity_id, charge.METADATA_WRITE_RU)
    not_allowed(call, "a container")


# The service's per-container quotas, as its x-ms-resource-quota states them (sizes in KB; -1: no
# limit). regionlab enforces none of them but the item size (limits.ITEM_MAX_BYTES).
_QUOTA = "functions=25;storedProcedures=100;triggers=25;documentSize=10240;documentsSize=10485760;" \
         "documentsCount=-1;collectionSize=10485760;"


def _read_container(call, c):
    """GET of a container; with x-ms-documentdb-populatequotainfo the quota and usage headers and
    the index transformation progress (always 100: regionlab indexes as it writes), with
    x-ms-documentdb-populatepartitionstatistics a `statistics` entry per partition key range.
    Sizes and counts are those of the serving region's replicas, O(1) each (VersionStore keeps
    them), so the read costs the same for any container size."""
    props = c.properties()
    stores = [(p.range_id, p.replica_sets[call.region].store) for p in c.partitions]
    if call.flag(H.POPULATE_PARTITION_STATISTICS):
        props["statistics"] = [{"id": range_id, "sizeInKB": _kb(s.live_bytes), "documentCount": s.count_live,
                                "partitionKeys": []} for range_id, s in stores]
    extra = {}
    if call.flag(H.POPULATE_QUOTA_INFO):
        kb = _kb(sum(s.live_bytes for _, s in stores))
        count = sum(s.count_live for _, s in stores)
        extra[H.RESOURCE_QUOTA] = _QUOTA
        scripts = c.scripts.counts()
        extra[H.RESOURCE_USAGE] = (f"functions={scripts['udfs']};storedProcedures={scripts['sprocs']};"
                                   f"triggers={scripts['triggers']};documentSize={kb};"
                                   f"documentsSize={kb};documentsCount={count};collectionSize={kb};")
        extra[H.INDEX_TRANSFORMATION_PROGRESS] = "100"
        policy = props.get("indexingPolicy")
        if isinstance(policy, dict) and str(policy.get("indexingMode", "")).lower() == "lazy":
            extra[H.LAZY_INDEXING_PROGRESS] = "100"
    return ok(call, props, extra)


def _kb(size_bytes: int) -> int:
    return -(-size_bytes // 1024)


async def pkranges(call, c):
    if call.method != "GET":
        not_allowed(call, "partition key ranges")
    etag = c.pkranges_etag
    if call.header(H.IF_NONE_MATCH) == etag:
        return responses.reply(304, None, call.activity_id, charge.METADATA_READ_RU, {H.ETAG: etag})
    return feed(call, c.rid, "PartitionKeyRanges", c.pkranges(), {H.ETAG: etag})


async def conflicts(call, c):
    if call.method != "GET" and not is_query(call):
        not_allowed(call, "the conflicts feed")
    entries = c.conflicts.entries if c.conflicts is not None else []
    if call.method == "POST":
        return await query_feed(call, c.rid, "Conflicts", entries)
    return feed(call, c.rid, "Conflicts", entries)


# ---- offers --------------------------------------------------------------------------------
async def offers(call):
    account = call.svc.account
    items = [o.properties() for o in account.offers.values()]
    if call.method == "GET":
        return feed(call, "", "Offers", items)
    if call.method == "POST" and is_query(call):
        return await query_feed(call, "", "Offers", items)
    not_allowed(call, "the offers feed")


async def offer(call, rid: str):
    account = call.svc.account
    o = account.offer(rid)
    if call.method == "GET":
        return ok(call, o.properties())
    if call.method == "PUT":
        body = call.json_body()
        return ok(call, account.replace_offer(o, body).properties())
    not_allowed(call, "an offer")
