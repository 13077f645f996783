"""Proves core/users.py keeps its documented invariants, in the core without a clock or a socket:
ids unique per database and per user (409), one permission per user and (resource, partition
key), the per-database and per-user bounds (403, nothing added), rids of the service's layout
(a user's parses as a user of its database, a permission's as a child of its user), renames,
deletes that remove a user's permissions from the by-rid index (what invalidates their tokens),
a deleted database taking its users along, and a round trip through the account image (JSON, as
the file keeps it) that restores every user, permission and grant and continues the rids."""
import json

import pytest

from regionlab.emulator.core import account_image, rid
from regionlab.emulator.core.errors import CosmosError
from regionlab.emulator.core.limits import PERMISSIONS_PER_USER_MAX, USERS_PER_DATABASE_MAX
from regionlab.emulator.core.users import ALL, READ, Grant

from core_world import World


def _world():
    world = World()
    c = world.container()
    return world, world.account.database("db"), c, world.account.users


def test_users_get_rids_of_their_database_and_unique_ids():
    world, db, c, users = _world()
    alice = users.create_user(db, "alice")
    assert rid.parse_rid(alice.rid)[0] == "users" and rid.parent_rid(alice.rid) == db.rid
    assert alice.properties()["_self"] == f"dbs/{db.rid}/users/{alice.rid}/"
    with pytest.raises(CosmosError) as e:
        users.create_user(db, "alice")
    assert e.value.status == 409
    assert users.user(db, alice.rid, by_rid=True) is alice
    with pytest.raises(CosmosError) as e:
        users.user(db, "bob")
    assert e.value.status == 404


def test_a_rename_keeps_the_rid_and_refuses_a_taken_id():
    world, db, c, users = _world()
    alice, bob = users.create_user(db, "alice"), users.create_user(db, "bob")
    etag = alice.etag
    users.replace_user(alice, "carol")
    assert users.user(db, "carol") is alice and alice.etag != etag
    with pytest.raises(CosmosError):
        users.user(db, "alice")
    with pytest.raises(CosmosError) as e:
        users.replace_user(alice, "bob")
    assert e.value.status == 409 and users.user(db, "carol") is alice and users.user(db, "bob") is bob


def test_one_permission_per_resource_and_partition_key():
    world, db, c, users = _world()
    u = users.create_user(db, "u")
    p = users.create_permission(u, "p", "dbs/db/colls/c", None, Grant(ALL, c.rid))
    assert rid.parse_rid(p.rid)[0] == "permissions" and rid.parent_rid(p.rid) == u.rid
    for id, grant in (("p", Grant(READ, c.rid, "x")), ("q", Grant(READ, c.rid))):
        with pytest.raises(CosmosError) as e:
            users.create_permission(u, id, "dbs/db/colls/c", None, grant)
        assert e.value.status == 409
    users.create_permission(u, "q", "dbs/db/colls/c", ["a"], Grant(READ, c.rid, None, '["a"]'))
    users.create_permission(u, "r", "dbs/db/colls/c/docs/x", None, Grant(ALL, c.rid, "x"))
    assert sorted(u.permissions) == ["p", "q", "r"]
    with pytest.raises(CosmosError) as e:       # re-pointing p at r's resource
        users.replace_permission(p, "p", "dbs/db/colls/c/docs/x", None, Grant(READ, c.rid, "x"))
    assert e.value.status == 409 and p.grant == Grant(ALL, c.rid)


def test_deletes_take_permissions_out_of_the_rid_index():
    world, db, c, users = _world()
    u = users.create_user(db, "u")
    p = users.create_permission(u, "p", "dbs/db/colls/c", None, Grant(ALL, c.rid))
    q = users.create_permission(u, "q", "dbs/db/colls/c/docs/x", None, Grant(ALL, c.rid, "x"))
    users.delete_permission(p)
    assert p.rid not in users.permissions_by_rid and users.permissions_by_rid[q.rid] is q
    users.delete_user(u)
    assert not users.permissions_by_rid and not users.users_by_rid
    v = users.create_user(db, "v")
    r = users.create_permission(v, "r", "dbs/db/colls/c", None, Grant(READ, c.rid))
    world.account.delete_database(db)
    assert r.rid not in users.permissions_by_rid and v.rid not in users.users_by_rid and not users.by_db


def test_bounds_refuse_without_adding():
    world, db, c, users = _world()
    for i in range(USERS_PER_DATABASE_MAX):
        users.create_user(db, f"u{i}")
    with pytest.raises(CosmosError) as e:
        users.create_user(db, "one-more")
    assert e.value.status == 403 and len(users.of(db)) == USERS_PER_DATABASE_MAX
    u = users.user(db, "u0")
    for i in range(PERMISSIONS_PER_USER_MAX):
        users.create_permission(u, f"p{i}", f"dbs/db/colls/c/docs/{i}", None, Grant(READ, c.rid, str(i)))
    with pytest.raises(CosmosError) as e:
        users.create_permission(u, "one-more", "dbs/db/colls/c", None, Grant(READ, c.rid))
    assert e.value.status == 403 and len(u.permissions) == PERMISSIONS_PER_USER_MAX


def test_metadata_changes_are_reported_and_round_trip_through_the_image():
    world, db, c, users = _world()
    changed = []
    world.account.metadata_hook = lambda: changed.append(1)
    u = users.create_user(db, "u")
    p = users.create_permission(u, "p", "dbs/db/colls/c", ["a"], Grant(READ, c.rid, None, '["a"]'))
    users.replace_user(u, "u2")
    assert len(changed) == 3
    image = json.loads(json.dumps(account_image.metadata(world.account)))

    again = World()
    account_image.restore_metadata(again.account, image)
    db2 = again.account.database("db")
    restored = again.account.users
    u2 = restored.user(db2, "u2")
    p2 = restored.permissions_by_rid[p.rid]
    assert (u2.rid, u2.properties()) == (u.rid, u.properties())
    assert p2.properties() == p.properties() and p2.grant == p.grant and p2.user is u2
    fresh = restored.create_user(db2, "new")
    assert fresh.rid not in (u.rid, p.rid) and rid.parent_rid(fresh.rid) == db2.rid
