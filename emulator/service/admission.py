"""Admission: the one call each handler makes with a request's charge (core/throttle.py).

Writes are admitted after the core Writer staged them and before `commit()`, so a 429 leaves
nothing applied (the handler must not yield between staging and admitting: the Writer gives
back the rids it drew on refusal). Reads, queries and feeds change nothing, so they are
evaluated first and admitted with their real charge before the reply is built. Management
operations (databases, containers, offers) are admitted before they run. A refusal raises the
429 CosmosError that the gateway turns into the reply, with `x-ms-retry-after-ms`.
"""
from regionlab.client.protocol import headers as H

from ..core import throttle as th

_WRITE_OPS = {"PUT": th.REPLACE, "PATCH": th.PATCH, "DELETE": th.DELETE}


def write(call, writer, op: str | None = None, ru: float | None = None, credits: int | None = None) -> float:
    """Admit a staged Writer (by default: the charge of what it staged, one credit per item);
    returns the charge."""
    if op is None:
        op = _WRITE_OPS.get(call.method) or (th.UPSERT if call.flag(H.IS_UPSERT) else th.CREATE)
    return call.svc.account.throttle.admit_writer(writer, op, ru, credits)


def script(call, writer, ru: float, credits: int) -> None:
    """Admit what a stored procedure staged. Unlike `write`, a refusal does not give back the
    document rids the Writer drew: the script awaited its engine between drawing them and now,
    so other writes to the container may have drawn later ones (a gap in rids is harmless)."""
    call.svc.account.throttle.admit(call.region, writer.container, writer.rs.range_id, ru, credits, th.BATCH)


def read(call, container, rs, ru: float, op: str = th.READ, credits: int = 1) -> None:
    """Admit a read of one partition (served by replica set rs)."""
    call.svc.account.throttle.admit(call.region, container, rs.range_id, ru, credits, op)


def spread(call, container, touched, ru: float, credits: int, op: str, filters: int = 0) -> None:
    """Admit a read of several partitions (the replica sets it touched): the charge is split."""
    call.svc.account.throttle.admit_many(call.region, container, [rs.range_id for rs in touched],
                                        ru, max(1, credits), op, filters)


def management(call) -> None:
    call.svc.account.throttle.admit_management(call.region)
