"""Proves the official SDK's session bookkeeping stays whole against regionlab's 404/1002 replies,
and that a drill records an exception the SDK raises inside itself as that operation's error
instead of dying with it. Real emulator, real azure-cosmos 4.17.1, no mocks.

azure-cosmos clears a container's session tokens when a read's last try gets 404/1002
(`SessionContainer.clear_session_token`), by the name in its last successful reply's
`x-ms-alt-content-path`, and deletes both its name -> rid entry and the rid's tokens. Any request
puts the name back (from its container cache) without tokens; the rid's tokens come back only
with a reply that carries a session token and the name path. A 404/1002 that carries them (as
the service's do) puts both back just before the SDK clears; a bare one lets a second clear
delete tokens that are gone: KeyError, raised out of the SDK's retry loop."""
import asyncio

from azure.cosmos import CosmosClient, PartitionKey
from azure.cosmos.exceptions import CosmosHttpResponseError

from regionlab.emulator.drill import resolve
from regionlab.emulator.drill.report import summarize
from regionlab.emulator.drill.sdk_workload import SdkWorkload
from regionlab.emulator.testing import running_emulator

DRILL = {"name": "session-clear", "duration_ms": 1000, "schedule": [],
         "workload": {"client": "azure-cosmos", "keys": 2, "mix": {"read": 1}}}
STALE_TOKEN = "0:-1#999999"            # an LSN the partition never reached
SDK_KEY_ERROR = "azure-cosmos KeyError in azure.cosmos._session.clear_session_token"


def test_a_session_refusal_names_the_container_and_its_token():
    with running_emulator(regions=["East US"]) as emu:
        container = (CosmosClient(emu.endpoint, emu.key).create_database_if_not_exists("d")
                     .create_container_if_not_exists("c", PartitionKey("/pk")))
        container.upsert_item({"id": "k", "pk": "k"})
        seen = []
        try:
            container.read_item("k", "k", session_token=STALE_TOKEN,
                                raw_response_hook=lambda r: seen.append(dict(r.http_response.headers)))
        except CosmosHttpResponseError as e:
            assert (e.status_code, e.sub_status) == (404, 1002)
        else:
            raise AssertionError("a read past the partition's LSN was served")
    for headers in seen:                # every try of the SDK's session retry
        assert headers["x-ms-alt-content-path"] == "dbs/d/colls/c"
        assert headers["x-ms-session-token"].startswith("0:")
        assert headers["x-ms-documentdb-partitionkeyrangeid"] == "0"


async def _two_refused_reads(emu) -> list:
    workload = SdkWorkload(resolve(DRILL), emu.endpoint, emu.key)
    await workload.setup()
    workload.start_clock()
    assert (await workload._one("read", 0, 0)).ok     # the SDK's last successful reply names the container
    emu.control("POST", "/faults", {"type": "error", "region": "East US", "status": 404, "substatus": 1002,
                                    "op": "read", "database": "drill", "container": "items"})
    try:
        return [await workload._one("read", 0, n) for n in (1, 2)]
    finally:
        await workload.close()


def test_an_sdk_fault_in_clear_session_token_is_the_operations_error():
    # An injected 404/1002 is a bare reply: the SDK's own fault shows.
    with running_emulator(regions=["East US"]) as emu:
        first, second = asyncio.run(_two_refused_reads(emu))
    assert (first.status, first.sub_status, first.client_error) == (404, 1002, None)
    assert second.client_error == SDK_KEY_ERROR and not second.ok
    assert summarize([first, second], 1000)["errors_by_status"] == {"404/1002": 1, SDK_KEY_ERROR: 1}
