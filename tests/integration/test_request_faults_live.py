"""Request faults live (latency, error, timeout_after_apply, tcp_reset, clock_skew), injected on a
real emulator's control port and felt by real HTTP clients and the official SDK: errors answer
without applying, drops and resets come after the write applied, latency holds only the reply,
a skewed region stamps skewed _ts and judges x-ms-date by its own clock; each heals by id, count
or duration, and a refused fault changes nothing.
"""
import http.client
import json

import pytest
from azure.cosmos import PartitionKey, exceptions

from regionlab.emulator.core.container import canonical_pk_json
from regionlab.emulator.ctl import ControlError, call as control
from sdk_harness import host_port, item_count, make_client, raw_request, signed_headers

EAST = "East US"
DOCS = "/dbs/db/colls/c/docs"


def _setup(emu, partitions_container: bool = False) -> None:
    with make_client(emu) as admin:
        admin.create_database("db").create_container("c", PartitionKey(path="/pk"))


def _inject(emu, spec: dict) -> dict:
    return control(emu.control_endpoint.rstrip("/"), "POST", "/faults", spec)


def _faults(emu) -> list:
    return control(emu.control_endpoint.rstrip("/"), "GET", "/faults")["faults"]


def _heal(emu, fid: int) -> dict:
    return control(emu.control_endpoint.rstrip("/"), "DELETE", f"/faults/{fid}")


def _create(emu, doc: dict, url=None, timeout_s: float = 5.0):
    """A create on its own connection: (status, headers, body), or the exception the client got."""
    body = json.dumps(doc).encode()
    hdrs = signed_headers(emu.key, "POST", DOCS, {"content-type": "application/json",
                                                 "x-ms-documentdb-partitionkey": json.dumps([doc["pk"]])})
    host, port = host_port(url or emu.region_endpoints[EAST])
    conn = http.client.HTTPConnection(host, port, timeout=timeout_s)
    try:
        conn.request("POST", DOCS, body=body, headers=hdrs)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    except (OSError, http.client.HTTPException) as e:
        return e
    finally:
        conn.close()


def _stored(emu, id: str, pk_value: str = "p", region: str = EAST):
    def get(account):
        c = account.databases["db"].containers["c"]
        pk = canonical_pk_json([pk_value])
        rs = c.partition_for_epk(c.epk_of(pk, [pk_value])).replica_sets[region]
        v = rs.store.get((pk, id), rs.committed_lsn)
        return None if v is None else v.doc
    return emu.call(get)


def test_error_fault_answers_without_applying_and_heals_after_count(regionlab):
    _setup(regionlab)
    fault = _inject(regionlab, {"type": "error", "region": EAST, "status": 503, "op": "write", "count": 2})
    assert (fault["type"], fault["count"]) == ("error", 2) and isinstance(fault["seed"], int)
    for i in range(2):
        status, headers, body = _create(regionlab, {"id": f"x{i}", "pk": "p"})
        assert (status, headers["x-ms-substatus"]) == (503, "0")
        assert json.loads(body)["code"] == "ServiceUnavailable"
    assert item_count(regionlab, "db", "c") == [0]           # definite failures: nothing applied
    assert _faults(regionlab) == []                          # used up: healed by itself
    status, _, _ = _create(regionlab, {"id": "x2", "pk": "p"})
    assert status == 201


def test_error_fault_429_carries_retry_after_and_reads_are_spared_by_op(regionlab):
    _setup(regionlab)
    with make_client(regionlab) as client:
        c = client.get_database_client("db").get_container_client("c")
        c.create_item({"id": "a", "pk": "p"})
        fid = _inject(regionlab, {"type": "error", "region": EAST, "status": 429, "substatus": 3200,
                                  "op": "write"})["id"]
        status, headers, _ = _create(regionlab, {"id": "b", "pk": "p"})
        assert (status, headers["x-ms-substatus"], headers["x-ms-retry-after-ms"]) == (429, "3200", "100")
        assert c.read_item("a", partition_key="p")["id"] == "a"      # op "write": reads pass
        _heal(regionlab, fid)
        assert _create(regionlab, {"id": "b", "pk": "p"})[0] == 201


@pytest.mark.regionlab_config(partitions=2)
def test_error_fault_selects_one_partition(regionlab):
    _setup(regionlab)

    def range_of(account, key):
        c = account.databases["db"].containers["c"]
        return c.partition_for_epk(c.epk_of(canonical_pk_json([key]), [key])).range_id
    keys = {}
    for i in range(40):
        keys.setdefault(regionlab.call(range_of, f"k{i}"), f"k{i}")
    assert set(keys) == {"0", "1"}
    _inject(regionlab, {"type": "error", "region": EAST, "status": 500, "database": "db", "container": "c",
                        "partition": "0"})
    assert _create(regionlab, {"id": "x", "pk": keys["0"]})[0] == 500
    assert _create(regionlab, {"id": "x", "pk": keys["1"]})[0] == 201


def test_timeout_after_apply_applies_then_drops_and_the_retry_gets_409(regionlab):
    _setup(regionlab)
    fid = _inject(regionlab, {"type": "timeout_after_apply", "region": EAST, "op": "write"})["id"]
    got = _create(regionlab, {"id": "x", "pk": "p", "n": 1})
    assert isinstance(got, (http.client.RemoteDisconnected, ConnectionError)), got
    assert _stored(regionlab, "x")["n"] == 1                # applied, though never answered
    _heal(regionlab, fid)
    assert _create(regionlab, {"id": "x", "pk": "p", "n": 2})[0] == 409


def test_tcp_reset_resets_mid_reply(regionlab):
    _setup(regionlab)
    _inject(regionlab, {"type": "tcp_reset", "region": EAST, "share": 1.0, "duration_ms": 60_000})
    got = _create(regionlab, {"id": "x", "pk": "p"})
    assert isinstance(got, (ConnectionResetError, http.client.IncompleteRead, http.client.RemoteDisconnected,
                            http.client.BadStatusLine)), got
    assert _stored(regionlab, "x") is not None              # applied: only the reply was lost


@pytest.mark.slow
def test_latency_holds_the_reply_but_the_write_applies_at_once(regionlab):
    _setup(regionlab)
    fid = _inject(regionlab, {"type": "latency", "region": EAST, "delay_ms": 3000, "op": "write"})["id"]
    got = _create(regionlab, {"id": "x", "pk": "p"}, timeout_s=0.5)
    assert isinstance(got, TimeoutError), got               # the client gave up on the reply ...
    assert _stored(regionlab, "x") is not None              # ... of a write already applied
    healed = _heal(regionlab, fid)["healed"]
    assert healed["delay_ms"] == 3000 and "seed" in healed
    assert _create(regionlab, {"id": "y", "pk": "p"}, timeout_s=2.0)[0] == 201


@pytest.mark.slow
def test_held_reads_count_in_flight_so_the_next_read_goes_elsewhere(regionlab):
    """Two reads held by a 2 s latency fault overlap: the second is routed away from the replica
    the first keeps busy (weight / (in_flight + 1)), and both are released when answered."""
    _setup(regionlab)
    with make_client(regionlab) as client:
        client.get_database_client("db").get_container_client("c").create_item({"id": "x", "pk": "p"})
    _inject(regionlab, {"type": "latency", "region": EAST, "delay_ms": 2000, "op": "read"})
    path = DOCS + "/x"
    host, port = host_port(regionlab.region_endpoints[EAST])
    conns = [http.client.HTTPConnection(host, port, timeout=10) for _ in range(2)]
    for conn in conns:
        conn.request("GET", path, headers=signed_headers(regionlab.key, "GET", path,
                                                         {"x-ms-documentdb-partitionkey": '["p"]'}))
    assert [conn.getresponse().status for conn in conns] == [200, 200]
    for conn in conns:
        conn.close()

    def counters(account):
        rs = account.databases["db"].containers["c"].partitions[0].replica_sets[EAST]
        return [(r.reads_served, r.in_flight_peak, r.in_flight) for r in rs.replicas]
    served = regionlab.call(counters)
    assert sorted(served, reverse=True)[:2] == [(1, 1, 0), (1, 1, 0)]     # two replicas, one read each
    assert sum(n for n, _, _ in served) == 2


def test_clock_skew_stamps_ts_and_judges_auth_dates(regionlab):
    _setup(regionlab)
    fid = _inject(regionlab, {"type": "clock_skew", "region": EAST, "offset_ms": -600_000})["id"]
    with make_client(regionlab) as client:
        c = client.get_database_client("db").get_container_client("c")
        skewed = c.create_item({"id": "x", "pk": "p"})["_ts"]
        _heal(regionlab, fid)
        normal = c.create_item({"id": "y", "pk": "p"})["_ts"]
        assert 590 <= normal - skewed <= 610
        _inject(regionlab, {"type": "clock_skew", "region": EAST, "offset_ms": 20 * 60_000})
        with pytest.raises(exceptions.CosmosHttpResponseError) as e:
            c.read_item("x", partition_key="p")
        assert e.value.status_code == 401 and "not valid at the current time" in e.value.message


@pytest.mark.parametrize("spec, message", [
    ({"type": "latency", "region": EAST}, "latency needs an integer 'delay_ms'"),
    ({"type": "latency", "region": EAST, "delay_ms": -1}, "'delay_ms' must be an integer from 0"),
    ({"type": "latency", "region": EAST, "delay_ms": 5, "op": "reads"}, "'op' must be one of read, write"),
    ({"type": "error", "region": EAST}, "error needs an integer 'status' from 400 to 599"),
    ({"type": "error", "region": EAST, "status": 200}, "'status' must be an integer from 400 to 599"),
    ({"type": "error", "region": EAST, "status": 503, "share": 2}, "'share' to be a number from 0 to 1"),
    ({"type": "error", "region": EAST, "status": 503, "count": 0}, "'count' must be an integer from 1"),
    ({"type": "error", "region": "Mars", "status": 503}, "Unknown region 'Mars'"),
    ({"type": "error", "region": EAST, "status": 503, "container": "nope"}, "selectors match no partition"),
    ({"type": "tcp_reset", "region": EAST, "op": "read"}, "tcp_reset applies to a whole region"),
    ({"type": "clock_skew", "region": EAST}, "clock_skew needs an integer 'offset_ms'"),
])
def test_a_refused_fault_is_a_400_that_changes_nothing(regionlab, spec, message):
    _setup(regionlab)
    with pytest.raises(ControlError) as e:
        _inject(regionlab, spec)
    assert e.value.status == 400 and message in e.value.message
    assert _faults(regionlab) == []
    assert _create(regionlab, {"id": "x", "pk": "p"})[0] == 201


def test_the_global_endpoint_still_answers_discovery(regionlab):
    _inject(regionlab, {"type": "error", "region": EAST, "status": 503})
    assert raw_request(regionlab, "GET", "/").status == 200
    assert raw_request(regionlab, "GET", "/", url=regionlab.region_endpoints[EAST]).status == 503


@pytest.mark.regionlab_config(consistency="BoundedStaleness", max_interval_s=30)
def test_clock_skew_moves_the_bounded_staleness_t_bound(regionlab):
    _setup(regionlab)
    _inject(regionlab, {"type": "link_cut", "from": EAST, "to": "West US", "one_way": True})
    assert _create(regionlab, {"id": "a", "pk": "p"})[0] == 201     # West US now lags by one write
    assert _create(regionlab, {"id": "b", "pk": "p"})[0] == 201     # ... well within T = 30 s
    fid = _inject(regionlab, {"type": "clock_skew", "region": EAST, "offset_ms": 60_000})["id"]
    status, headers, _ = _create(regionlab, {"id": "c", "pk": "p"})
    assert (status, headers["x-ms-substatus"]) == (429, "3200")      # East US's clock: 60 s behind
    assert _stored(regionlab, "c") is None
    _heal(regionlab, fid)
    assert _create(regionlab, {"id": "c", "pk": "p"})[0] == 201
