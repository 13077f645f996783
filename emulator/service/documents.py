"""Items: create, upsert, read, replace, patch, delete, read-feed, delete by partition key.

Each handler parses and validates everything first, then runs one core Writer (or a read),
then waits until the write is acknowledged by a quorum before answering. Every item reply
carries the session token, the alt-content-path and the partition key range id the SDK needs
to track sessions (cosmos-wire §2, §8).
"""
from regionlab.client.protocol import headers as H

from ..core import charge
from ..core import documents as docs
from ..core import feed as feeds
from ..core import throttle as th
from ..core import ttl
from ..core.consistency import effective
from ..core.errors import CosmosError, bad_request, not_found
from ..core.validation import ValidationError, check_id, parse_item_body
from . import admission, partition_keys, responses
from .call import item_of
from .sessions import parse_session, refusal_headers, session_headers, session_refused
from ..core.limits import ITEM_MAX_BYTES

WRITE_OPS = {"POST", "PUT", "PATCH", "DELETE"}


def _doc_headers(call, container, rs, lsn: int, version=None) -> dict:
    h = session_headers(call, container, rs, lsn)
    if version is not None:
        h[H.ETAG] = version.etag
    return h


def _check_item(doc, raw_len: int) -> None:
    if not isinstance(doc, dict):
        raise bad_request("An item must be a JSON object.")
    if raw_len > ITEM_MAX_BYTES:
        raise CosmosError(413, 0, f"Request size is too large: the item is {raw_len} bytes; "
                                  f"the limit is {ITEM_MAX_BYTES} bytes.")
    try:
        check_id(doc.get("id"))
    except ValidationError as e:
        raise CosmosError(e.status, e.substatus, e.message) from None


def commit_staged(call, writer, op: str | None = None) -> tuple[int, float]:
    """Admit a staged Writer (as `op`, by default the one admission.write reads off the call)
    and commit it: (LSN or 0, charge). Both surfaces commit through here; direct mode's fast
    path (emulator/direct/point.py) names its op and then asks Service.acknowledging whether
    it must wait, without a coroutine in the common case."""
    ru = admission.write(call, writer, op)      # a 429 here leaves nothing applied
    return writer.commit(), ru


async def commit(call, writer) -> tuple[int, float]:
    """Admit a staged Writer, commit it and wait for its acknowledgement: (LSN or 0, charge)."""
    lsn, ru = commit_staged(call, writer)
    if lsn:
        await call.svc.write_acknowledged(call, writer, lsn)
    return lsn, ru


async def _write_reply(call, container, writer, status: int, version) -> "responses.Reply":
    lsn, ru = await commit(call, writer)
    return written_reply(call, container, writer, lsn, ru, status, version)


def written_reply(call, container, writer, lsn: int, ru: float, status: int, version) -> "responses.Reply":
    """The reply to a committed write (LSN lsn, 0 if nothing changed): its headers, and its body
    unless it deleted or the client prefers a minimal reply."""
    hdrs = _doc_headers(call, container, writer.rs, lsn or writer.rs.committed_lsn, version)
    if version is None or status == 204:
        return responses.reply(204, None, call.activity_id, ru, hdrs)
    if (call.header(H.PREFER) or "").lower() == H.PREFER_RETURN_MINIMAL:
        return responses.reply(status, None, call.activity_id, ru, hdrs)
    return responses.reply(status, version.body, call.activity_id, ru, hdrs)


def _writer(call, container, pk_json, pk_values):
    return docs.Writer(container, call.region, pk_json, pk_values, call.svc.now_ms(call.region))


# ---- /docs ---------------------------------------------------------------------------------
async def create(call, container):
    writer, status, version = stage_create(call, container)
    return await _write_reply(call, container, writer, status, version)


def stage_create(call, container):
    """(writer, status, version) of a create or upsert, staged and not yet admitted."""
    pk_json, values = partition_keys.required(call, container)
    return stage_body(call.svc, call.region, container, pk_json, values, call.raw, call.flag(H.IS_UPSERT),
                      call.header(H.IF_MATCH))


def stage_body(svc, region: str, container, pk_json: str, values: list, raw: bytes, upsert: bool, if_match):
    """stage_create once the partition key is known: the item in raw, parsed, checked and staged
    as a create or upsert. Direct mode's fast create calls this with the key it already parsed."""
    if raw:                                     # call.item_of, inlined (every create)
        try:
            doc, verbatim = parse_item_body(raw)
        except ValidationError as e:
            raise CosmosError(e.status, e.substatus, e.message) from None
    else:
        doc, verbatim = item_of(raw)            # its 400 for an empty body
    _check_item(doc, len(raw))
    writer = docs.Writer(container, region, pk_json, values, svc.now_ms(region))
    stored = raw if verbatim else None        # the body is raw, the system properties spliced in
    if upsert:
        status, version = writer.upsert(doc, if_match, stored)
    else:
        status, version = writer.create(doc, stored)
    return writer, status, version


async def read_feed(call, container):
    consistency = effective(call.svc.account.consistency, call.header(H.CONSISTENCY_LEVEL))
    session = parse_session(call)
    max_items = feeds.page_size(call.int_header(H.MAX_ITEM_COUNT))
    pk_json = None
    if call.header(H.PARTITION_KEY) is not None:
        pk_json, _ = partition_keys.required(call, container)
    indexes = None
    range_id = call.header(H.PK_RANGE_ID)
    if range_id is not None:
        indexes = [i for i, p in enumerate(container.partitions) if p.range_id == range_id]
        if not indexes:
            raise CosmosError(410, 1002, f"Partition key range '{range_id}' does not exist (any more); "
                                         "refresh the partition key ranges.")
    elif pk_json is not None:
        epk = container.epk_of(pk_json, docs.pk_values_of(pk_json))
        indexes = [container.partition_index(epk)]
    for i in (indexes if indexes is not None else range(len(container.partitions))):
        waiting = call.svc.readable(container.partitions[i].for_read(call.region), consistency, session)
        if waiting is not None:
            await waiting
    versions, cont, touched = feeds.read_page(container, call.region, consistency, session,
                                              call.header(H.CONTINUATION), max_items, indexes, pk_json,
                                              primary_ok=call.svc.primary_ok, pins=call.pins())
    bodies = [v.body for v in versions]
    ru = charge.feed(len(bodies), sum(map(len, bodies)))
    admission.spread(call, container, [rs for rs, _ in touched], ru, len(bodies), th.READ_FEED)
    hdrs = {H.ITEM_COUNT: str(len(bodies))}
    if cont is not None:
        hdrs[H.CONTINUATION] = cont
    if len(touched) == 1:               # the token of the LSN it read at, as a point read's
        hdrs.update(session_headers(call, container, *touched[0]))
    return responses.reply(200, responses.feed_body(container.rid, "Documents", bodies),
                           call.activity_id, ru, hdrs)


# ---- /docs/{id} ----------------------------------------------------------------------------
def _item_key(call, container, id_seg: str, by_rid: bool):
    """(pk_json, values, id) of the addressed item; a rid path finds its key by _rid."""
    if by_rid:
        pk_json, id = docs.locate_rid(container, id_seg)
        if call.header(H.PARTITION_KEY) is not None:
            hdr_pk, _ = partition_keys.required(call, container)
            if hdr_pk != pk_json:
                raise not_found()
        return pk_json, docs.pk_values_of(pk_json), id
    pk_json, values = partition_keys.required(call, container)
    return pk_json, values, id_seg


async def item(call, container, id_seg: str, by_rid: bool):
    method = call.method
    if method == "GET":
        return await read(call, container, id_seg, by_rid)
    if method not in WRITE_OPS - {"POST"}:
        raise CosmosError(405, 0, f"{method} is not supported on an item; use GET, PUT, PATCH or DELETE.")
    writer, status, version = stage_item_write(call, container, id_seg, by_rid)
    return await _write_reply(call, container, writer, status, version)


def stage_item_write(call, container, id_seg: str, by_rid: bool):
    """(writer, status, version) of a replace (PUT), delete or patch, staged and not yet admitted."""
    method = call.method
    pk_json, values, id = _item_key(call, container, id_seg, by_rid)
    writer = _writer(call, container, pk_json, values)
    if_match = call.header(H.IF_MATCH)
    if method == "PUT":
        doc = call.json_body()
        _check_item(doc, len(call.raw))
        status, version = writer.replace(id, doc, if_match)
    elif method == "DELETE":
        status, version = writer.delete(id, if_match)
    else:
        operations, condition = patch_request(call.json_body())
        status, version = writer.patch(id, operations, condition, if_match)
    return writer, status, version


def patch_request(body) -> tuple[list, str | None]:
    """(operations, condition) of a patch body: `{"operations": [...], "condition"?: ...}`, or a
    bare array of operations (the form the JS SDK's docs use; cosmos-wire §10.2)."""
    if isinstance(body, list):
        return body, None
    if isinstance(body, dict) and isinstance(body.get("operations"), list):
        return body["operations"], body.get("condition")
    raise bad_request('A patch body must be {"operations":[{"op":...,"path":...}], "condition"?: "FROM c WHERE ..."} '
                      'or a bare JSON array of operations.')


def read_target(call, container, id_seg: str, by_rid: bool):
    """(replica set, pk_json, id, consistency, session) of a point read."""
    pk_json, values, id = _item_key(call, container, id_seg, by_rid)
    consistency = effective(call.svc.account.consistency, call.header(H.CONSISTENCY_LEVEL))
    session = parse_session(call)
    rs = container.partition_for_epk(container.epk_of(pk_json, values)).for_read(call.region)
    return rs, pk_json, id, consistency, session


def read_point(call, container, rs, pk_json: str, id: str, consistency: str, session):
    """(version or None, visible LSN, charge) of a point read, admitted: at the replica the
    consistency level routes to, or (direct mode) at the one the request named, never waiting.
    Both surfaces read through here."""
    if call.replica is not None:         # direct mode: its connection counts the read in flight
        version, lsn = docs.read_at(rs, call.replica, pk_json, id, consistency, session)
        call.replica.reads_served += 1
        if call.replica.in_flight > call.replica.in_flight_peak:
            call.replica.in_flight_peak = call.replica.in_flight
    else:
        replica, lsn = docs.choose_replica(rs, consistency, session, call.svc.primary_ok, call.pins())
        version = rs.store.get((pk_json, id), lsn)
        _serving(call, replica)
    if container.ttl is not None:
        version = ttl.visible(container, version, call.region)
    ru = charge.read(len(version.body) if version is not None else 0)
    admission.read(call, container, rs, ru)
    return version, lsn, ru


async def read(call, container, id_seg: str, by_rid: bool):
    rs, pk_json, id, consistency, session = read_target(call, container, id_seg, by_rid)
    try:
        if call.replica is None:
            waiting = call.svc.readable(rs, consistency, session)
            if waiting is not None:
                await waiting
        version, lsn, ru = read_point(call, container, rs, pk_json, id, consistency, session)
    except CosmosError as e:
        # Gateway only: direct mode's 404/1002 frame is the bundled client's, which keeps its
        # session without it (and direct/point.py answers the same).
        if not session_refused(e) or call.replica is not None:
            raise
        return responses.error(e, call.activity_id, refusal_headers(call, container, rs))
    if version is None:
        hdrs = session_headers(call, container, rs, lsn)
        hdrs[H.REQUEST_CHARGE] = responses.charge_text(ru)
        raise_with = not_found()
        return responses.error(raise_with, call.activity_id, hdrs)
    hdrs = _doc_headers(call, container, rs, lsn, version)
    topology = call.svc.topology
    if topology is not None:         # the simulator has no URLs
        # The serving region's URL of the item, as the service sends it: the SDKs' own tests
        # read it to see which region served a read.
        hdrs[H.CONTENT_LOCATION] = topology.region_endpoint(call.region) + call.link
    inm = call.header(H.IF_NONE_MATCH)
    if inm is not None and inm in (version.etag, "*"):
        return responses.reply(304, None, call.activity_id, ru, hdrs)
    return responses.reply(200, version.body, call.activity_id, ru, hdrs)


def _serving(call, replica) -> None:
    """replica serves this read: in flight from here until the reply goes out (server.release)."""
    replica.in_flight += 1
    replica.reads_served += 1
    if replica.in_flight > replica.in_flight_peak:
        replica.in_flight_peak = replica.in_flight
    call.serving = (replica,)


async def delete_by_partition_key(call, container):
    if call.method != "POST":
        raise CosmosError(405, 0, "Delete by partition key is a POST.")
    pk_json, values = partition_keys.required(call, container, full=False)
    if len(values) != len(container.pk_def.paths):
        raise bad_request("Delete by partition key needs the full partition key.")
    writer = _writer(call, container, pk_json, values)
    n = writer.delete_all()
    ru = admission.write(call, writer, th.DELETE_BY_PK)
    lsn = writer.commit()
    if lsn:
        await call.svc.write_acknowledged(call, writer, lsn)
    hdrs = _doc_headers(call, container, writer.rs, lsn or writer.rs.committed_lsn)
    return responses.reply(200, {"deleted": n}, call.activity_id, ru, hdrs)
