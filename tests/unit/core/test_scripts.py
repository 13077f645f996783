"""Proves core/scripts.py keeps a container's stored procedures, triggers and UDFs as the service
does, in virtual time: create/replace/delete with their rids (a sproc's, trigger's and UDF's type
nibble), self links, etags and timestamps; the service's 400/403/409/404/413 for bad bodies,
quotas, duplicates and unknown ids; each change reported as a metadata change; and a durable
account's metadata image carrying them through a restore."""
import json

import pytest

from regionlab.emulator.core import account_image, rid, scripts
from regionlab.emulator.core.errors import CosmosError
from regionlab.emulator.core.limits import SCRIPT_BODY_MAX_BYTES, TRIGGERS_PER_CONTAINER_MAX

from core_world import World


def _world():
    world = World()
    c = world.container()
    changes = []
    world.account.metadata_hook = lambda: changes.append(1)
    return world, c, changes


def test_create_replace_delete_with_system_properties():
    world, c, changes = _world()
    sp = scripts.create(world.account, c, "sprocs", {"id": "sp", "body": "function () {}"})
    trig = scripts.create(world.account, c, "triggers", {"id": "t", "body": "function () {}",
                                                         "triggerType": "pre", "triggerOperation": "create"})
    udf = scripts.create(world.account, c, "udfs", {"id": "u", "body": "function (x) { return x; }"})
    assert [rid.parse_rid(s.rid)[0] for s in (sp, trig, udf)] == ["sprocs", "triggers", "udfs"]
    assert sp.properties() == {"id": "sp", "body": "function () {}", "_rid": sp.rid, "_etag": sp.etag,
                               "_self": f"{c.self_link}sprocs/{sp.rid}/", "_ts": sp.ts}
    assert trig.properties()["triggerType"] == "Pre" and trig.properties()["triggerOperation"] == "Create"
    assert c.scripts.get("udfs", udf.rid, by_rid=True) is udf and c.scripts.counts() == {
        "sprocs": 1, "triggers": 1, "udfs": 1}
    etag = sp.etag
    scripts.replace(world.account, sp, {"id": "sp", "body": "function () { return 1; }"})
    assert sp.etag != etag and sp.body == "function () { return 1; }"
    scripts.delete(world.account, c, sp)
    with pytest.raises(CosmosError) as gone:
        c.scripts.get("sprocs", "sp")
    assert gone.value.status == 404
    assert len(changes) == 5


@pytest.mark.parametrize("kind, body, status, words", [
    ("sprocs", {"id": "x"}, 400, "'body"),
    ("sprocs", {"id": "x", "body": 5}, 400, "'body"),
    ("sprocs", {"id": "a/b", "body": "function () {}"}, 400, "'/'"),
    ("sprocs", {"id": "x", "body": "x" * (SCRIPT_BODY_MAX_BYTES + 1)}, 413, "bytes"),
    ("triggers", {"id": "x", "body": "function () {}", "triggerType": "Pre"}, 400, "triggerOperation"),
    ("triggers", {"id": "x", "body": "function () {}", "triggerType": "Mid", "triggerOperation": "All"}, 400,
     "triggerType"),
    ("udfs", ["not", "an", "object"], 400, "JSON object"),
])
def test_bad_definitions_are_refused(kind, body, status, words):
    world, c, changes = _world()
    with pytest.raises(CosmosError) as bad:
        scripts.create(world.account, c, kind, body)
    assert bad.value.status == status and words in bad.value.message
    assert c.scripts.counts()[kind] == 0 and changes == []


def test_duplicates_and_quota():
    world, c, _ = _world()
    for i in range(TRIGGERS_PER_CONTAINER_MAX):
        scripts.create(world.account, c, "triggers", {"id": f"t{i}", "body": "function () {}",
                                                      "triggerType": "Post", "triggerOperation": "All"})
    with pytest.raises(CosmosError) as dup:
        scripts.create(world.account, c, "triggers", {"id": "t0", "body": "function () {}",
                                                      "triggerType": "Post", "triggerOperation": "All"})
    assert dup.value.status == 409
    with pytest.raises(CosmosError) as full:
        scripts.create(world.account, c, "triggers", {"id": "more", "body": "function () {}",
                                                      "triggerType": "Post", "triggerOperation": "All"})
    assert full.value.status == 403 and str(TRIGGERS_PER_CONTAINER_MAX) in full.value.message


def test_scripts_survive_a_restore_from_the_metadata_image():
    world, c, _ = _world()
    sp = scripts.create(world.account, c, "sprocs", {"id": "sp", "body": "function () {}"})
    scripts.create(world.account, c, "triggers", {"id": "t", "body": "function () {}", "triggerType": "Post",
                                                  "triggerOperation": "Delete"})
    image = json.loads(json.dumps(account_image.metadata(world.account)))      # as a data file keeps it
    again = World()
    account_image.restore_metadata(again.account, image)
    c2 = again.account.colls_by_rid[c.rid]
    assert [s.properties() for s in c2.scripts.by_rid.values()] == [s.properties() for s in c.scripts.by_rid.values()]
    assert c2.scripts.get("sprocs", sp.rid, by_rid=True).id == "sp"
    later = scripts.create(again.account, c2, "udfs", {"id": "u", "body": "function () {}"})
    assert later.rid not in {sp.rid} and later.etag != sp.etag               # the counters continue
