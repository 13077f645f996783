"""One script execution's transaction: the collection operations a script queues, done in order on
one core Writer of its logical partition (service/sproc.py commits it, or drops it).

Each operation's result goes back to the script as JSON text: `{"id", "resource", "options"}`, or
`{"id", "err": {status, substatus, code, message}}` for an operation that failed (its callback gets
the error; nothing of the failed operation is staged). Reads see the transaction's own writes.
Bounded: every byte an operation writes, reads or scans counts against SCRIPT_DATA_MAX_BYTES, and
a page of a query or feed holds at most PAGE_MAX_ITEMS results.
"""
import json
from urllib.parse import unquote

from regionlab.client.protocol.status import code_name

from ..core import charge, jsontext
from ..core.errors import CosmosError, bad_request, not_found, too_large
from ..core.limits import PAGE_MAX_ITEMS, SCRIPT_DATA_MAX_BYTES
from .documents import _check_item, _writer
from .paths import rid_based


class Transaction:
    __slots__ = ("call", "container", "writer", "ru", "operations", "data_bytes", "_lsn")

    def __init__(self, call, container, pk_json: str, values: list):
        self.call = call
        self.container = container
        self.writer = _writer(call, container, pk_json, values)
        self._lsn = self.writer.lsn
        self.ru = charge.METADATA_READ_RU          # the execution itself
        self.operations = 0
        self.data_bytes = 0

    def still_current(self) -> bool:
        """Whether no commit took this transaction's LSN while the script ran (see sproc.py)."""
        return self.writer.rs.next_lsn() == self._lsn

    def do(self, op: dict) -> str:
        """One queued operation, done: the JSON text of its result for the script."""
        self.operations += 1
        head = '{"id":%d' % _int(op.get("id"))
        try:
            run = _OPERATIONS.get(op.get("op"))
            link, args, options = op.get("link"), op.get("args"), op.get("options")
            if run is None or not isinstance(link, str) or not isinstance(args, dict):
                raise bad_request(f"Unknown collection operation {str(op.get('op'))[:40]!r}.")
            resource, out_options = run(self, link, args, options if isinstance(options, dict) else {})
        except CosmosError as e:
            err = {"status": e.status, "substatus": e.substatus, "code": code_name(e.status), "message": e.message}
            return f'{head},"err":{json.dumps(err)}}}'
        if resource is None:
            return f'{head},"options":{json.dumps(out_options)}}}'
        return f'{head},"resource":{resource},"options":{json.dumps(out_options)}}}'

    # ---- bounds and links ------------------------------------------------------------------
    def _spend(self, nbytes: int) -> None:
        self.data_bytes += nbytes
        if self.data_bytes > SCRIPT_DATA_MAX_BYTES:
            raise too_large(f"The script wrote, read or scanned more than {SCRIPT_DATA_MAX_BYTES // (1024 * 1024)} "
                            "MiB of items, the most one execution may; do the work in several executions.")

    def _check_collection(self, segs: list) -> None:
        c = self.container
        if segs not in (["dbs", c.db.id, "colls", c.id], ["dbs", c.db.rid, "colls", c.rid]):
            raise bad_request(f"The link '{'/'.join(segs)}' does not name this script's collection "
                              f"('{c.name_path}' or '{c.self_link}'); a script may use only its own collection.")

    def _collection(self, link: str) -> None:
        self._check_collection(link.strip("/").split("/"))

    def _document_id(self, link: str) -> str:
        segs = link.strip("/").split("/")
        if len(segs) != 6 or segs[4] != "docs":
            raise bad_request(f"'{link[:200]}' is not a document link: use dbs/{{db}}/colls/{{coll}}/docs/{{id}} "
                              "or a document's _self.")
        self._check_collection(segs[:4])
        if not rid_based(segs[1]):
            return unquote(segs[5])
        rid = segs[5]
        writer = self.writer
        v = next((p for p in writer.pending.values() if p.rid == rid), None) or self.container.rid_index.get(rid)
        if v is None or v.key[0] != writer.pk_json:
            raise not_found()
        return v.key[1]

    # ---- the operations --------------------------------------------------------------------
    def _written(self, version) -> tuple:
        self.ru += charge.staged_key(self.writer, version.key)
        return version.body.decode("utf-8", "surrogatepass"), {}

    def _doc(self, args: dict) -> dict:
        doc = args.get("doc")
        size = len(jsontext.dumps_bytes(doc)) if isinstance(doc, dict) else 0
        _check_item(doc, size)
        self._spend(size)                       # before staging: a refused operation stages nothing
        return doc

    def create(self, link, args, options):
        self._collection(link)
        return self._written(self.writer.create(self._doc(args))[1])

    def upsert(self, link, args, options):
        self._collection(link)
        return self._written(self.writer.upsert(self._doc(args), _etag(options))[1])

    def replace(self, link, args, options):
        id = self._document_id(link)
        return self._written(self.writer.replace(id, self._doc(args), _etag(options))[1])

    def read(self, link, args, options):
        status, v = self.writer.read(self._document_id(link), options.get("ifNoneMatch"))
        self.ru += charge.read(len(v.body))
        if status == 304:
            return None, {"notModified": True}
        self._spend(len(v.body))
        return v.body.decode("utf-8", "surrogatepass"), {}

    def delete(self, link, args, options):
        id = self._document_id(link)
        old = self.writer.current(id)
        self.writer.delete(id, _etag(options))
        self.ru += charge.staged_key(self.writer, old.key)
        return None, {}

    def query(self, link, args, options):
        self._collection(link)
        spec = args.get("query")
        body = spec if isinstance(spec, dict) else {"query": spec}
        if not isinstance(body.get("query"), str):
            raise bad_request("queryDocuments needs a SQL query string, or {query, parameters}.")
        from .queries import run_metadata_query
        docs = self._documents()
        results = run_metadata_query(self.call, body, docs)
        page, more = _page(results, options)
        text = jsontext.dumps(page)
        self._spend(len(text))
        self.ru += charge.query(len(docs), len(page), len(text))
        return text, more

    def feed(self, link, args, options):
        self._collection(link)
        docs = self._documents()
        page, more = _page(docs, options)
        text = jsontext.dumps(page)
        self.ru += charge.feed(len(page), len(text))
        return text, more

    def _documents(self) -> list:
        """Every item of the partition as this transaction sees it, in id order, parsed (bytes
        counted)."""
        writer = self.writer
        pending = writer.pending
        rs = writer.rs
        versions = [v for v in rs.store.scan(rs.lsn, prefix=writer.pk_json) if v.key not in pending]
        if pending:
            versions = sorted(versions + [v for v in pending.values() if not v.deleted], key=lambda v: v.key)
        self._spend(sum(len(v.body) for v in versions))
        return [json.loads(v.body) for v in versions]


def _int(value) -> int:
    return value if type(value) is int else 0


def _etag(options: dict):
    etag = options.get("etag")
    if etag is None:
        condition = options.get("accessCondition")
        if isinstance(condition, dict) and condition.get("type") == "IfMatch":
            etag = condition.get("condition")
    if etag is not None and not isinstance(etag, str):
        raise bad_request("An operation's etag must be a string.")
    return etag


def _page(results: list, options: dict) -> tuple[list, dict]:
    """(one page of results, the options the callback gets: continuation when more remain)."""
    size = options.get("pageSize", -1)
    size = PAGE_MAX_ITEMS if not isinstance(size, int) or size <= 0 else min(size, PAGE_MAX_ITEMS)
    start = options.get("continuation")
    try:
        start = int(start) if start is not None else 0
    except (TypeError, ValueError):
        raise bad_request(f"Invalid continuation {str(start)[:80]!r}: pass the one the previous page gave.") from None
    page = results[start:start + size]
    end = start + len(page)
    return page, ({"continuation": str(end)} if end < len(results) else {})


_OPERATIONS = {"create": Transaction.create, "upsert": Transaction.upsert, "replace": Transaction.replace,
               "read": Transaction.read, "delete": Transaction.delete, "query": Transaction.query,
               "feed": Transaction.feed}
