"""One operation as the pipeline sees it: what to send, and what kind of request it is (the
retry, hedging, breaker and session policies decide by these flags)."""
import email.utils
import time
from dataclasses import dataclass, field

from regionlab.client.protocol import auth

API_VERSION = "2020-07-15"
USE_CLIENT_DEFAULT = object()

_date_cache = [0, ""]


def request_options(kwargs) -> dict:
    """A call's per-request options as Request fields: excluded_locations= (replaces the
    client's), availability_strategy=, timeout= (end-to-end seconds). Every operation takes them,
    metadata ones included, as azure-cosmos's do."""
    out = {}
    if "excluded_locations" in kwargs:
        out["excluded_locations"] = kwargs["excluded_locations"]
    if "availability_strategy" in kwargs:
        out["availability_strategy"] = kwargs["availability_strategy"]
    if "timeout" in kwargs:
        out["timeout_s"] = kwargs["timeout"]
    return out


def http_date() -> str:
    """The RFC 1123 x-ms-date, formatted once per second (it is part of every signature)."""
    now = int(time.time())
    if _date_cache[0] != now:
        _date_cache[0], _date_cache[1] = now, email.utils.formatdate(now, usegmt=True)
    return _date_cache[1]


@dataclass
class Request:
    method: str
    path: str                            # percent-encoded, leading "/"
    operation: str                       # "read", "create", "query", "change_feed", "read_database", ...
    headers: dict = field(default_factory=dict)
    body: bytes | None = None
    is_write: bool = False
    is_document: bool = False            # items, queries, batch, change feed: sessions, breaker, hedging
    idempotent: bool = True
    is_feed: bool = False                # queries, read-feed, change feed: the feed latency threshold
    collection: str | None = None        # "dbs/<db>/colls/<c>": the session container's key
    partition_key: str | None = None     # the x-ms-documentdb-partitionkey header's text
    excluded_locations: list | None = None
    availability_strategy: object = USE_CLIENT_DEFAULT
    timeout_s: object = USE_CLIENT_DEFAULT
    resource_type: str | None = None     # what is signed; derived from the path when not given
    resource_link: str | None = None

    def __post_init__(self):
        if self.resource_type is None:
            self.resource_type, self.resource_link = auth.resource_type_and_link(self.path)
        if self.partition_key is not None:
            self.headers["x-ms-documentdb-partitionkey"] = self.partition_key

    def signed_headers(self, signer: auth.MasterKeySigner) -> dict:
        date = http_date()
        headers = dict(self.headers)
        headers["x-ms-date"] = date
        headers["x-ms-version"] = API_VERSION
        headers["authorization"] = signer.header(self.method, self.resource_type, self.resource_link, date)
        return headers
