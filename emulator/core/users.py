"""Users and permissions: the account metadata that resource tokens are issued from.

Theory of operation: a database owns users, a user owns permissions (docs/permissions.md). A
permission grants `permissionMode` All or Read on one resource: a container, or one item of a
container, optionally narrowed to one logical partition (`resourcePartitionKey`). The request
layer resolves the permission's `resource` link when the permission is created or replaced and
hands it here as a `Grant` by rid: the container's `_rid`, the item's id and partition key. A
container deleted and re-created under the same name is therefore not covered by a permission
on the old one, as in the service, whose permissions name resources by rid.

Like databases and containers (container.py), users and permissions are account-wide and
immediate: every region's endpoint sees a change at once, and a durable account writes them
with the rest of its metadata (`image` / `restore`, core/account_image.py). A resource token
names its permission by rid; deleting the permission or its user (or its database) removes it
from `permissions_by_rid`, which is what invalidates every token issued from it.

Invariants: a user's id is unique in its database, a permission's id in its user; a user holds
at most one permission per (resource, partition key) (409 otherwise, as the service answers);
at most USERS_PER_DATABASE_MAX users per database and PERMISSIONS_PER_USER_MAX permissions
per user. Only this module changes the registry.
"""
from dataclasses import dataclass

from . import rid as rids
from .errors import CosmosError, conflict, not_found
from .limits import PERMISSIONS_PER_USER_MAX, USERS_PER_DATABASE_MAX

ALL, READ = "All", "Read"
MODES = {"all": ALL, "read": READ}          # the SDK sends "all"/"read"; the service answers capitalised


@dataclass(frozen=True, slots=True)
class Grant:
    """What a permission (and so each of its tokens) allows: `mode` on the container `coll_rid`,
    or only its item `item_id`, in the logical partition `pk_json` (canonical JSON) if given."""
    mode: str
    coll_rid: str
    item_id: str | None = None
    pk_json: str | None = None

    def as_list(self) -> list:
        return [self.mode, self.coll_rid, self.item_id, self.pk_json]


class User:
    __slots__ = ("id", "rid", "db_rid", "ts", "etag", "permissions")

    def __init__(self, id: str, rid: str, db_rid: str, ts: int, etag: str):
        self.id = id
        self.rid = rid
        self.db_rid = db_rid
        self.ts = ts
        self.etag = etag
        self.permissions: dict[str, Permission] = {}

    @property
    def self_link(self) -> str:
        return f"dbs/{self.db_rid}/users/{self.rid}/"

    def properties(self) -> dict:
        return {"id": self.id, "_rid": self.rid, "_ts": self.ts, "_self": self.self_link, "_etag": self.etag,
                "_permissions": "permissions/"}


class Permission:
    __slots__ = ("id", "rid", "user", "resource", "partition_key", "grant", "ts", "etag")

    def __init__(self, id: str, rid: str, user: User, resource: str, partition_key, grant: Grant,
                 ts: int, etag: str):
        self.id = id
        self.rid = rid
        self.user = user
        self.resource = resource                # the link as the client gave it
        self.partition_key = partition_key      # resourcePartitionKey as given (a list), or None
        self.grant = grant
        self.ts = ts
        self.etag = etag

    @property
    def self_link(self) -> str:
        return f"{self.user.self_link}permissions/{self.rid}/"

    def properties(self) -> dict:
        props = {"id": self.id, "permissionMode": self.grant.mode, "resource": self.resource}
        if self.partition_key is not None:
            props["resourcePartitionKey"] = self.partition_key
        props.update({"_rid": self.rid, "_ts": self.ts, "_self": self.self_link, "_etag": self.etag})
        return props


class Users:
    """Every database's users and their permissions. `now_s`, `next_seq` and `etag` are the
    account's: rids, timestamps and etags come from the same counters as its other metadata;
    `changed` is its metadata hook (a durable account writes its metadata again)."""

    def __init__(self, now_s, next_seq, etag, changed):
        self._now_s, self._next_seq, self._etag, self._changed = now_s, next_seq, etag, changed
        self.by_db: dict[str, dict[str, User]] = {}        # database rid -> user id -> User
        self.users_by_rid: dict[str, User] = {}
        self.permissions_by_rid: dict[str, Permission] = {}

    # ---- users ---------------------------------------------------------------------------------
    def of(self, db) -> list[User]:
        return list(self.by_db.get(db.rid, {}).values())

    def user(self, db, name_or_rid: str, by_rid: bool = False) -> User:
        u = self.users_by_rid.get(name_or_rid) if by_rid else self.by_db.get(db.rid, {}).get(name_or_rid)
        if u is None or u.db_rid != db.rid:
            raise not_found(f"User '{name_or_rid}' does not exist in database '{db.id}'.")
        return u

    def create_user(self, db, id: str) -> User:
        users = self.by_db.setdefault(db.rid, {})
        if id in users:
            raise conflict(f"A user with id '{id}' already exists in database '{db.id}'.")
        if len(users) >= USERS_PER_DATABASE_MAX:
            raise _quota(f"Database '{db.id}' already has {len(users)} users, the most regionlab keeps "
                         f"({USERS_PER_DATABASE_MAX}); delete one first.")
        u = User(id, rids.user_rid(db.rid, self._next_seq()), db.rid, self._now_s(), self._etag())
        users[id] = u
        self.users_by_rid[u.rid] = u
        self._changed()
        return u

    def replace_user(self, u: User, id: str) -> User:
        """A user's only settable property is its id: a replace may rename it."""
        users = self.by_db[u.db_rid]
        if id != u.id:
            if id in users:
                raise conflict(f"A user with id '{id}' already exists in this database.")
            del users[u.id]
            u.id = id
            users[id] = u
        u.ts, u.etag = self._now_s(), self._etag()
        self._changed()
        return u

    def delete_user(self, u: User) -> None:
        del self.by_db[u.db_rid][u.id]
        del self.users_by_rid[u.rid]
        for p in u.permissions.values():
            del self.permissions_by_rid[p.rid]
        self._changed()

    def forget_database(self, db) -> None:
        """The database is deleted: its users and their permissions (and tokens) go with it."""
        for u in self.by_db.pop(db.rid, {}).values():
            self.users_by_rid.pop(u.rid, None)
            for p in u.permissions.values():
                self.permissions_by_rid.pop(p.rid, None)

    # ---- permissions ---------------------------------------------------------------------------
    def permission(self, u: User, name_or_rid: str, by_rid: bool = False) -> Permission:
        p = self.permissions_by_rid.get(name_or_rid) if by_rid else u.permissions.get(name_or_rid)
        if p is None or p.user is not u:
            raise not_found(f"Permission '{name_or_rid}' does not exist for user '{u.id}'.")
        return p

    def create_permission(self, u: User, id: str, resource: str, partition_key, grant: Grant) -> Permission:
        if id in u.permissions:
            raise conflict(f"A permission with id '{id}' already exists for user '{u.id}'.")
        self._check_one_per_resource(u, None, grant)
        if len(u.permissions) >= PERMISSIONS_PER_USER_MAX:
            raise _quota(f"User '{u.id}' already has {len(u.permissions)} permissions, the most regionlab "
                         f"keeps ({PERMISSIONS_PER_USER_MAX}); delete one first.")
        p = Permission(id, rids.permission_rid(u.rid, self._next_seq()), u, resource, partition_key, grant,
                       self._now_s(), self._etag())
        u.permissions[id] = p
        self.permissions_by_rid[p.rid] = p
        self._changed()
        return p

    def replace_permission(self, p: Permission, id: str, resource: str, partition_key, grant: Grant) -> Permission:
        u = p.user
        if id != p.id and id in u.permissions:
            raise conflict(f"A permission with id '{id}' already exists for user '{u.id}'.")
        self._check_one_per_resource(u, p, grant)
        if id != p.id:
            del u.permissions[p.id]
            p.id = id
            u.permissions[id] = p
        p.resource, p.partition_key, p.grant = resource, partition_key, grant
        p.ts, p.etag = self._now_s(), self._etag()
        self._changed()
        return p

    def delete_permission(self, p: Permission) -> None:
        del p.user.permissions[p.id]
        del self.permissions_by_rid[p.rid]
        self._changed()

    @staticmethod
    def _check_one_per_resource(u: User, replacing, grant: Grant) -> None:
        for other in u.permissions.values():
            if other is not replacing and (other.grant.coll_rid, other.grant.item_id, other.grant.pk_json) == \
                    (grant.coll_rid, grant.item_id, grant.pk_json):
                raise conflict(f"User '{u.id}' already has permission '{other.id}' on this resource "
                               f"({other.resource}); a user holds one permission per resource. Replace that "
                               "one instead.")

    # ---- durability ----------------------------------------------------------------------------
    def image(self) -> list:
        """Every user with its permissions, as plain data (core/account_image.py keeps it)."""
        return [{"id": u.id, "rid": u.rid, "db_rid": u.db_rid, "ts": u.ts, "etag": u.etag,
                 "permissions": [{"id": p.id, "rid": p.rid, "resource": p.resource, "pk": p.partition_key,
                                  "grant": p.grant.as_list(), "ts": p.ts, "etag": p.etag}
                                 for p in u.permissions.values()]}
                for users in self.by_db.values() for u in users.values()]

    def restore(self, image: list) -> None:
        for d in image:
            u = User(d["id"], d["rid"], d["db_rid"], d["ts"], d["etag"])
            self.by_db.setdefault(u.db_rid, {})[u.id] = u
            self.users_by_rid[u.rid] = u
            for q in d["permissions"]:
                p = Permission(q["id"], q["rid"], u, q["resource"], q["pk"], Grant(*q["grant"]), q["ts"], q["etag"])
                u.permissions[p.id] = p
                self.permissions_by_rid[p.rid] = p


def _quota(message: str) -> CosmosError:
    return CosmosError(403, 0, message)
