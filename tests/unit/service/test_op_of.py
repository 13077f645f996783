"""Proves request_faults.op_of: how a request is classified (read, write, query, metadata) for
request faults and the request log, path by path and, on a documents feed, header by header."""
import pytest

from regionlab.client.protocol import headers as H
from regionlab.emulator.service.request_faults import op_of


class _Call:
    def __init__(self, method, path, headers=None):
        self.method = method
        self.segs = path.strip("/").split("/") if path.strip("/") else []
        self.headers = headers or {}
        self.header = self.headers.get

    def flag(self, name):
        v = self.headers.get(name)
        return v is not None and v.lower() == "true"


DOCS = "dbs/d/colls/c/docs"


@pytest.mark.parametrize("method, path, headers, op", [
    ("GET", "", None, "metadata"),
    ("POST", "dbs", None, "metadata"),
    ("GET", "dbs/d/colls/c", None, "metadata"),
    ("GET", "dbs/d/colls/c/pkranges", None, "metadata"),
    ("GET", "dbs/d/colls/c/conflicts", None, "metadata"),
    ("GET", DOCS + "/i", None, "read"),
    ("GET", DOCS, None, "read"),
    ("HEAD", DOCS + "/i", None, "write"),
    ("PUT", DOCS + "/i", None, "write"),
    ("PATCH", DOCS + "/i", None, "write"),
    ("DELETE", DOCS + "/i", None, "write"),
    ("POST", DOCS + "/i", None, "write"),
    ("GET", "dbs/d/colls/c/operations/partitionkeydelete", None, "write"),
    ("POST", "dbs/d/colls/c/operations", None, "write"),
    ("POST", DOCS, {H.CONTENT_TYPE: "application/json"}, "write"),
    ("POST", DOCS, {}, "write"),
    ("POST", DOCS, {H.IS_QUERY: "True"}, "query"),
    ("POST", DOCS, {H.IS_QUERY: "false"}, "write"),
    ("POST", DOCS, {H.IS_QUERY_PLAN: "true"}, "query"),
    ("POST", DOCS, {H.CONTENT_TYPE: "Application/Query+JSON; charset=utf-8"}, "query"),
])
def test_op_of(method, path, headers, op):
    assert op_of(_Call(method, path, headers)) == op
