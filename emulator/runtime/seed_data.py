"""`--seed-data PATH`: databases, containers and items loaded at start, before the ready line
(docs/seed-data.md).

PATH is a JSON file or a directory. A file holds an account:
    {"databases": [{"id": "shop", "throughput": 400,
                    "containers": [{"id": "orders", "partitionKey": "/customerId", "throughput": 400,
                                    "defaultTtl": -1, "items": [{"id": "1", "customerId": "c1"}]}]}]}
A directory holds such files (`*.json` at its top) and `<database>/<container>.json` files, each a
container: {"partitionKey": "/pk", "throughput": 400, ...its other properties..., "items": [...]},
or just the array of its items (then the partition key is `/id`). Files load in name order.

Idempotent, so it can run on every start of a `--data-dir` account: a database or container that
exists is used as it is (its throughput kept; a different partition key is an error), and an
item is upserted unless the stored one already has the same content (then nothing is written:
a restart adds no versions and no change-feed entries). Every file is read and checked before
anything is written. Items go through the request layer's own staging (service/documents.py), so
they obey every rule a client's create does (id, size, nesting, partition key, ttl).

A problem is a SeedError: one line naming the file and what is wrong; the CLI prints it and
exits 2.
"""
import json
import os

from ..core import documents as docs
from ..core.container import canonical_pk_json
from ..core.errors import CosmosError
from ..service.documents import stage_body

SEED_FILE_MAX_BYTES = 256 * 1024 * 1024      # one seed file; a bigger data set is split by container
_SYSTEM = docs.SYSTEM_PROPERTIES


class SeedError(Exception):
    pass


class _Container:
    __slots__ = ("file", "db_id", "db_throughput", "body", "throughput", "items")

    def __init__(self, file, db_id, db_throughput, body, throughput, items):
        self.file, self.db_id, self.db_throughput = file, db_id, db_throughput
        self.body, self.throughput, self.items = body, throughput, items


def _fail(file: str, problem: str):
    raise SeedError(f"seed data {file}: {problem}")


def _load_json(file: str):
    try:
        size = os.path.getsize(file)
        if size > SEED_FILE_MAX_BYTES:
            _fail(file, f"{size} bytes; a seed file holds at most {SEED_FILE_MAX_BYTES} "
                        "(split it: one <database>/<container>.json file per container)")
        with open(file, "rb") as f:
            return json.loads(f.read())
    except OSError as e:
        _fail(file, e.strerror or str(e))
    except (ValueError, UnicodeDecodeError) as e:
        _fail(file, f"not valid JSON ({e})")


def _throughput(file: str, where: str, value):
    if value is None or (type(value) is int and value > 0):
        return value
    _fail(file, f"{where}: 'throughput' must be a positive integer (RU/s), not {json.dumps(value)}")


def _partition_key(file: str, where: str, value):
    if isinstance(value, str):
        return {"paths": [value], "kind": "Hash", "version": 2}
    if isinstance(value, dict):
        return value
    _fail(file, f"{where}: 'partitionKey' must be a path such as \"/pk\" or a definition such as "
                '{"paths": ["/pk"], "kind": "Hash", "version": 2}')


def _container(file: str, db_id: str, db_throughput, spec, default_id: str | None = None) -> _Container:
    if isinstance(spec, list):
        spec = {"partitionKey": "/id", "items": spec}
    if not isinstance(spec, dict):
        _fail(file, f"database '{db_id}': a container must be an object or an array of items")
    body = {k: v for k, v in spec.items() if k not in ("items", "throughput")}
    body.setdefault("id", default_id)
    where = f"container '{db_id}/{body['id']}'"
    if not isinstance(body["id"], str):
        _fail(file, f"database '{db_id}': a container needs a string 'id'")
    body["partitionKey"] = _partition_key(file, where, body.get("partitionKey", "/id"))
    items = spec.get("items", [])
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        _fail(file, f"{where}: 'items' must be an array of JSON objects")
    return _Container(file, db_id, db_throughput, body, _throughput(file, where, spec.get("throughput")), items)


def _account_file(file: str) -> list:
    spec = _load_json(file)
    if not isinstance(spec, dict) or not isinstance(spec.get("databases"), list):
        _fail(file, 'expected {"databases": [{"id": ..., "containers": [...]}]} (see docs/seed-data.md)')
    out = []
    for db in spec["databases"]:
        if not isinstance(db, dict) or not isinstance(db.get("id"), str):
            _fail(file, "each database needs a string 'id'")
        containers = db.get("containers", [])
        if not isinstance(containers, list):
            _fail(file, f"database '{db['id']}': 'containers' must be an array")
        throughput = _throughput(file, f"database '{db['id']}'", db.get("throughput"))
        out += [_container(file, db["id"], throughput, c) for c in containers]
    return out


def read(path: str) -> list:
    """Every container of the seed at path, checked, in load order; SeedError if any is bad."""
    if os.path.isfile(path):
        return _account_file(path)
    if not os.path.isdir(path):
        _fail(path, "no such file or directory")
    out = []
    for name in sorted(os.listdir(path)):
        full = os.path.join(path, name)
        if os.path.isfile(full) and name.endswith(".json"):
            out += _account_file(full)
        elif os.path.isdir(full):
            for file in sorted(os.listdir(full)):
                if file.endswith(".json"):
                    spec = _load_json(os.path.join(full, file))
                    out.append(_container(os.path.join(full, file), name, None, spec, file[:-len(".json")]))
    return out


def apply(svc, containers: list) -> int:
    """Create what is missing and upsert what changed, at the write region: the items written."""
    account = svc.account
    written = 0
    for spec in containers:
        try:
            c = _ensure_container(account, spec)
            written += sum(_upsert(svc, account.hub_region, c, item) for item in spec.items)
        except CosmosError as e:
            _fail(spec.file, f"container '{spec.db_id}/{spec.body['id']}': {e.message}")
    return written


def load(svc, path: str) -> int:
    return apply(svc, read(path))


def _ensure_container(account, spec: _Container):
    db = account.databases.get(spec.db_id)
    if db is None:
        db = account.create_database({"id": spec.db_id}, spec.db_throughput)
    c = db.containers.get(spec.body["id"])
    if c is None:
        return account.create_container(db, spec.body, spec.throughput)
    wanted = spec.body["partitionKey"]
    if c.definition["partitionKey"]["paths"] != wanted.get("paths"):
        raise CosmosError(400, 0, f"the existing container's partition key is {c.definition['partitionKey']['paths']}, "
                                  f"the seed's {wanted.get('paths')}; a partition key cannot change")
    return c


def _content(doc: dict) -> dict:
    """An item without the system properties the store adds (an export carries them too)."""
    return {k: v for k, v in doc.items() if k not in _SYSTEM}


def _upsert(svc, region: str, c, item: dict) -> int:
    raw = json.dumps(item, ensure_ascii=False, separators=(",", ":")).encode()
    values = c.pk_def.values_from_document(item)
    pk_json = canonical_pk_json(values)
    current = docs.Writer(c, region, pk_json, values, svc.now_ms(region)).current(item.get("id"))
    if current is not None and _content(current.doc) == _content(item):
        return 0                          # already there as seeded: a restart writes nothing
    writer, _, _ = stage_body(svc, region, c, pk_json, values, raw, True, None)
    writer.commit()
    return 1
