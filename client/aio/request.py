"""One operation as the pipeline sees it: what to send, and what kind of request it is (the
retry, hedging, breaker and session policies decide by these flags)."""
import email.utils
import time
from dataclasses import dataclass, field

from regionlab.client.protocol import auth

from . import options

API_VERSION = "2020-07-15"
USE_CLIENT_DEFAULT = object()
NOT_GIVEN = object()                 # a keyword the caller did not pass (None may be a value)

_date_cache = [0, ""]


def request_options(kwargs, where: str, known=frozenset()) -> dict:
    """A call's per-request options as Request fields: excluded_locations= (replaces the
    client's), availability_strategy=, timeout= (end-to-end seconds), and the headers and
    conditions of options.REQUEST_OPTIONS. Every operation takes them, metadata ones included, as
    azure-cosmos's do; any other keyword but the operation's own (`known`) raises (options.check)."""
    options.check(where, kwargs, known)
    return options.request_fields(kwargs)


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
    retry_write: bool = False            # the caller's retry_write=: retry this write as an idempotent one
    initial_headers: dict | None = None  # the caller's initial_headers=, under the operation's own
    option_headers: dict | None = None   # the headers of the caller's options, over the operation's
    range_id: str | None = None          # the pipeline's: the partition key range the breaker counts it in, once known

    def __post_init__(self):
        if self.retry_write:
            self.idempotent = True
        if self.initial_headers:
            self.headers = {**self.initial_headers, **self.headers}
        if self.option_headers:
            self.headers.update(self.option_headers)
        if self.resource_type is None:
            self.resource_type, self.resource_link = auth.resource_type_and_link(self.path)
        if self.partition_key is not None:
            self.headers["x-ms-documentdb-partitionkey"] = self.partition_key

    def signed_headers(self, signer) -> dict:
        """The headers with the date and authorization (signer: auth.MasterKeySigner or
        auth.ResourceTokenSigner)."""
        date = http_date()
        headers = dict(self.headers)
        headers["x-ms-date"] = date
        headers["x-ms-version"] = API_VERSION
        headers["authorization"] = signer.header(self.method, self.resource_type, self.resource_link, date)
        return headers
