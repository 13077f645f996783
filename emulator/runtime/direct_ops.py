"""Direct-mode point reads and the reply arrays every direct request is answered with.

Theory of operation: a direct point read is the gateway's read without the gateway's envelope.
It runs the same steps in the same order as gateway/documents.py read_target + read_point (the
partition key parse and check, the consistency override, the session token parse, the range the
key hashes to, core/documents.py read_at at the named replica, the read charge, the throttle's
admission), so its answers and errors are the gateway's; what it leaves out is what only HTTP
needs: a header-shaped Call, header dicts and their text. Replies are built as the version 2
array (client/protocol/direct.py REPLY_FIELDS) from the start; a version 1 connection gets the
same fields as a map.

Per replica (a node's resolved `_Target`) the last session token text is kept with what it was
made from (LSN, the replica set's progress and region order, epoch), so a steady stream of reads
formats no numbers.
"""
from regionlab.client.protocol import direct as D
from regionlab.client.protocol import headers as H

from ..core import charge, throttle as th
from ..core.consistency import effective
from ..core.documents import read_at
from ..core.errors import CosmosError, bad_request, not_found
from ..service import partition_keys, responses, sessions

READ_CHARGES_MAX = 4096            # read charges kept by item size (there are few sizes)
_read_charges: dict = {}
_RES = D.RESPONSE_CODE
_parsed = partition_keys.parsed


def range_gone(target, pk_json: str) -> CosmosError:
    return CosmosError(410, D.SUB_PARTITION_KEY_RANGE_GONE,
                       f"The partition key {pk_json[:80]} is not in range {target.partition.range_id}; "
                       "refresh the partition key ranges and addresses.")


def _pk_missing() -> CosmosError:
    return bad_request("PartitionKey value must be supplied for this operation: send the "
                       "x-ms-documentdb-partitionkey header, e.g. [\"p1\"].")


def _session_token(target, rs, lsn: int) -> str:
    """sessions.token(rs, lsn), kept per target while nothing it is made from changed."""
    partition = rs.partition
    if partition is None:
        return sessions.token(rs, lsn)
    hit = target.token
    order = partition.region_order
    if hit is not None and hit[0] == lsn and hit[1] == rs.progress_seq and hit[2] is order and hit[3] == rs.epoch:
        return hit[4]
    text = sessions.token(rs, lsn)
    target.token = (lsn, rs.progress_seq, order, rs.epoch, text)
    return text


def _read_charge(nbytes: int) -> float:
    ru = _read_charges.get(nbytes)
    if ru is None:
        if len(_read_charges) >= READ_CHARGES_MAX:
            _read_charges.clear()
        ru = _read_charges[nbytes] = charge.read(nbytes)
    return ru


def read(account, region: str, target, rid: int, item: str, pk, consistency, session, inm, activity: str) -> list:
    """The reply array of a point read of `item` at the target replica; a CosmosError raised
    here is the request's error reply (with the replica's LSNs, as the gateway's errors)."""
    container = target.container
    if pk is None:
        raise _pk_missing()
    pk_json, values = _parsed(pk) or partition_keys.parse(pk)
    if len(values) != len(container.pk_def.paths):
        partition_keys.checked(container, pk_json, values)     # raises the gateway's 400
    level = effective(account.consistency, consistency) if consistency else account.consistency
    tokens = sessions.parse_session_text(session) if session else None
    epk = container.epk_of(pk_json, values)
    partitions = container.partitions
    # With one partition every key is in it (what partition_for_epk answers), so skip the bisect.
    rs = (partitions[0] if len(partitions) == 1 else container.partition_for_epk(epk)).replica_sets[region]
    if rs is not target.rs:
        raise range_gone(target, pk_json)
    replica = target.replica
    version, lsn = read_at(rs, replica, pk_json, item, level, tokens)
    replica.reads_served += 1            # the per-replica counters count direct reads too
    if replica.in_flight >= replica.in_flight_peak:
        replica.in_flight_peak = replica.in_flight + 1      # this read is in flight while it runs
    nbytes = len(version.body) if version is not None else 0
    ru = _read_charges.get(nbytes) or _read_charge(nbytes)
    account.throttle.admit(region, container, rs.range_id, ru, 1, th.READ)
    hit = target.token                   # _session_token, inlined for the common case
    if hit is not None and hit[0] == lsn and hit[1] == rs.progress_seq and hit[2] is rs.partition.region_order \
            and hit[3] == rs.epoch:
        token = hit[4]
    else:
        token = _session_token(target, rs, lsn)
    if version is None:
        body = responses.error(not_found(), activity).body
        return [_RES, rid, 404, 0, body, ru, token, replica.applied_lsn, rs.committed_lsn,
                target.partition.global_lsn, lsn, None, replica.role, activity, None]
    etag = version.etag
    if inm is not None and inm in (etag, "*"):
        return [_RES, rid, 304, 0, None, ru, token, replica.applied_lsn, rs.committed_lsn,
                target.partition.global_lsn, lsn, etag, replica.role, activity, None]
    return [_RES, rid, 200, 0, version.body, ru, token, replica.applied_lsn, rs.committed_lsn,
            target.partition.global_lsn, lsn, etag, replica.role, activity, None]


def fields_reply(rid: int, fields: dict, target, activity: str) -> list:
    """The reply array of a point write's fields (direct_connection._write)."""
    replica = target.replica
    g = fields.get
    return [_RES, rid, fields["status"], fields["sub"], fields["body"], fields["charge"], g("session"),
            replica.applied_lsn, target.rs.committed_lsn, target.partition.global_lsn, g("item_lsn"),
            g("etag"), replica.role, activity, None]


def gateway_reply(rid: int, reply, target, activity: str) -> list:
    """The reply array of a gateway Reply (feeds, queries, batches, errors) at the target replica."""
    h = reply.headers
    get = h.get
    extra = None
    for header, name in _EXTRA_HEADERS:
        v = get(header)
        if v is not None:
            if extra is None:
                extra = {}
            extra[name] = v if name == "continuation" else int(v)
    lsn = get(H.LSN)
    replica = target.replica
    return [_RES, rid, reply.status, reply.substatus, reply.body or None, float(get(H.REQUEST_CHARGE, 0.0)),
            get(H.SESSION_TOKEN), replica.applied_lsn, target.rs.committed_lsn, target.partition.global_lsn,
            int(lsn) if lsn is not None else None, get(H.ETAG), replica.role, activity, extra]


def refusal(rid: int, err: CosmosError, activity: str) -> list:
    """The reply array of a request refused before it reached a replica (no LSNs to report)."""
    body = responses.error(err, activity).body
    extra = {"retry_after_ms": int(err.retry_after_ms)} if err.retry_after_ms is not None else None
    return [_RES, rid, err.status, err.substatus, body, 0.0, None, None, None, None, None, None, None, activity, extra]


_EXTRA_HEADERS = ((H.CONTINUATION, "continuation"), (H.ITEM_COUNT, "item_count"),
                  (H.RETRY_AFTER_MS, "retry_after_ms"))
