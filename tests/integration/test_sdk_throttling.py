"""Proves the official SDK meets regionlab's throttling as it meets the service's: driven past a
container's RU/s it gets 429/3200 with an integer x-ms-retry-after-ms, waits exactly that (its
own x-ms-throttle-retry-count / -wait-time-ms headers say so) and succeeds; without retries, or
past its retry limit, it raises 429 and nothing of the refused write is applied; a credit-limited
account refuses the 1001st credit of a window with 50009 (the window observed on the control
port), charges management operations 10 credits and a query one per result and per filter
evaluation, and the SDK rides through the 2 s retry-after; a serverless account refuses
provisioned throughput. Real emulator, real sockets, sync SDK; no sleeps (the SDK's own waits)."""
import json
import urllib.parse
import urllib.request

import pytest
from azure.cosmos import PartitionKey, documents
from azure.cosmos.exceptions import CosmosHttpResponseError

from sdk_harness import WireLog, item_count, make_client

BIG = "x" * (100 * 1024)                 # a ~100 KB item costs ~50 RU to write
SDK_RETRIES = {"retry_total": 9, "retry_backoff_max": 30, "retry_fixed_interval": None}
WRITES_UNTIL_THROTTLED_MAX = 60


def no_retry_client(emu, **kwargs):
    """The SDK with throttle retries off: retry_total=0 reads as "the default" (9), so set the
    connection policy's RetryOptions instead."""
    policy = documents.ConnectionPolicy()
    policy.RetryOptions = documents.RetryOptions(max_retry_attempt_count=0)
    return make_client(emu, retry_total=None, connection_policy=policy, **kwargs)


def control(emu, method: str, path: str, body=None) -> dict:
    url = emu.control_endpoint.rstrip("/") + urllib.parse.quote(path)
    req = urllib.request.Request(url, method=method, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as resp:
        return json.loads(resp.read())


def sdk_throttle_report(container, operation):
    """Run one SDK operation; return (its result or the exception it raised, (retry count, wait
    ms)) as the SDK's throttle retry policy reported them in x-ms-throttle-retry-count and
    x-ms-throttle-retry-wait-time-ms. In azure-cosmos 4.17.1 the policy writes both into the
    dict that is `client_connection.last_response_headers` while the operation runs; a point
    operation that succeeds then rebinds that attribute to its own reply's headers, so the
    report is read from the dict held before the call (the same dict on failure)."""
    headers = container.client_connection.last_response_headers
    assert headers, "needs a previous operation: the SDK replaces an empty dict"
    try:
        result = operation()
    except CosmosHttpResponseError as e:
        result = e
    return result, (int(headers["x-ms-throttle-retry-count"]), int(headers["x-ms-throttle-retry-wait-time-ms"]))


def container_400(client, name="c"):
    return client.create_database("db").create_container(name, PartitionKey(path="/pk"), offer_throughput=400)


def test_sdk_waits_the_servers_retry_after_and_succeeds(regionlab):
    log = WireLog()
    with make_client(regionlab, raw_response_hook=log, **SDK_RETRIES) as client:
        c = container_400(client)
        for i in range(WRITES_UNTIL_THROTTLED_MAX):
            created, (count, wait_ms) = sdk_throttle_report(c, lambda: c.create_item({"id": str(i), "pk": "p", "big": BIG}))
            assert created["id"] == str(i)
            if count:
                break
        assert count, "400 RU/s never throttled 100 KB writes"
        refusals = [e for e in log.matching("POST", "/docs") if e.status == 429]
        assert len(refusals) == count
        for e in refusals:
            assert e.response_headers["x-ms-substatus"] == "3200"
            assert 1 <= int(e.response_headers["x-ms-retry-after-ms"]) <= 1000   # the next second
        # The SDK waited exactly what the server said, then the same write succeeded.
        assert wait_ms == sum(int(e.response_headers["x-ms-retry-after-ms"]) for e in refusals)
        assert log.statuses("POST", "/docs")[-1] == 201
        assert c.read_item(str(i), partition_key="p")["id"] == str(i)
    assert item_count(regionlab, "db", "c") == [i + 1]


def test_without_retries_the_sdk_raises_429_3200_and_nothing_is_applied(regionlab):
    with make_client(regionlab) as setup:
        container_400(setup)
    with no_retry_client(regionlab) as client:
        c = client.get_database_client("db").get_container_client("c")
        c.read()                            # any first operation: see sdk_throttle_report
        for created in range(WRITES_UNTIL_THROTTLED_MAX):
            err, report = sdk_throttle_report(c, lambda: c.create_item({"id": str(created), "pk": "p", "big": BIG}))
            if isinstance(err, CosmosHttpResponseError):
                break
        assert (err.status_code, err.sub_status) == (429, 3200)
        assert 1 <= int(err.headers["x-ms-retry-after-ms"]) <= 1000
        assert report == (0, 0)
    assert item_count(regionlab, "db", "c") == [created]        # the refused create left nothing


def test_past_its_retry_limit_the_sdk_raises_while_a_storm_keeps_the_budget_exhausted(regionlab):
    log = WireLog()
    with make_client(regionlab, raw_response_hook=log, **SDK_RETRIES) as client:
        c = container_400(client)
        c.create_item({"id": "before", "pk": "p"})
        control(regionlab, "PUT", "/throttle/storms/East US", {"share": 1.0, "op": "write", "retry_after_ms": 10})
        err, report = sdk_throttle_report(c, lambda: c.create_item({"id": "refused", "pk": "p"}))
        assert (err.status_code, err.sub_status) == (429, 3200)
        assert report == (9, 90)            # nine retries, each after the storm's 10 ms
        assert log.statuses("POST", "/docs")[-10:] == [429] * 10
        assert c.read_item("before", partition_key="p")["id"] == "before"    # reads are not stormed
        state = control(regionlab, "DELETE", "/throttle/storms/East US")
        assert state["cleared"]["requests_throttled"] == 10
        c.create_item({"id": "after", "pk": "p"})
        assert sorted(i["id"] for i in c.read_all_items()) == ["after", "before"]


def fill_credit_window(emu, c, n: int):
    """Create items in c until a single create meets a window that has spent all 1000 credits.
    While the server says `used` < 1000, a batch creates min(100, 1000 - used) items (one credit
    each) and always fits: a window only empties between the look and the batch. Once the
    server says 1000, one create is sent: it is the 1001st credit of that window (or the first
    of a new one, and the loop goes on). Returns (items created, the SDK report of that create:
    its result or exception, (retry count, wait ms)); stops at the first report of a refusal."""
    for _ in range(5000):
        used = control(emu, "GET", "/throttle")["credits"]["used"]
        if used < 1000:
            k = min(100, 1000 - used)
            c.execute_item_batch([("create", ({"id": str(n + j), "pk": "p"},)) for j in range(k)], partition_key="p")
            n += k
            continue
        result, report = sdk_throttle_report(c, lambda: c.create_item({"id": str(n), "pk": "p"}))
        if isinstance(result, CosmosHttpResponseError):
            return n, (result, report)
        n += 1
        if report[0]:
            return n, (result, report)
    raise AssertionError("the credit window never filled")


@pytest.mark.slow
@pytest.mark.regionlab_config(credits_per_s=True)
def test_credits_refuse_the_1001st_in_a_window_with_50009_and_the_sdk_rides_through(regionlab):
    log = WireLog()
    with no_retry_client(regionlab, raw_response_hook=log) as client:
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        c.read()
        n, (refused, report) = fill_credit_window(regionlab, c, 0)
        assert (refused.status_code, refused.sub_status, report) == (429, 50009, (0, 0))
        assert refused.headers["x-ms-retry-after-ms"] == "2000"
        assert ("The request was terminated because the entity is being throttled. Error code: 50009. "
                "Please wait 2 seconds and try again.") in refused.message
        credits = control(regionlab, "GET", "/throttle")["credits"]
        windows = [{"window": credits["window"], "used": credits["used"], "throttled": credits["throttled"]}]
        hit = [w for w in windows + credits["recent_windows"] if w["throttled"]]
        assert len(hit) == 1 and hit[0]["used"] == 1000
        # Data: one credit per item created; management: 10 per database/container request.
        management = [e for e in log.entries if e.path.rstrip("/").split("/")[-1] in ("dbs", "colls")
                      or e.path.rstrip("/").endswith("colls/c")]
        assert len(management) == 3         # create database, create container, read container
        assert credits["spent"] == {"data": n, "management": 10 * len(management), "filter": 0}
        assert item_count(regionlab, "db", "c") == [n]
    with make_client(regionlab, **SDK_RETRIES) as client:      # the SDK's own retry policy
        c = client.get_database_client("db").get_container_client("c")
        c.read()
        n, (created, (count, wait_ms)) = fill_credit_window(regionlab, c, n)
        assert created["id"] == str(n - 1) and count >= 1 and wait_ms == 2000 * count
    assert item_count(regionlab, "db", "c") == [n]


@pytest.mark.regionlab_config(credits_per_s=True)
def test_a_query_pays_a_credit_per_result_and_per_filter_evaluation(regionlab):
    with make_client(regionlab) as client:
        c = client.create_database("db").create_container("c", PartitionKey(path="/pk"))
        c.execute_item_batch([("create", ({"id": str(k), "pk": "p", "n": k},)) for k in range(20)], partition_key="p")
        before = control(regionlab, "GET", "/throttle")["credits"]["spent"]
        # (a filter no index can narrow: it is evaluated on all 20 items)
        assert len(list(c.query_items("SELECT * FROM c WHERE c.n % 4 = 0", partition_key="p"))) == 5
        after = control(regionlab, "GET", "/throttle")["credits"]["spent"]
        assert after["filter"] - before["filter"] == 20
        assert after["data"] - before["data"] == 5


@pytest.mark.regionlab_config(serverless=True, serverless_ru_per_s=1000)
def test_a_serverless_account_refuses_provisioned_throughput_and_caps_each_partition(regionlab):
    with make_client(regionlab) as client:
        db = client.create_database("db")
        with pytest.raises(CosmosHttpResponseError) as e:
            db.create_container("provisioned", PartitionKey(path="/pk"), offer_throughput=400)
        assert e.value.status_code == 400 and "serverless" in e.value.message
        c = db.create_container("c", PartitionKey(path="/pk"))
        c.create_item({"id": "1", "pk": "p"})
    state = control(regionlab, "GET", "/throttle")
    assert state["serverless"] and state["containers"][0]["partition_ru_per_s"] == 1000


def test_one_busy_container_of_eight_may_use_the_whole_shared_offer(regionlab):
    """400 RU/s shared by 8 containers: one busy container gets most of the 400 RU of a second
    before its first 429, not 400 / 8 = 50. The bound is generous (300 RU: six ~50 RU writes in
    one second, with 429 arriving only after eight) so a loaded 2-core machine passes; with the
    offer split evenly the first 429 comes after one write (~50 RU)."""
    with no_retry_client(regionlab) as client:
        db = client.create_database("shared", offer_throughput=400)
        cs = [db.create_container(f"c{i}", PartitionKey(path="/pk")) for i in range(8)]
        busy, spent = cs[3], 0.0
        for i in range(WRITES_UNTIL_THROTTLED_MAX):
            try:
                busy.create_item({"id": str(i), "pk": "p", "big": BIG})
            except CosmosHttpResponseError as e:
                assert (e.status_code, e.sub_status) == (429, 3200)
                break
            spent += float(busy.client_connection.last_response_headers["x-ms-request-charge"])
        else:
            pytest.fail("a 400 RU/s offer never throttled 100 KB writes")
        assert spent >= 300, f"only {spent:.1f} RU before the first 429"
    described = control(regionlab, "GET", "/throttle")["containers"]
    assert {c["container"]: c["ru_per_s"] for c in described} == {f"c{i}": 400.0 for i in range(8)}
