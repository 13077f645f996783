"""Users, permissions and resource tokens through the official azure-cosmos SDK against a real
emulator (one per module): users and permissions answer CRUD, feeds and queries as the service
does; a client built with `credential={container_link: token}` (the SDK's resource-token form,
sync and aio) reads and writes exactly what its permission grants (container, partition key,
item; All or Read) and gets 403 outside it; an expired token (the region's clock moved by a clock_skew fault,
no waiting), a forged one, and one whose permission, user or grant is gone get 401; the bundled
client takes the same credential in gateway mode and refuses it in direct mode; what is kept
survives a restart with --data-dir."""
import asyncio
import base64
import email.utils
import json
import urllib.parse

import pytest
from azure.cosmos import CosmosClient, PartitionKey, exceptions
from azure.cosmos.aio import CosmosClient as AioCosmosClient

from regionlab.client import CosmosClient as BundledClient, CosmosHttpResponseError
from regionlab.emulator.ctl import call as control
from regionlab.emulator.testing import running_emulator
from sdk_harness import CLIENT_DEFAULTS, raw_request

EAST = "East US"


@pytest.fixture(scope="module")
def emu():
    with running_emulator() as e:
        yield e


@pytest.fixture(scope="module")
def master(emu):
    with CosmosClient(emu.endpoint, emu.key, **CLIENT_DEFAULTS) as client:
        db = client.create_database("perm")
        c = db.create_container("c", PartitionKey(path="/pk"))
        db.create_container("other", PartitionKey(path="/pk"))
        for id, pk in (("a", "p1"), ("b", "p2"), ("d", "p2")):
            c.create_item({"id": id, "pk": pk, "n": 1})
        yield client


@pytest.fixture(scope="module")
def bad_user(master):
    return _db(master).create_user({"id": "bad"})


def _db(master):
    return master.get_database_client("perm")


def _token_client(emu, link: str, token: str) -> CosmosClient:
    return CosmosClient(emu.endpoint, {link: token}, **CLIENT_DEFAULTS)


def _grant(master, user: str, perm: dict, **kwargs) -> str:
    """A new user holding the permission; its token."""
    u = _db(master).create_user({"id": user})
    return u.create_permission(perm, **kwargs).properties["_token"]


def _status(fn) -> tuple:
    try:
        fn()
    except exceptions.CosmosHttpResponseError as e:
        return e.status_code, e.message
    return 200, ""


def test_users_and_permissions_answer_crud_feeds_and_queries(master):
    db = _db(master)
    c = db.get_container_client("c")
    u = db.create_user({"id": "crud"})
    props = u.read()
    assert props["id"] == "crud" and props["_self"].endswith(f"/users/{props['_rid']}/")
    assert {"_rid", "_etag", "_ts", "_permissions"} <= set(props)
    assert _status(lambda: db.create_user({"id": "crud"}))[0] == 409
    p = u.create_permission({"id": "p", "permissionMode": "read", "resource": c.container_link})
    assert p.permission_mode == "Read" and p.resource_link == c.container_link
    assert p.properties["_token"].startswith("type=resource&ver=1&sig=")
    assert {"_rid", "_etag", "_ts", "_self"} <= set(p.properties)
    # One permission per user and resource; a second id on the same container is 409.
    assert _status(lambda: u.create_permission({"id": "q", "permissionMode": "all",
                                                "resource": c.container_link}))[0] == 409
    replaced = u.replace_permission("p", {"id": "p", "permissionMode": "all", "resource": c.container_link})
    assert replaced.permission_mode == "All" and replaced.properties["_etag"] != p.properties["_etag"]
    upserted = u.upsert_permission({"id": "p", "permissionMode": "read", "resource": c.container_link,
                                    "resourcePartitionKey": ["p1"]})
    assert upserted.properties["resourcePartitionKey"] == ["p1"]
    listed = list(u.list_permissions())
    assert [x["id"] for x in listed] == ["p"] and all("_token" in x for x in listed)
    assert [x["id"] for x in u.query_permissions("SELECT * FROM r WHERE r.id = 'p'")] == ["p"]
    assert "crud" in [x["id"] for x in db.query_users("SELECT * FROM u WHERE u.id = 'crud'")]
    renamed = db.replace_user("crud", {"id": "crud2"})
    assert renamed.read()["_rid"] == props["_rid"]
    assert [x["id"] for x in renamed.list_permissions()] == ["p"]
    renamed.delete_permission("p")
    assert list(renamed.list_permissions()) == []
    db.delete_user("crud2")
    assert _status(lambda: db.get_user_client("crud2").read())[0] == 404


@pytest.mark.parametrize("perm, kwargs, needle", [
    ({"id": "x", "permissionMode": "write", "resource": "dbs/perm/colls/c"}, {}, "'All' or 'Read'"),
    ({"id": "x", "permissionMode": "all"}, {}, "container or an item"),
    ({"id": "x", "permissionMode": "all", "resource": "dbs/perm"}, {}, "not a container link"),
    ({"id": "x", "permissionMode": "all", "resource": "dbs/perm/colls/c", "resourcePartitionKey": "p1"}, {},
     "JSON array"),
    ({"id": "x", "permissionMode": "all", "resource": "dbs/perm/colls/c"},
     {"resource_token_expiry_seconds": 18001}, "10 to 18000 seconds"),
])
def test_bad_permissions_are_400_with_a_message(bad_user, perm, kwargs, needle):
    u = bad_user
    status, message = _status(lambda: u.create_permission(perm, **kwargs))
    assert status == 400 and needle in message, message
    assert list(u.list_permissions()) == []


def test_a_permission_on_a_missing_container_is_404(master):
    u = _db(master).create_user({"id": "nowhere"})
    perm = {"id": "x", "permissionMode": "all", "resource": "dbs/perm/colls/missing"}
    assert _status(lambda: u.create_permission(perm))[0] == 404


def test_a_container_token_reads_and_writes_inside_its_container_only(emu, master):
    c = _db(master).get_container_client("c")
    token = _grant(master, "rw", {"id": "p", "permissionMode": "all", "resource": c.container_link})
    with _token_client(emu, c.container_link, token) as client:
        tc = client.get_database_client("perm").get_container_client("c")
        assert tc.read_item("a", partition_key="p1")["n"] == 1
        tc.upsert_item({"id": "rw1", "pk": "p9", "n": 2})
        tc.replace_item("rw1", {"id": "rw1", "pk": "p9", "n": 3})
        assert tc.read_item("rw1", partition_key="p9")["n"] == 3
        assert {"a", "b", "rw1"} <= {d["id"] for d in tc.read_all_items()}
        assert len(list(tc.query_items("SELECT * FROM c WHERE c.n = 3", enable_cross_partition_query=True))) == 1
        tc.delete_item("rw1", partition_key="p9")
        other = client.get_database_client("perm").get_container_client("other")
        status, message = _status(lambda: other.read_item("a", partition_key="p1"))
        assert status == 403 and "does not grant access to this container" in message
        assert _status(lambda: other.upsert_item({"id": "x", "pk": "p1"}))[0] == 403
        assert _status(lambda: client.get_database_client("perm").read())[0] == 403
        assert _status(lambda: client.get_database_client("perm").delete_container("c"))[0] == 403
    assert _db(master).get_container_client("c").read()["id"] == "c"      # nothing was deleted


def test_the_sdks_permission_list_form_is_told_to_key_tokens_by_container_link(emu, master):
    # azure-cosmos keys a permission list's tokens by the last segment of `resource` ("c"), which
    # no name-based request link matches, so it sends the header 'None'; the 401 says what to do.
    c = _db(master).get_container_client("c")
    u = _db(master).create_user({"id": "listed"})
    u.create_permission({"id": "p", "permissionMode": "read", "resource": c.container_link})
    with CosmosClient(emu.endpoint, list(u.list_permissions()), **CLIENT_DEFAULTS) as client:
        tc = client.get_database_client("perm").get_container_client("c")
        status, message = _status(lambda: tc.read_item("a", partition_key="p1"))
    assert status == 401 and "container_link" in message, message


def test_the_aio_sdk_takes_the_same_tokens(emu, master):
    c = _db(master).get_container_client("c")
    token = _grant(master, "aio", {"id": "p", "permissionMode": "read", "resource": c.container_link,
                                   "resourcePartitionKey": ["p1"]})

    async def main():
        async with AioCosmosClient(emu.endpoint, {c.container_link: token}, **CLIENT_DEFAULTS) as client:
            tc = client.get_database_client("perm").get_container_client("c")
            assert (await tc.read_item("a", partition_key="p1"))["id"] == "a"
            assert "a" in [d["id"] async for d in tc.query_items("SELECT * FROM c", partition_key="p1")]
            with pytest.raises(exceptions.CosmosHttpResponseError) as e:
                await tc.upsert_item({"id": "aio", "pk": "p1"})
            assert e.value.status_code == 403

    asyncio.run(main())


def test_a_read_token_cannot_write(emu, master):
    c = _db(master).get_container_client("c")
    token = _grant(master, "ro", {"id": "p", "permissionMode": "read", "resource": c.container_link})
    with _token_client(emu, c.container_link, token) as client:
        tc = client.get_database_client("perm").get_container_client("c")
        assert tc.read_item("b", partition_key="p2")["id"] == "b"
        assert len(list(tc.query_items("SELECT * FROM c", enable_cross_partition_query=True))) >= 3
        assert {"a", "b"} <= {d["id"] for d in tc.query_items_change_feed(start_time="Beginning")}
        for write in (lambda: tc.upsert_item({"id": "ro1", "pk": "p1"}),
                      lambda: tc.delete_item("a", partition_key="p1"),
                      lambda: tc.patch_item("a", partition_key="p1", patch_operations=[
                          {"op": "set", "path": "/n", "value": 9}])):
            status, message = _status(write)
            assert status == 403 and "grants Read only" in message, message
    assert c.read_item("a", partition_key="p1")["n"] == 1
    assert _status(lambda: c.read_item("ro1", partition_key="p1"))[0] == 404


def test_a_partition_key_token_is_held_to_its_partition(emu, master):
    c = _db(master).get_container_client("c")
    token = _grant(master, "tenant", {"id": "p", "permissionMode": "all", "resource": c.container_link,
                                      "resourcePartitionKey": ["p2"]})
    with _token_client(emu, c.container_link, token) as client:
        tc = client.get_database_client("perm").get_container_client("c")
        assert tc.read_item("b", partition_key="p2")["id"] == "b"
        assert sorted(d["id"] for d in tc.query_items("SELECT * FROM c", partition_key="p2")) == ["b", "d"]
        tc.upsert_item({"id": "t1", "pk": "p2"})
        tc.execute_item_batch([("upsert", ({"id": "t1", "pk": "p2", "n": 2},)), ("read", ("b",))], partition_key="p2")
        assert tc.read_item("t1", partition_key="p2")["n"] == 2
        for outside in (lambda: tc.read_item("a", partition_key="p1"),
                        lambda: tc.upsert_item({"id": "t2", "pk": "p1"}),
                        lambda: list(tc.read_all_items()),
                        lambda: list(tc.query_items("SELECT * FROM c", enable_cross_partition_query=True)),
                        lambda: tc.execute_item_batch([("upsert", ({"id": "t3", "pk": "p1"},))], partition_key="p1")):
            status, message = _status(outside)
            assert status == 403 and '["p2"]' in message, message
    assert _status(lambda: c.read_item("t2", partition_key="p1"))[0] == 404


def test_an_item_token_from_the_items_self_link_grants_that_item_only(emu, master):
    c = _db(master).get_container_client("c")
    item = c.create_item({"id": "mine", "pk": "p3", "n": 1})
    token = _grant(master, "owner", {"id": "p", "permissionMode": "all", "resource": item["_self"]})
    with _token_client(emu, c.container_link, token) as client:
        tc = client.get_database_client("perm").get_container_client("c")
        assert tc.read_item("mine", partition_key="p3")["n"] == 1
        tc.replace_item("mine", {"id": "mine", "pk": "p3", "n": 2})
        for outside in (lambda: tc.read_item("a", partition_key="p1"), lambda: list(tc.read_all_items()),
                        lambda: tc.create_item({"id": "mine2", "pk": "p3"})):
            status, message = _status(outside)
            assert status == 403 and "'mine'" in message, message
        tc.delete_item("mine", partition_key="p3")
    assert _status(lambda: c.read_item("mine", partition_key="p3"))[0] == 404


def test_an_expired_token_is_401_by_the_regions_clock(emu, master):
    c = _db(master).get_container_client("c")
    token = _grant(master, "brief", {"id": "p", "permissionMode": "read", "resource": c.container_link},
                   resource_token_expiry_seconds=10)
    base = emu.control_endpoint.rstrip("/")
    with _token_client(emu, c.container_link, token) as client:
        tc = client.get_database_client("perm").get_container_client("c")
        assert tc.read_item("a", partition_key="p1")["id"] == "a"
        fault = control(base, "POST", "/faults", {"type": "clock_skew", "region": EAST, "offset_ms": 11_000})
        try:
            status, message = _status(lambda: tc.read_item("a", partition_key="p1"))
        finally:
            control(base, "DELETE", f"/faults/{fault['id']}")
        assert status == 401 and "not valid at the current time" in message and "expired" in message, message
        assert tc.read_item("a", partition_key="p1")["id"] == "a"     # the clock is back: valid again


def test_deleting_or_replacing_the_permission_or_user_invalidates_its_tokens(emu, master):
    # Clients are made while their token is valid (as an application holds one), so each refusal
    # is the data request's; a client made with a dead token is refused at its account discovery,
    # which the SDK retries for 1.5 s.
    db = _db(master)
    link = db.get_container_client("c").container_link
    u = db.create_user({"id": "revoked"})
    first = u.create_permission({"id": "p", "permissionMode": "all", "resource": link}).properties["_token"]
    with _token_client(emu, link, first) as client:
        tc = client.get_database_client("perm").get_container_client("c")
        assert tc.read_item("a", partition_key="p1")["id"] == "a"
        u.replace_permission("p", {"id": "p", "permissionMode": "read", "resource": link})
        status, message = _status(lambda: tc.read_item("a", partition_key="p1"))
        assert status == 401 and "was replaced" in message, message
    current = u.get_permission("p").properties["_token"]          # each read mints a new token
    token = u.create_permission({"id": "p2", "permissionMode": "all",
                                 "resource": link + "/docs/a"}).properties["_token"]
    with _token_client(emu, link, current) as client, _token_client(emu, link, token) as other:
        tc = client.get_database_client("perm").get_container_client("c")
        oc = other.get_database_client("perm").get_container_client("c")
        assert tc.read_item("a", partition_key="p1")["id"] == oc.read_item("a", partition_key="p1")["id"] == "a"
        u.delete_permission("p")
        status, message = _status(lambda: tc.read_item("a", partition_key="p1"))
        assert status == 401 and "deleted" in message, message
        assert oc.read_item("a", partition_key="p1")["id"] == "a"
        db.delete_user("revoked")
        status, message = _status(lambda: oc.read_item("a", partition_key="p1"))
        assert status == 401 and "deleted" in message, message


def test_a_forged_or_altered_token_is_401(emu, master):
    c = _db(master).get_container_client("c")
    token = _grant(master, "forger", {"id": "p", "permissionMode": "read", "resource": c.container_link})
    sig, claims, _ = token[len("type=resource&ver=1&sig="):].split(";")
    wider = json.loads(base64.b64decode(claims))
    wider[3] = "All"                                                # Read -> All, signature kept
    altered = f"type=resource&ver=1&sig={sig};{base64.b64encode(json.dumps(wider).encode()).decode()};"
    path = "/dbs/perm/colls/c/docs"
    for bad, needle in ((altered, "signature does not match"), ("type=resource&ver=1&sig=garbage", "malformed"),
                        (token.replace(sig, "A" * len(sig)), "signature does not match"), (token, "Read only")):
        # Sent as the SDK sends a token: verbatim, percent-encoded.
        headers = {"authorization": urllib.parse.quote(bad, safe="-_.!~*'()"), "x-ms-documentdb-is-upsert": "true",
                   "x-ms-date": email.utils.formatdate(usegmt=True), "x-ms-documentdb-partitionkey": '["p1"]'}
        reply = raw_request(emu, "POST", path, {"id": "forged", "pk": "p1"}, headers, sign=False)
        expected = 403 if bad is token else 401
        assert reply.status == expected and needle in reply.body.decode(), (bad, reply.body)
    assert _status(lambda: c.read_item("forged", partition_key="p1"))[0] == 404


def test_the_bundled_client_uses_resource_tokens_in_gateway_mode(emu, master):
    c = _db(master).get_container_client("c")
    token = _grant(master, "bundled", {"id": "p", "permissionMode": "read", "resource": c.container_link,
                                       "resourcePartitionKey": ["p2"]})
    with BundledClient(emu.endpoint, {c.container_link: token}) as client:
        tc = client.get_database_client("perm").get_container_client("c")
        assert tc.read_item("b", partition_key="p2")["id"] == "b"
        assert {"b", "d"} <= {d["id"] for d in tc.query_items("SELECT * FROM c", partition_key="p2")}
        for outside, needle in ((lambda: tc.upsert_item({"id": "x", "pk": "p2"}), "Read only"),
                                (lambda: tc.read_item("a", partition_key="p1"), '["p2"]')):
            with pytest.raises(CosmosHttpResponseError) as e:
                outside()
            assert e.value.status_code == 403 and needle in str(e.value)
        with pytest.raises(CosmosHttpResponseError) as e:                  # no token covers a database
            client.get_database_client("perm").read()
        assert e.value.status_code == 401
    with pytest.raises(ValueError, match="gateway mode only"):
        BundledClient(emu.endpoint, {c.container_link: token}, connection_mode="Direct")


def test_users_permissions_and_their_tokens_survive_a_restart(tmp_path):
    data = str(tmp_path / "data")
    with running_emulator(data_dir=data, durability="relaxed") as e, \
            CosmosClient(e.endpoint, e.key, **CLIENT_DEFAULTS) as client:
        db = client.create_database("kept")
        c = db.create_container("c", PartitionKey(path="/pk"))
        c.create_item({"id": "a", "pk": "p1"})
        u = db.create_user({"id": "u"})
        perm = u.create_permission({"id": "p", "permissionMode": "read", "resource": c.container_link,
                                    "resourcePartitionKey": ["p1"]})
        link, token = c.container_link, perm.properties["_token"]
    with running_emulator(data_dir=data, durability="relaxed") as e:
        with CosmosClient(e.endpoint, e.key, **CLIENT_DEFAULTS) as client:
            again = client.get_database_client("kept").get_user_client("u").get_permission("p")
            assert {k: again.properties[k] for k in ("_rid", "resource", "resourcePartitionKey", "permissionMode")} \
                == {k: perm.properties[k] for k in ("_rid", "resource", "resourcePartitionKey", "permissionMode")}
        with CosmosClient(e.endpoint, {link: token}, **CLIENT_DEFAULTS) as client:
            tc = client.get_database_client("kept").get_container_client("c")
            assert tc.read_item("a", partition_key="p1")["id"] == "a"           # the token from before
            assert _status(lambda: tc.upsert_item({"id": "b", "pk": "p1"}))[0] == 403
