"""Stored procedures through the official SDK's `container.scripts` API against one real emulator
(module-scoped, script time bound 2 s): script resources with their system properties and CRUD;
an execution's collection operations, callbacks and response; all or nothing (a script that
throws after creating items leaves the partition's LSN and items as they were, checked inside the
server); the service's errors; and the time and memory bounds, with another client's point reads
served while a script loops forever."""
import threading
import time

import pytest
from azure.cosmos import PartitionKey, exceptions

from regionlab.emulator.testing import running_emulator
from sdk_harness import make_client, raw_request

TIMEOUT_S = 2.0


@pytest.fixture(scope="module")
def emu():
    with running_emulator(port=0, direct_ports=0, script_timeout_s=TIMEOUT_S) as handle:
        yield handle


@pytest.fixture(scope="module")
def client(emu):
    with make_client(emu) as c:
        c.create_database("db")
        yield c


_names = iter(range(1_000_000))


@pytest.fixture
def container(client):
    return client.get_database_client("db").create_container(f"c{next(_names)}", PartitionKey(path="/pk"))


def _state(emu, container, pk: str = "p") -> tuple:
    """(LSN, sorted ids of pk's items) in the write region, read inside the server."""
    def state(account):
        c = account.databases["db"].containers[container.id]
        rs = c.partitions[0].replica_sets["East US"]
        return rs.lsn, sorted(v.key[1] for v in rs.store.scan(rs.lsn, prefix=f'["{pk}"]'))
    return emu.call(state)


CREATE_THEN = """function createThen(n, fail) {
  var c = getContext().getCollection();
  var made = 0;
  for (var i = 0; i < n; i++) {
    var accepted = c.createDocument(c.getSelfLink(), {id: 'd' + i, pk: 'p', i: i}, function (err, doc) {
      if (err) throw err;
      made++;
      if (made === n) {
        if (fail) throw new Error('failing after ' + made + ' creates');
        getContext().getResponse().setBody({made: made, last: doc.id});
      }
    });
    if (!accepted) throw new Error('not accepted');
  }
}"""


def test_script_resources_crud(container):
    scripts = container.scripts
    sp = scripts.create_stored_procedure({"id": "sp", "body": "function () { }"})
    assert sp["_self"] == f"{container.read()['_self']}sprocs/{sp['_rid']}/"
    assert {"_rid", "_etag", "_ts"} <= set(sp) and sp["body"] == "function () { }"
    trig = scripts.create_trigger({"id": "t", "body": "function () { }", "triggerType": "Pre",
                                   "triggerOperation": "Create"})
    assert (trig["triggerType"], trig["triggerOperation"]) == ("Pre", "Create")
    udf = scripts.create_user_defined_function({"id": "u", "body": "function (x) { return x; }"})
    assert [s["id"] for s in scripts.list_stored_procedures()] == ["sp"]
    assert [s["id"] for s in scripts.list_triggers()] == ["t"]
    assert [s["id"] for s in scripts.query_user_defined_functions("SELECT * FROM r WHERE r.id = 'u'")] == ["u"]
    assert scripts.get_user_defined_function("u")["_rid"] == udf["_rid"]
    replaced = scripts.replace_stored_procedure("sp", {"id": "sp", "body": "function () { return 1; }"})
    assert replaced["_etag"] != sp["_etag"] and scripts.get_stored_procedure("sp")["body"] == "function () { return 1; }"
    with pytest.raises(exceptions.CosmosResourceExistsError):
        scripts.create_stored_procedure({"id": "sp", "body": "function () { }"})
    with pytest.raises(exceptions.CosmosHttpResponseError) as bad:
        scripts.create_trigger({"id": "t2", "body": "function () { }", "triggerType": "Sometimes",
                                "triggerOperation": "All"})
    assert bad.value.status_code == 400 and "triggerType" in bad.value.message
    scripts.delete_stored_procedure("sp")
    with pytest.raises(exceptions.CosmosResourceNotFoundError):
        scripts.get_stored_procedure("sp")


def test_sproc_creates_items_and_answers_its_body(emu, container):
    container.scripts.create_stored_procedure({"id": "createThen", "body": CREATE_THEN})
    lsn0, _ = _state(emu, container)
    assert container.scripts.execute_stored_procedure("createThen", partition_key="p", params=[3, False]) == \
        {"made": 3, "last": "d2"}
    assert float(container.client_connection.last_response_headers["x-ms-request-charge"]) > 3
    assert _state(emu, container) == (lsn0 + 1, ["d0", "d1", "d2"])     # one commit


def test_sproc_that_throws_after_creating_items_leaves_nothing(emu, container):
    container.scripts.create_stored_procedure({"id": "createThen", "body": CREATE_THEN})
    before = _state(emu, container)
    with pytest.raises(exceptions.CosmosHttpResponseError) as failed:
        container.scripts.execute_stored_procedure("createThen", partition_key="p", params=[5, True])
    assert failed.value.status_code == 400
    assert "Exception = Error: failing after 5 creates" in failed.value.message
    assert _state(emu, container) == before
    assert list(container.read_all_items()) == []


READ_QUERY_REPLACE_DELETE = """function work(prefix, names) {
  var c = getContext().getCollection(), link = c.getSelfLink(), out = {};
  __.createDocument({id: prefix + 'x', pk: 'p', n: 1}, function (err, created) {
    if (err) throw err;
    c.readDocument(created._self, function (err, read) {
      if (err) throw err;
      read.n = 2;
      c.replaceDocument(read._self, read, {etag: read._etag}, function (err, replaced) {
        if (err) throw err;
        out.replaced = replaced.n;
        c.queryDocuments(link, {query: 'SELECT VALUE r.id FROM r WHERE r.n > @n', parameters: [{name: '@n', value: 0}]},
                         function (err, ids) {
          if (err) throw err;
          out.ids = ids;
          c.deleteDocument(names + '/docs/keep', {}, function (err) {
            out.deleteErr = err ? err.number : 0;
            c.readDocument(names + '/docs/gone', function (err) {
              out.readGone = err.number;
              console.log('done', out.ids.length);
              getContext().getResponse().setBody(out);
            });
          });
        });
      });
    });
  });
}"""


def test_sproc_reads_its_own_writes_and_gets_errors_in_callbacks(emu, container):
    container.create_item({"id": "keep", "pk": "p", "n": 5})
    container.scripts.create_stored_procedure({"id": "work", "body": READ_QUERY_REPLACE_DELETE})
    out = container.scripts.execute_stored_procedure("work", partition_key="p", params=["a", f"dbs/db/colls/{container.id}"],
                                                     enable_script_logging=True)
    assert out == {"replaced": 2, "ids": ["ax", "keep"], "deleteErr": 0, "readGone": 404}
    assert container.client_connection.last_response_headers["x-ms-documentdb-script-log-results"] == "done%202"
    assert _state(emu, container)[1] == ["ax"]


def test_an_operation_failing_without_a_callback_fails_the_script_with_its_status(emu, container):
    container.create_item({"id": "dup", "pk": "p"})
    container.scripts.create_stored_procedure({"id": "dup", "body": """function () {
        __.createDocument({id: 'new', pk: 'p'});
        __.createDocument({id: 'dup', pk: 'p'});
    }"""})
    before = _state(emu, container)
    with pytest.raises(exceptions.CosmosResourceExistsError):
        container.scripts.execute_stored_procedure("dup", partition_key="p")
    assert _state(emu, container) == before


def test_sproc_errors(container):
    scripts = container.scripts
    scripts.create_stored_procedure({"id": "other", "body": """function () {
        __.createDocument({id: 'x', pk: 'q'}, function (err) { if (err) throw new Error(err.number + ''); });
    }"""})
    with pytest.raises(exceptions.CosmosHttpResponseError) as wrong_pk:
        scripts.execute_stored_procedure("other", partition_key="p")
    assert wrong_pk.value.status_code == 400 and "Exception = Error: 400" in wrong_pk.value.message
    scripts.create_stored_procedure({"id": "filter", "body": "function () { __.filter(function () {}); }"})
    with pytest.raises(exceptions.CosmosHttpResponseError) as unsupported:
        scripts.execute_stored_procedure("filter", partition_key="p")
    assert "__.filter is not supported by regionlab" in unsupported.value.message
    scripts.create_stored_procedure({"id": "notfn", "body": "42"})
    with pytest.raises(exceptions.CosmosHttpResponseError) as notfn:
        scripts.execute_stored_procedure("notfn", partition_key="p")
    assert "not a JavaScript function" in notfn.value.message
    with pytest.raises(exceptions.CosmosResourceNotFoundError):
        scripts.execute_stored_procedure("missing", partition_key="p")
    # The API's own plumbing does not depend on what a script may replace.
    scripts.create_stored_procedure({"id": "stringify", "body": """function () {
        JSON.stringify = function () { return 'garbage'; };
        getContext().getResponse().setBody({still: 'json'}); }"""})
    assert scripts.execute_stored_procedure("stringify", partition_key="p") == {"still": "json"}
    scripts.create_stored_procedure({"id": "tojson", "body": """function () {
        Object.prototype.toJSON = function () { return 5; }; }"""})
    with pytest.raises(exceptions.CosmosHttpResponseError) as tampered:
        scripts.execute_stored_procedure("tojson", partition_key="p")
    assert tampered.value.status_code == 400 and "changed the server-side API" in tampered.value.message


def test_a_script_past_its_heap_bound_is_stopped(emu, container):
    container.scripts.create_stored_procedure({"id": "hog", "body": """function () {
        var a = []; while (true) { a.push(new Array(2000000).fill(0.5)); } }"""})
    with pytest.raises(exceptions.CosmosHttpResponseError) as hog:
        container.scripts.execute_stored_procedure("hog", partition_key="p")
    assert hog.value.status_code == 400 and "MiB of JavaScript heap" in hog.value.message


def test_an_endless_sproc_is_stopped_at_its_bound_while_point_reads_are_served(emu, container):
    container.create_item({"id": "probe", "pk": "p"})
    container.scripts.create_stored_procedure({"id": "spin", "body": """function () {
        __.createDocument({id: 'never', pk: 'p'}); while (true) { } }"""})
    reads, reading, stop = [], threading.Event(), threading.Event()

    def reader():
        with make_client(emu) as other:
            c = other.get_database_client("db").get_container_client(container.id)
            while not stop.is_set():
                t0 = time.perf_counter()
                c.read_item("probe", partition_key="p")
                reads.append((t0, time.perf_counter()))
                reading.set()
    t = threading.Thread(target=reader)
    t.start()
    try:
        assert reading.wait(30)
        began = time.perf_counter()
        with pytest.raises(exceptions.CosmosHttpResponseError) as spun:
            container.scripts.execute_stored_procedure("spin", partition_key="p")
        ended = time.perf_counter()
    finally:
        stop.set()
        t.join()
    assert spun.value.status_code == 408
    # Stopped at its bound: 2 s, plus generous room for a loaded 2-core machine.
    assert TIMEOUT_S <= ended - began < TIMEOUT_S + 3
    # The other client was served while the script ran: reads began and ended inside the run,
    # none waiting anywhere near the script's two seconds (a blocked loop would hold one for all of
    # it; generous bounds for a loaded 2-core machine, where a read takes a few ms to ~100 ms).
    during = [end - start for start, end in reads if start >= began and end <= ended]
    assert len(during) >= 5
    assert max(end - start for start, end in reads) < 0.75
    assert [i["id"] for i in container.read_all_items()] == ["probe"]


def test_udfs_in_queries(container):
    for i in range(20):
        container.create_item({"id": str(i), "pk": f"p{i % 2}", "x": i})
    scripts = container.scripts
    scripts.create_user_defined_function({"id": "tax", "body": "function tax(x) { return x * 1.5; }"})
    scripts.create_user_defined_function({"id": "label", "body": """function (doc, prefix) {
        return {name: prefix + doc.id, big: doc.x > 10}; }"""})
    got = container.query_items("SELECT VALUE udf.tax(c.x) FROM c WHERE udf.tax(c.x) > 24",
                                enable_cross_partition_query=True)
    assert sorted(got) == [25.5, 27, 28.5]
    one = list(container.query_items("SELECT udf.label(c, 'n') AS l FROM c WHERE c.id = '13'", partition_key="p1"))
    assert one == [{"l": {"name": "n13", "big": True}}]
    assert list(container.query_items("SELECT VALUE udf.tax(2)", enable_cross_partition_query=True)) == [3]


def test_udf_errors(emu, container):
    container.create_item({"id": "a", "pk": "p", "x": 1})
    scripts = container.scripts
    with pytest.raises(exceptions.CosmosHttpResponseError) as missing:
        list(container.query_items("SELECT VALUE udf.nope(c.x) FROM c", partition_key="p"))
    assert missing.value.status_code == 400 and "udf.nope does not exist" in missing.value.message
    scripts.create_user_defined_function({"id": "bad", "body": "function (x) { throw new Error('no ' + x); }"})
    with pytest.raises(exceptions.CosmosHttpResponseError) as thrown:
        list(container.query_items("SELECT VALUE udf.bad(c.x) FROM c", partition_key="p"))
    assert thrown.value.status_code == 400 and "Exception = Error: no 1" in thrown.value.message
    scripts.create_user_defined_function({"id": "spin", "body": "function (x) { while (true) { } }"})
    path = f"dbs/db/colls/{container.id}/docs"
    t0 = time.perf_counter()
    spun = raw_request(emu, "POST", f"/{path}", {"query": "SELECT VALUE udf.spin(c.x) FROM c"},
                       {"x-ms-documentdb-isquery": "true", "content-type": "application/query+json",
                        "x-ms-documentdb-partitionkey": '["p"]'})
    elapsed = time.perf_counter() - t0
    assert spun.status == 408 and "udf.spin ran past its bound (100 ms a call" in spun.message
    assert elapsed < 2.0       # a 100 ms bound; generous for a loaded 2-core machine


PRE_STAMP = """function stamp() {
    var req = getContext().getRequest(), doc = req.getBody();
    doc.stamped = req.getOperationType();
    req.setBody(doc);
}"""
POST_COUNT = """function count() {
    var written = getContext().getResponse().getBody(), c = getContext().getCollection();
    c.upsertDocument(c.getSelfLink(), {id: 'counter', pk: written.pk, last: written.id}, function (err) {
        if (err) throw err;
        if (written.id === 'refused') throw new Error('refusing ' + written.id);
    });
}"""


def test_triggers_run_around_writes(emu, container):
    scripts = container.scripts
    scripts.create_trigger({"id": "stamp", "body": PRE_STAMP, "triggerType": "Pre", "triggerOperation": "All"})
    scripts.create_trigger({"id": "count", "body": POST_COUNT, "triggerType": "Post", "triggerOperation": "Create"})
    lsn0, _ = _state(emu, container)
    made = container.create_item({"id": "a", "pk": "p"}, pre_trigger_include="stamp", post_trigger_include="count")
    assert made["stamped"] == "Create"
    assert _state(emu, container) == (lsn0 + 1, ["a", "counter"])        # the write and the trigger's: one commit
    assert container.read_item("counter", "p")["last"] == "a"
    replaced = container.replace_item("a", {"id": "a", "pk": "p", "v": 2}, pre_trigger_include="stamp")
    assert (replaced["stamped"], replaced["v"]) == ("Replace", 2)
    assert container.upsert_item({"id": "b", "pk": "p"}, pre_trigger_include="stamp")["stamped"] == "Upsert"


def test_a_failing_trigger_leaves_nothing_of_the_write(emu, container):
    scripts = container.scripts
    scripts.create_trigger({"id": "count", "body": POST_COUNT, "triggerType": "Post", "triggerOperation": "All"})
    scripts.create_trigger({"id": "veto", "body": "function () { throw new Error('vetoed'); }",
                            "triggerType": "Pre", "triggerOperation": "Delete"})
    container.create_item({"id": "kept", "pk": "p"})
    before = _state(emu, container)
    with pytest.raises(exceptions.CosmosHttpResponseError) as refused:
        container.create_item({"id": "refused", "pk": "p"}, post_trigger_include="count")
    assert refused.value.status_code == 400 and "refusing refused" in refused.value.message
    with pytest.raises(exceptions.CosmosHttpResponseError) as vetoed:
        container.delete_item("kept", "p", pre_trigger_include="veto")
    assert "vetoed" in vetoed.value.message
    assert _state(emu, container) == before
    with pytest.raises(exceptions.CosmosHttpResponseError) as wrong_op:
        container.create_item({"id": "x", "pk": "p"}, pre_trigger_include="veto")
    assert wrong_op.value.status_code == 400 and "runs on Delete operations" in wrong_op.value.message
    with pytest.raises(exceptions.CosmosHttpResponseError) as wrong_type:
        container.create_item({"id": "x", "pk": "p"}, pre_trigger_include="count")
    assert wrong_type.value.status_code == 400 and "Post-trigger" in wrong_type.value.message
    with pytest.raises(exceptions.CosmosResourceNotFoundError):
        container.create_item({"id": "x", "pk": "p"}, pre_trigger_include="missing")
    assert _state(emu, container) == before


def test_a_sproc_raced_by_other_writes_runs_again_and_never_commits_a_stale_view(emu, container):
    container.create_item({"id": "n", "pk": "p", "v": 0})
    # Reads n, spends ~100 ms in JavaScript (the loop serves others meanwhile), then writes
    # n + 1: with another client writing the partition all the while, every run is raced.
    container.scripts.create_stored_procedure({"id": "bump", "body": """function (names) {
        __.readDocument(names + '/docs/n', function (err, n) {
            if (err) throw err;
            var until = Date.now() + 100; while (Date.now() < until) { }
            n.v += 1;
            __.replaceDocument(n._self, n, {etag: n._etag}, function (err) { if (err) throw err; });
        });
    }"""})
    names = f"dbs/db/colls/{container.id}"
    stop, writing, writes = threading.Event(), threading.Event(), []

    def writer():
        with make_client(emu) as other:
            c = other.get_database_client("db").get_container_client(container.id)
            while not stop.is_set():
                c.upsert_item({"id": f"w{len(writes) % 5}", "pk": "p"})
                writes.append(1)
                writing.set()
    t = threading.Thread(target=writer)
    t.start()
    try:
        assert writing.wait(30)
        with pytest.raises(exceptions.CosmosHttpResponseError) as raced:
            container.scripts.execute_stored_procedure("bump", partition_key="p", params=[names])
    finally:
        stop.set()
        t.join()
    assert raced.value.status_code == 449 and "another write to its partition" in raced.value.message
    assert container.read_item("n", "p")["v"] == 0
    container.scripts.execute_stored_procedure("bump", partition_key="p", params=[names])
    assert container.read_item("n", "p")["v"] == 1
