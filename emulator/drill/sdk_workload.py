"""The drill's workload through the official SDK (`"client": "azure-cosmos"`, its asyncio API):
the same operations, mix and pacing as workload.py, each recorded as the same `Op`.

The SDK has no per-operation diagnostics object with attempts, so the workload watches every HTTP
attempt itself through the azure-core hooks each call takes (`raw_request_hook` as an attempt
leaves, `raw_response_hook` as its reply comes back): status and substatus, `x-ms-request-charge`,
and the URL the attempt went to, which names its region through the account's locations. From
those:

* retries by reason: every attempt after the first, named after the reply that led to it as the
  bundled client names its reasons (`429/3200 throttled`, `429/50009 credits spent`, `503/0`, ...);
* hedged extra RU: an attempt that left while another attempt of the same operation had no reply
  yet is a hedged copy (the SDK's availability_strategy); the charge of its reply is hedged;
* the region that served: the region of the final successful reply.

What the SDK does not let it see: the reason the SDK itself gives for a retry (only the reply
before it), an attempt that got no reply (a transport error or a cancelled copy: no charge, no
status), and circuit-breaker transitions (the SDK's breaker is process-wide and unreported), so
`breaker_opened` is always 0 here.
"""
import asyncio
import os
import time

from azure.core.exceptions import AzureError
from azure.cosmos import PartitionKey
from azure.cosmos.aio import CosmosClient as SdkClient
from azure.cosmos.exceptions import CosmosHttpResponseError

from regionlab.client.aio import CosmosClient as BundledClient

from . import observed
from .workload import TRANSPORT_ERROR_STATUS, Op, Workload

SUBSTATUS_HEADER = "x-ms-substatus"
CHARGE_HEADER = "x-ms-request-charge"
REASONS = {(429, 50009): "429/50009 credits spent", (403, 3): "403/3 write forbidden",
           (404, 1002): "404/1002 session not yet readable"}


def reason_of(status: int, sub: int) -> str:
    """The bundled client's reason class for a retry after this reply."""
    if (status, sub) in REASONS:
        return REASONS[(status, sub)]
    return f"429/{sub} throttled" if status == 429 else f"{status}/{sub}"


def sdk_fault(e: BaseException) -> str | None:
    """The SDK function an exception that is no reply and no transport error was raised in (an
    SDK bug), or None when it came from elsewhere (the drill's own, which must not be hidden).

    Known: azure-cosmos 4.17.1's `SessionContainer.clear_session_token` raises KeyError when two
    reads that carried a stale session token (after a forced failover discarded writes, or a
    container was recreated) fail with 404/1002 and a request in between put the container's name
    back in its map (`get_session_token` does, from the container cache) without its tokens: the
    second clear deletes a token entry that is no longer there. It happens inside the SDK's retry
    loop, after the replies; the operation failed either way, so the drill counts it as that
    operation's error (docs/drills.md) instead of losing the run."""
    tb, last = e.__traceback__, None
    while tb is not None:
        last, tb = tb.tb_frame, tb.tb_next
    if last is None or f"{os.sep}azure{os.sep}" not in last.f_code.co_filename:
        return None
    return f"{last.f_globals.get('__name__', '?')}.{last.f_code.co_name}"


class Attempts:
    """The HTTP attempts of one operation, in the order they left, as the azure-core hooks see them."""

    def __init__(self, regions: dict):
        self.regions = regions               # endpoint "http://host:port/" -> region name
        self.sent: list[dict] = []           # {"hedge", "reply": (status, sub, charge, region) or None}
        self._waiting: dict[int, dict] = {}  # id(http request) -> its entry, until its reply

    def on_request(self, request) -> None:
        # "data": a request for the items themselves; the SDK also reads metadata inside an
        # operation (partition key ranges, the container), which its region rules route apart
        # (the service's SDKs put excluded regions back at the end for metadata), so only data
        # replies say which region served the operation.
        entry = {"hedge": bool(self._waiting), "reply": None, "data": "/docs" in request.http_request.url}
        self.sent.append(entry)
        self._waiting[id(request.http_request)] = entry

    def on_response(self, response) -> None:
        entry = self._waiting.pop(id(response.http_request), None)
        if entry is None:
            return
        r = response.http_response
        url = response.http_request.url
        base = url[:url.index("/", url.index("//") + 2) + 1]
        entry["reply"] = (r.status_code, int(r.headers.get(SUBSTATUS_HEADER) or 0),
                          float(r.headers.get(CHARGE_HEADER) or 0.0), self.regions.get(base))

    def op(self, kind: str, start_ms: float, latency_ms: float, status: int, sub: int, item_id=None) -> Op:
        chain = [a for a in self.sent if not a["hedge"]]
        retries = [reason_of(*a["reply"][:2]) if a["reply"] else "no reply" for a in chain[:-1]]
        replies = [a["reply"] for a in self.sent if a["reply"]]
        served = [a["reply"] for a in self.sent if a["reply"] and a["data"] and 200 <= a["reply"][0] < 300]
        return Op(start_ms=start_ms, kind=kind, status=status, sub_status=sub, latency_ms=latency_ms,
                  region=served[-1][3] if served and 200 <= status < 300 else None, retries=retries,
                  charge=sum(r[2] for r in replies),
                  hedged_charge=sum(a["reply"][2] for a in self.sent if a["hedge"] and a["reply"]), item_id=item_id,
                  outcomes=self.outcomes(kind, status, sub))

    def outcomes(self, kind: str, status: int, sub: int) -> tuple:
        """A write's attempts for the history checker. The hooks cannot tell a request refused
        before it left from one sent and never answered, so no reply counts as unknown."""
        if kind != "write":
            return ()
        got = tuple(observed.attempt_outcome("create", a["reply"][0], a["reply"][1]) if a["reply"]
                    else observed.UNKNOWN for a in self.sent)
        return got or (observed.attempt_outcome("create", status or None, sub),)


class SdkWorkload(Workload):
    """workload.py's Workload, with the official azure-cosmos aio client doing the operations."""
    partition_key_class = PartitionKey

    def __init__(self, drill, endpoint: str, key: str, seed: int = 0):
        super().__init__(drill, endpoint, key, seed)
        self._regions: dict = {}

    def _sdk_kwargs(self) -> dict:
        opts = self.drill.client_options
        kw = {"multiple_write_locations": opts.get("multiple_write_locations", True)}
        for name in ("preferred_locations", "excluded_locations", "availability_strategy"):
            if name in opts:
                kw[name] = opts[name]
        return kw

    async def _locations(self) -> dict:
        """endpoint -> region, from the account's locations (GET / through the bundled client:
        the SDK keeps its own to itself)."""
        async with BundledClient(self.endpoint, self.key) as probe:
            account = await probe.get_database_account()
        return {r.endpoint: r.name for r in account.read_regions + account.write_regions}

    async def setup(self) -> None:
        self._regions = await self._locations()
        await super().setup()

    def _new_client(self):
        return SdkClient(self.endpoint, self.key, **self._sdk_kwargs())

    def _apply_excluded(self) -> None:
        """The SDK takes excluded regions per request: _request_kwargs sends them from now on."""

    def _request_kwargs(self, attempts: Attempts) -> dict:
        kw = {"raw_request_hook": attempts.on_request, "raw_response_hook": attempts.on_response}
        if "timeout_s" in self.drill.client_options:
            kw["timeout"] = self.drill.client_options["timeout_s"]
        if self._excluded is not None:
            kw["excluded_locations"] = self._excluded
        return kw

    async def _one(self, kind: str, worker: int, n: int) -> Op:
        start = self.now_ms()
        began = time.monotonic()
        key = f"k-{self.rng.randrange(self.drill.keys)}"
        item_id = f"w-{self.run_tag}-{worker}-{n}" if kind == "write" else None
        attempts = Attempts(self._regions)
        kw = self._request_kwargs(attempts)
        try:
            if kind == "read":
                await self._container.read_item(key, partition_key=key, **kw)
            elif kind == "write":
                await self._container.create_item({"id": item_id, "pk": item_id, "worker": worker}, **kw)
            else:
                pager = self._container.query_items("SELECT * FROM c WHERE c.pk = @pk", partition_key=key,
                                                    parameters=[{"name": "@pk", "value": key}], **kw)
                async for page in pager.by_page():
                    async for _ in page:
                        pass
            status, sub = (201 if kind == "write" else 200), 0
        except CosmosHttpResponseError as e:
            status, sub = e.status_code or TRANSPORT_ERROR_STATUS, int(e.sub_status or 0)
        except (AzureError, OSError, asyncio.TimeoutError):   # no reply the SDK could give
            status, sub = TRANSPORT_ERROR_STATUS, 0
        except Exception as e:        # noqa: BLE001 -- only the SDK's own faults, re-raised otherwise
            where = sdk_fault(e)
            if where is None:
                raise
            op = attempts.op(kind, start, (time.monotonic() - began) * 1000.0, TRANSPORT_ERROR_STATUS, 0, item_id)
            op.client_error = f"azure-cosmos {type(e).__name__} in {where}"
            return op
        return attempts.op(kind, start, (time.monotonic() - began) * 1000.0, status, sub, item_id)
