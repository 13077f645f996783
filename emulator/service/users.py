"""Users (`/dbs/{db}/users[/{user}]`) and their permissions (`.../permissions[/{permission}]`):
create, upsert, read, replace, delete, read feed and query, as the service serves them.

Every reply with a permission carries a new resource token (`_token`, service/resource_tokens.py),
valid for `x-ms-documentdb-expiry-seconds` (default 3600, 10 to 18000) on the serving region's
clock; feeds of permissions carry one per permission, as the SDKs' permission-feed credential
expects. A permission's `resource` is resolved here, once, to the Grant the core keeps
(core/users.py): a container link or an item link, by names or by rids (an item's `_self`).
"""
import json

from regionlab.client.protocol import headers as H

from ..core import charge
from ..core.errors import bad_request, not_found
from ..core.limits import (RESOURCE_LINK_MAX_CHARS, RESOURCE_TOKEN_EXPIRY_DEFAULT_S, RESOURCE_TOKEN_EXPIRY_MAX_S,
                           RESOURCE_TOKEN_EXPIRY_MIN_S)
from ..core.account import checked_id
from ..core.users import MODES, Grant
from . import partition_keys, responses
from .metadata import created, feed, is_query, not_allowed, ok, query_feed
from .paths import rid_based, unknown


def route(call, segs: list):
    """The coroutine of a request on /dbs/{db}/users/... (3 to 6 segments)."""
    n = len(segs)
    users = call.svc.account.users
    by_rid = rid_based(segs[1])
    db = call.svc.account.database(segs[1], by_rid)
    if n == 3:
        return users_feed(call, db)
    u = users.user(db, segs[3], by_rid)
    if n == 4:
        return user(call, u)
    if segs[4] != "permissions" or n > 6:
        raise unknown(segs)
    if n == 5:
        return permissions_feed(call, db, u)
    return permission(call, db, users.permission(u, segs[5], by_rid))


# ---- users ---------------------------------------------------------------------------------------
async def users_feed(call, db):
    users = call.svc.account.users
    if call.method == "GET":
        return feed(call, db.rid, "Users", [u.properties() for u in users.of(db)])
    if call.method != "POST":
        not_allowed(call, "the users feed")
    if is_query(call):
        return await query_feed(call, db.rid, "Users", [u.properties() for u in users.of(db)])
    id = checked_id(call.json_body())
    existing = users.by_db.get(db.rid, {}).get(id)
    if existing is not None and call.flag(H.IS_UPSERT):
        return ok(call, users.replace_user(existing, id).properties())
    return created(call, users.create_user(db, id).properties())


async def user(call, u):
    users = call.svc.account.users
    if call.method == "GET":
        return ok(call, u.properties())
    if call.method == "PUT":
        return ok(call, users.replace_user(u, checked_id(call.json_body())).properties())
    if call.method == "DELETE":
        users.delete_user(u)
        return responses.reply(204, None, call.activity_id, charge.METADATA_WRITE_RU)
    not_allowed(call, "a user")


# ---- permissions ---------------------------------------------------------------------------------
async def permissions_feed(call, db, u):
    users = call.svc.account.users
    if call.method == "GET":
        return feed(call, u.rid, "Permissions", _with_tokens(call, u.permissions.values()))
    if call.method != "POST":
        not_allowed(call, "the permissions feed")
    if is_query(call):
        return await query_feed(call, u.rid, "Permissions", _with_tokens(call, u.permissions.values()))
    lifetime_s = _lifetime_s(call)
    id, resource, pk, grant = _definition(call, db)
    existing = u.permissions.get(id)
    if existing is not None and call.flag(H.IS_UPSERT):
        return ok(call, _with_token(call, users.replace_permission(existing, id, resource, pk, grant), lifetime_s))
    return created(call, _with_token(call, users.create_permission(u, id, resource, pk, grant), lifetime_s))


async def permission(call, db, p):
    users = call.svc.account.users
    if call.method == "GET":
        return ok(call, _with_token(call, p, _lifetime_s(call)))
    if call.method == "PUT":
        lifetime_s = _lifetime_s(call)
        id, resource, pk, grant = _definition(call, db)
        return ok(call, _with_token(call, users.replace_permission(p, id, resource, pk, grant), lifetime_s))
    if call.method == "DELETE":
        users.delete_permission(p)
        return responses.reply(204, None, call.activity_id, charge.METADATA_WRITE_RU)
    not_allowed(call, "a permission")


def _with_token(call, p, lifetime_s: int) -> dict:
    svc = call.svc
    props = p.properties()
    props["_token"] = svc.tokens.mint(p, int(svc.now_ms(call.region) // 1000), lifetime_s)
    return props


def _with_tokens(call, permissions) -> list:
    lifetime_s = _lifetime_s(call)
    return [_with_token(call, p, lifetime_s) for p in permissions]


def _lifetime_s(call) -> int:
    seconds = call.int_header(H.RESOURCE_TOKEN_EXPIRY)
    if seconds is None:
        return RESOURCE_TOKEN_EXPIRY_DEFAULT_S
    if not RESOURCE_TOKEN_EXPIRY_MIN_S <= seconds <= RESOURCE_TOKEN_EXPIRY_MAX_S:
        raise bad_request(f"{H.RESOURCE_TOKEN_EXPIRY} is {seconds}; a resource token's validity must be from "
                          f"{RESOURCE_TOKEN_EXPIRY_MIN_S} to {RESOURCE_TOKEN_EXPIRY_MAX_S} seconds (5 hours).")
    return seconds


# ---- a permission's definition --------------------------------------------------------------------
def _definition(call, db) -> tuple:
    """(id, resource, resourcePartitionKey, Grant) of a permission body; 400 for a bad one."""
    body = call.json_body()
    id = checked_id(body)
    mode = body.get("permissionMode")
    if not isinstance(mode, str) or mode.lower() not in MODES:
        raise bad_request(f"The permission's permissionMode must be 'All' or 'Read', got {_shown(mode)}.")
    resource = body.get("resource")
    if not isinstance(resource, str) or not resource.strip("/") or len(resource) > RESOURCE_LINK_MAX_CHARS:
        raise bad_request("The permission's resource must be the link of a container or an item, such as "
                          f"'dbs/{db.id}/colls/orders' or an item's _self; got {_shown(resource)}.")
    pk = body.get("resourcePartitionKey")
    return id, resource, pk, _grant(call, db, MODES[mode.lower()], resource, pk)


def _grant(call, db, mode: str, resource: str, pk) -> Grant:
    segs = resource.strip("/").split("/")
    if len(segs) not in (4, 6) or segs[0] != "dbs" or segs[2] != "colls" or (len(segs) == 6 and segs[4] != "docs"):
        raise bad_request(f"The permission's resource '{resource[:200]}' is not a container link "
                          "(dbs/{db}/colls/{container}) or an item link (.../docs/{item}); regionlab grants "
                          "permissions on containers, partition keys and items.")
    account = call.svc.account
    by_rid = rid_based(segs[1])
    target_db = account.database(segs[1], by_rid)
    if target_db is not db:
        raise bad_request(f"The permission's resource '{resource[:200]}' is in another database than its user "
                          f"('{db.id}'); a user's permissions name resources of its own database.")
    c = account.container(db, segs[3], by_rid)
    pk_json = None
    if pk is not None:
        if not isinstance(pk, list):
            raise bad_request(f"resourcePartitionKey must be a JSON array such as [\"tenant1\"], got {_shown(pk)}.")
        pk_json, _ = partition_keys.checked(c, *partition_keys.parse(json.dumps(pk)))
    item_id = None
    if len(segs) == 6:
        item_id = segs[5]
        if by_rid:
            version = c.rid_index.get(segs[5])
            if version is None:
                raise not_found(f"The item '{segs[5][:60]}' named by the permission's resource does not exist.")
            item_pk_json, item_id = version.key
            if pk_json is not None and pk_json != item_pk_json:
                raise bad_request(f"resourcePartitionKey {pk_json} is not the partition key of the item "
                                  f"'{item_id}' ({item_pk_json}).")
            pk_json = item_pk_json
    return Grant(mode, c.rid, item_id, pk_json)


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
