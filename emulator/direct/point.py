"""Direct point reads and creates, the fast path: the service's steps for them without its
envelope.

Theory of operation: every direct request can run as a gateway request runs, through
`Service.handle` and its path dispatch (adapter.py `_run`, the plain path), and does whenever a
request fault is on (the service applies it). The two operations nearly every direct request is take this path
instead while none is: the service's own steps for them, called directly, their reply built as
the array it goes out as.

* `read`: documents.read_point at the replica the request named (which never waits: a replica
  behind the session token answers 404/1002 at once), then 200, 304 (If-None-Match) or 404 with
  the session token and charge, as documents.read answers;
* `create` (and upsert): documents.stage_body, commit_staged (admission, then the commit) and
  the service's acknowledging (None when a quorum already has the write; else what to wait
  for), then 201/200 with or without the body (Prefer: return=minimal), as
  documents.create answers.

Neither makes a Call of its own: each runs under its target's reader or writer call (targets.py),
which carries what those steps take of a call (the service, the region, the serving replica);
the request's own fields (its key, options, body and activity id) are passed as they are. A
create that must wait gets a Call of its own then, for its task (replies.Waiting).

What they leave out of Service.handle is what cannot apply here or is done before: the region's
state (a node of a region that is out answers before any request runs: node.py), authentication
(done in the handshake), request faults (none is on) and the envelope of Call, Reply and header
dicts; what they keep is its error replies and its count (the region Service's requests_served,
under the same key). They must answer exactly as the plain path does:
tests/unit/direct/test_point_differential.py runs both on twin accounts and compares replies,
counts and stores. What they buy: `bench/direct_bench.py fastpath` measures point reads and
creates per second on both paths (docs/direct.md, "Performance").
"""
import logging

from regionlab.client.protocol import direct as D
from regionlab.client.protocol import headers as H

from ..core import throttle as th
from ..core.consistency import effective
from ..core.errors import CosmosError, not_found
from ..service import documents, partition_keys, responses, sessions
from ..service.call import Call
from . import replies

log = logging.getLogger("regionlab.direct")

_RES = D.RESPONSE_CODE
_READ = D.READ
_MINIMAL = H.PREFER_RETURN_MINIMAL


def _key(target, parsed) -> tuple:
    """(pk_json, values) of the request's partition key, or the service's 400 for a missing one
    or one of the wrong length for the container."""
    if parsed is None:
        raise partition_keys.missing()
    pk_json, values = parsed
    if len(values) != target.pk_paths:
        partition_keys.checked(target.container, pk_json, values)
    return pk_json, values


def read(target, rid: int, item: str, headers: dict | None, parsed, activity: str) -> list:
    """A point read at the named replica (its fields checked: adapter.serve; `headers`, those
    its options stand for, None without options), answered and counted as documents.read
    answers and Service.handle counts."""
    call = target.reader
    replica = target.replica
    replica.in_flight += 1                   # as the plain path has it, while it runs
    try:
        pk_json, values = _key(target, parsed)
        container = target.container
        level = call.svc.account.consistency
        tokens = inm = None
        if headers is not None:
            consistency = headers.get(H.CONSISTENCY_LEVEL)
            if consistency:
                level = effective(level, consistency)
            session = headers.get(H.SESSION_TOKEN)
            if session:
                tokens = sessions.parse_session_text(session)
            inm = headers.get(H.IF_NONE_MATCH)
        rs = target.rs
        version, lsn, ru = documents.read_point(call, container, rs, pk_json, item, level, tokens)
        # The session token text, kept per replica while nothing it is made from changed (the
        # LSN, the set's progress and epoch, the account's regions, whose order is a new tuple
        # when they change): a steady stream of reads at one LSN formats no numbers. Compared
        # field by field: a tuple of them made per read to compare costs more than the fields.
        token = target.token
        order = rs.partition.region_order
        if token is None or token[0] != lsn or token[1] != rs.progress_seq or token[2] is not order \
                or token[3] != rs.epoch:
            token = target.token = (lsn, rs.progress_seq, order, rs.epoch, sessions.token(rs, lsn))
        token = token[4]
        if version is None:
            status, body, etag = 404, responses.error(not_found(), activity).body, None
        else:
            etag = version.etag
            if inm is not None and inm in (etag, "*"):
                status, body = 304, None
            else:
                status, body = 200, version.body
        res = [_RES, rid, status, 0, body, ru, token, replica.applied_lsn, rs.committed_lsn,
               target.partition.global_lsn, lsn, etag, replica.role, activity, None]
    except Exception as e:
        res = _error(e, rid, target, activity, call)
    replica.in_flight -= 1
    target.counts[(_READ, target.key, res[2], res[3])] += 1
    return res


def create(target, rid: int, op: str, raw: bytes, headers: dict | None, parsed, activity: str):
    """A create or upsert of the item in `raw` at the primary (its fields checked:
    adapter.serve; `headers`, those its options stand for, None without options), answered and
    counted as documents.create answers and Service.handle counts, once its region's quorum
    (under Strong a majority of regions; with a data dir the disk) has it: its reply array now
    when the service says it needs no waiting (nearly always), else a replies.Waiting for the
    rest. It runs under its target's writer call (targets.py), not a Call of its own."""
    call = target.writer
    if_match = prefer = None
    if headers is not None:
        if_match = headers.get(H.IF_MATCH)
        prefer = headers.get(H.PREFER)
    try:
        pk_json, values = _key(target, parsed)
        svc = call.svc
        upsert = op == D.UPSERT
        writer, status, version = documents.stage_body(svc, call.region, target.container, pk_json, values, raw,
                                                       upsert, if_match)
        # Read before the commit settles the version: then it still holds its etag; after it,
        # the etag is found again in the stored body (core/store.py Version).
        etag = version.etag if version is not None else None
        lsn, ru = documents.commit_staged(call, writer, th.UPSERT if upsert else th.CREATE)
        staged = (writer, status, version, lsn, ru, etag)
        waiting = svc.acknowledging(call, writer, lsn)
        if waiting is not None:
            rest = _rest(waiting, target, rid, op, prefer, activity, staged)
            return _waiting(rest, Call.addressed(svc, "POST", target.docs_segs, headers or {}, raw, activity, None,
                                                 target.key, None, (op, target.key)), target, rid)
        res = _created(target, rid, prefer, activity, staged)
    except Exception as e:
        res = _error(e, rid, target, activity, call)
    target.counts[(op, target.key, res[2], res[3])] += 1
    return res


def _created(target, rid: int, prefer, activity: str, staged: tuple) -> list:
    """The reply array of an acknowledged create or upsert (documents._write_reply's answer)."""
    writer, status, version, lsn, ru, etag = staged
    rs = writer.rs
    seen = lsn or rs.committed_lsn
    body = None
    if version is None or status == 204:
        status, etag = 204, None
    elif prefer is None or prefer.lower() != _MINIMAL:
        body = version.body
    replica = target.replica
    return [_RES, rid, status, 0, body, ru, sessions.token(rs, seen), replica.applied_lsn, target.rs.committed_lsn,
            target.partition.global_lsn, seen, etag, replica.role, activity, None]


def _waiting(rest, call, target, rid: int):
    """Start a create's rest: a replies.Waiting for its task, with `call` (the request's own,
    what its reply is made from when the task fails), its replica in flight until it is
    answered; or its reply array if nothing was left to wait for after all."""
    try:
        first = rest.send(None)
    except StopIteration as done:
        return done.value
    target.replica.in_flight += 1            # until its reply goes out, as the plain path has it
    return replies.Waiting(rest, first, call, target, rid)


async def _rest(waiting, target, rid: int, op: str, prefer, activity: str, staged: tuple) -> list:
    """A create's rest, when its acknowledgement must be waited for (`waiting`, the service's):
    its reply array once it is acknowledged (or its error), counted."""
    try:
        await waiting
        res = _created(target, rid, prefer, activity, staged)
    except Exception as e:
        res = _error(e, rid, target, activity, target.writer)
    target.counts[(op, target.key, res[2], res[3])] += 1
    return res


def _error(e: Exception, rid: int, target, activity: str, call) -> list:
    """The reply array of what a request raised, as Service.handle answers it."""
    if not isinstance(e, CosmosError):
        log.exception("internal error on %s %s", call.method, call.path)
        e = replies.INTERNAL
    return replies.of_reply(rid, responses.error(e, activity), target, activity)
