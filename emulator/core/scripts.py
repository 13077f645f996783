"""Script resources of a container: stored procedures, triggers and user-defined functions.

Theory of operation: a script is container metadata, like the container's definition: it is
account-wide (every region sees a create at once, as clients of the service see metadata written
in the write region), kept with the rest of the metadata by a durable account
(core/account_image.py), and dropped with its container. `Scripts` holds the three families of one
container, each a dict from id to `Script` in creation order; only the functions below change
them, and each change calls the account's `metadata_changed`. Running a script is not this
module's business (service/sproc.py); this module only keeps the text and its system properties.
"""
from . import rid as rids
from .errors import CosmosError, bad_request, conflict, not_found, too_large
from .limits import (
    SCRIPT_BODY_MAX_BYTES, SPROCS_PER_CONTAINER_MAX, TRIGGERS_PER_CONTAINER_MAX, UDFS_PER_CONTAINER_MAX,
)
from .validation import ValidationError, check_id

# path segment -> (feed key of a read-feed reply, what a message calls one, how many a container may hold)
KINDS = {
    "sprocs": ("StoredProcedures", "stored procedure", SPROCS_PER_CONTAINER_MAX),
    "triggers": ("Triggers", "trigger", TRIGGERS_PER_CONTAINER_MAX),
    "udfs": ("UserDefinedFunctions", "user-defined function", UDFS_PER_CONTAINER_MAX),
}
TRIGGER_TYPES = ("Pre", "Post")
TRIGGER_OPERATIONS = ("All", "Create", "Update", "Delete", "Replace")     # the SDKs' TriggerOperation


class Script:
    __slots__ = ("kind", "id", "rid", "self_link", "ts", "etag", "body", "extra")

    def __init__(self, kind: str, id: str, rid: str, self_link: str, ts: int, etag: str, body: str, extra: dict):
        self.kind = kind
        self.id = id
        self.rid = rid
        self.self_link = self_link
        self.ts = ts
        self.etag = etag
        self.body = body
        self.extra = extra            # a trigger's triggerType and triggerOperation

    def properties(self) -> dict:
        return {"id": self.id, "body": self.body, **self.extra, "_rid": self.rid, "_self": self.self_link,
                "_etag": self.etag, "_ts": self.ts}

    def record(self) -> dict:
        """The script as plain data for a durable account's metadata."""
        return {"kind": self.kind, "id": self.id, "rid": self.rid, "ts": self.ts, "etag": self.etag,
                "body": self.body, "extra": self.extra}


class Scripts:
    """One container's scripts by family: kind -> {id: Script}, and every one by rid."""
    __slots__ = ("by_kind", "by_rid")

    def __init__(self):
        self.by_kind = {kind: {} for kind in KINDS}
        self.by_rid = {}

    def get(self, kind: str, name_or_rid: str, by_rid: bool = False) -> Script:
        s = self.by_rid.get(name_or_rid) if by_rid else self.by_kind[kind].get(name_or_rid)
        if s is None or s.kind != kind:
            raise not_found(f"The {KINDS[kind][1]} '{name_or_rid}' does not exist in this container.")
        return s

    def add(self, s: Script) -> None:
        self.by_kind[s.kind][s.id] = s
        self.by_rid[s.rid] = s

    def counts(self) -> dict:
        return {kind: len(family) for kind, family in self.by_kind.items()}


def _definition(kind: str, body) -> tuple[str, str, dict]:
    """(id, JavaScript text, extra properties) of a create or replace body, or its 400/413."""
    if not isinstance(body, dict):
        raise bad_request(f"The body of a {KINDS[kind][1]} must be a JSON object with 'id' and 'body'.")
    try:
        check_id(body.get("id"))
    except ValidationError as e:
        raise CosmosError(e.status, e.substatus, e.message) from None
    text = body.get("body")
    if not isinstance(text, str) or not text.strip():
        raise bad_request("The input content is invalid because the required properties - 'body; ' - are "
                          f"missing. A {KINDS[kind][1]}'s 'body' is its JavaScript text, a non-empty string.")
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > SCRIPT_BODY_MAX_BYTES:
        raise too_large(f"The {KINDS[kind][1]}'s body is {size} bytes; regionlab keeps scripts of at most "
                        f"{SCRIPT_BODY_MAX_BYTES} bytes.")
    extra = {}
    if kind == "triggers":
        extra["triggerType"] = _choice(body, "triggerType", TRIGGER_TYPES)
        extra["triggerOperation"] = _choice(body, "triggerOperation", TRIGGER_OPERATIONS)
    return body["id"], text, extra


def _choice(body: dict, name: str, allowed: tuple) -> str:
    value = body.get(name)
    for a in allowed:
        if isinstance(value, str) and value.lower() == a.lower():
            return a
    raise bad_request(f"A trigger's '{name}' must be one of {', '.join(allowed)}; got {value!r}.")


def create(account, container, kind: str, body) -> Script:
    id, text, extra = _definition(kind, body)
    family = container.scripts.by_kind[kind]
    if id in family:
        raise conflict(f"A {KINDS[kind][1]} with id '{id}' already exists in container '{container.id}'.")
    limit = KINDS[kind][2]
    if len(family) >= limit:
        raise CosmosError(403, 0, f"The container already holds {limit} {KINDS[kind][0]}, the most it may hold "
                                  f"(the service's quota); delete one before creating another.")
    rid = rids.script_rid(container.rid, account.next_seq(), kind)
    s = Script(kind, id, rid, f"{container.self_link}{kind}/{rid}/", account.now_s(), account.new_etag(), text, extra)
    container.scripts.add(s)
    account.metadata_changed()
    return s


def replace(account, s: Script, body) -> Script:
    id, text, extra = _definition(s.kind, body)
    if id != s.id:
        raise bad_request(f"The id in the body must be '{s.id}' to replace that {KINDS[s.kind][1]}.")
    s.body, s.extra = text, extra
    s.etag, s.ts = account.new_etag(), account.now_s()
    account.metadata_changed()
    return s


def delete(account, container, s: Script) -> None:
    del container.scripts.by_kind[s.kind][s.id]
    del container.scripts.by_rid[s.rid]
    account.metadata_changed()


def restore(container, records: list) -> None:
    """Put back the scripts of a durable account's metadata (Script.record)."""
    for r in records:
        kind = r["kind"]
        container.scripts.add(Script(kind, r["id"], r["rid"], f"{container.self_link}{kind}/{r['rid']}/",
                                     r["ts"], r["etag"], r["body"], r["extra"]))
