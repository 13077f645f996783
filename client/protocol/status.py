"""HTTP status and substatus codes of the Cosmos DB wire protocol, with the service's meanings.

Theory of operation: a substatus means something only together with its status (1002 is
"read session not available" with 404 but "partition key range gone" with 410), so the table
below is keyed by the pair. The constants are plain ints so they compare with
``int(headers["x-ms-substatus"])`` directly. ``code_name`` gives the ``"code"`` string that the
service puts in error bodies (``{"code":"NotFound","message":…}``).

What each pair makes the Python SDK do is in shared/cosmos-wire.md §10.1; the short notes here
say what the *service* means by it.
"""

from typing import NamedTuple

# --- Status codes -------------------------------------------------------------------------------
OK = 200
CREATED = 201
ACCEPTED = 202
NO_CONTENT = 204
MULTI_STATUS = 207            # transactional batch with a failed operation
NOT_MODIFIED = 304
BAD_REQUEST = 400
UNAUTHORIZED = 401
FORBIDDEN = 403
NOT_FOUND = 404
METHOD_NOT_ALLOWED = 405
REQUEST_TIMEOUT = 408
CONFLICT = 409
GONE = 410
PRECONDITION_FAILED = 412
REQUEST_ENTITY_TOO_LARGE = 413
REQUEST_HEADER_FIELDS_TOO_LARGE = 431
LOCKED = 423
FAILED_DEPENDENCY = 424       # the other operations of a failed transactional batch
TOO_MANY_REQUESTS = 429
RETRY_WITH = 449
INTERNAL_SERVER_ERROR = 500
NOT_IMPLEMENTED = 501
BAD_GATEWAY = 502
SERVICE_UNAVAILABLE = 503

# --- Substatus codes (meaningful only with the status named in the comment) ---------------------
SUB_NONE = 0

# 400
SUB_PARTITION_KEY_MISMATCH = 1001
SUB_CROSS_PARTITION_QUERY_NOT_SERVABLE = 1004
SUB_COLLECTION_RID_MISMATCH = 1024
SUB_ANOTHER_OFFER_REPLACE_IN_PROGRESS = 3205
# A malformed continuation token. The number is the one the .NET SDK reserves for it; the
# service itself answers 400 with substatus 0, and the Python SDK only looks at the 400.
SUB_INVALID_CONTINUATION = 20007

# 403
SUB_WRITE_FORBIDDEN = 3
SUB_PROVISION_LIMIT_REACHED = 1005
SUB_DATABASE_ACCOUNT_NOT_FOUND = 1008
SUB_REDUNDANT_COLLECTION_PUT = 1009

# 404
SUB_READ_SESSION_NOT_AVAILABLE = 1002
SUB_OWNER_RESOURCE_NOT_FOUND = 1003
SUB_COLLECTION_CREATE_IN_PROGRESS = 1013
SUB_THROUGHPUT_OFFER_NOT_FOUND = 10004   # raised by the SDK itself when /offers answers empty

# 409
SUB_CONFLICT_WITH_CONTROL_PLANE = 1006

# 410
SUB_NAME_CACHE_STALE = 1000
SUB_PARTITION_KEY_RANGE_GONE = 1002
SUB_COMPLETING_SPLIT = 1007
SUB_COMPLETING_PARTITION_MIGRATION = 1008

# 429
SUB_RU_THROTTLED = 3200                  # the partition's RU/s budget for this second is spent
SUB_GATEWAY_THROTTLED = 3201
SUB_STORED_PROCEDURE_CONCURRENCY = 3084
# regionlab's account-wide credit budget (the Service Bus Standard model in DESIGN.md). The
# number is Service Bus's "throttled" error code; Cosmos DB has no equivalent.
SUB_CREDITS_THROTTLED = 50009

# 503
SUB_INSUFFICIENT_BINDABLE_PARTITIONS = 1007


class Code(NamedTuple):
    status: int
    substatus: int
    name: str
    meaning: str


# One row per (status, substatus) pair regionlab sends or the SDK reacts to.
TABLE: tuple[Code, ...] = (
    Code(400, 0, "BadRequest", "malformed JSON, SQL or header, or a missing required property"),
    Code(400, 1001, "PartitionKeyMismatch", "body's partition key differs from the header's"),
    Code(400, 1004, "CrossPartitionQueryNotServable", "the gateway wants a query plan"),
    Code(400, 1024, "CollectionRidMismatch", "intended-collection-rid names a recreated container"),
    Code(400, 20007, "InvalidContinuation", "the continuation token was not issued by this server"),
    Code(401, 0, "Unauthorized", "the authorization header is missing, malformed or wrong"),
    Code(403, 0, "Forbidden", "quota reached or the operation is not allowed"),
    Code(403, 3, "WriteForbidden", "writes are not accepted in this region"),
    Code(403, 1005, "ProvisionLimitReached", "account resource limit reached"),
    Code(403, 1008, "DatabaseAccountNotFound", "the region no longer serves this account"),
    Code(404, 0, "NotFound", "the resource does not exist"),
    Code(404, 1002, "ReadSessionNotAvailable", "the replica is behind the request's session token"),
    Code(404, 1003, "OwnerResourceNotFound", "the database or container does not exist"),
    Code(404, 1013, "CollectionCreateInProgress", "the container is still being created"),
    Code(408, 0, "RequestTimeout", "the operation did not finish in time; it may have happened"),
    Code(409, 0, "Conflict", "a resource with this id (and partition key) exists"),
    Code(410, 0, "Gone", "the addressed replica or partition moved"),
    Code(410, 1000, "NameCacheIsStale", "the container was recreated under the same name"),
    Code(410, 1002, "PartitionKeyRangeGone", "the partition key range split or merged"),
    Code(410, 1007, "CompletingSplit", "a split is finishing"),
    Code(410, 1008, "CompletingPartitionMigration", "a partition migration is finishing"),
    Code(412, 0, "PreconditionFailed", "if-match etag or patch condition did not hold"),
    Code(413, 0, "RequestEntityTooLarge", "the request or item exceeds the size limit"),
    Code(424, 0, "FailedDependency", "another operation of the same batch failed"),
    Code(429, 3200, "RequestRateTooLarge", "the partition's RU/s budget is spent; retry after"),
    Code(429, 50009, "CreditsThrottled", "the account's credits for this window are spent"),
    Code(449, 0, "RetryWith", "a concurrent update raced this one; retry"),
    Code(500, 0, "InternalServerError", "unexpected server failure; the operation may have happened"),
    Code(503, 0, "ServiceUnavailable", "the region or partition cannot serve now"),
)

_BY_PAIR = {(c.status, c.substatus): c for c in TABLE}

_CODE_NAMES = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    408: "RequestTimeout",
    409: "Conflict",
    410: "Gone",
    412: "PreconditionFailed",
    413: "RequestEntityTooLarge",
    423: "Locked",
    424: "FailedDependency",
    429: "TooManyRequests",
    431: "RequestHeaderFieldsTooLarge",
    449: "RetryWith",
    500: "InternalServerError",
    501: "NotImplemented",
    502: "BadGateway",
    503: "ServiceUnavailable",
}


def code_name(status: int) -> str:
    """The ``"code"`` field of an error body for ``status``; "Unknown" for codes we never send."""
    return _CODE_NAMES.get(status, "Unknown")


def describe(status: int, substatus: int = 0) -> str:
    """A one-line human description of a (status, substatus) pair, for logs and error messages."""
    row = _BY_PAIR.get((status, substatus))
    if row is not None:
        return f"{status}/{substatus} {row.name}: {row.meaning}"
    return f"{status}/{substatus} {code_name(status)}"
