"""Header names and status codes are spelled as the official SDK spells them: every header
constant that the SDK also defines matches it (case-insensitively) and every status/substatus
constant the SDK defines has the SDK's value; code_name gives the error-body codes."""

from azure.cosmos import http_constants as sdk

from regionlab.client.protocol import headers, status


def _constants(module):
    return {k: v for k, v in vars(module).items() if k.isupper() and not k.startswith("_")}


def test_header_names_are_lower_case_and_unique():
    names = {k: v for k, v in _constants(headers).items() if not k.startswith(("A_IM_", "READ_KEY_TYPE_", "PREFER_"))}
    assert all(v == v.lower() for v in names.values())
    assert len(set(names.values())) == len(names)


def test_header_names_known_to_the_sdk_match_it():
    sdk_names = {v.lower() for k, v in vars(sdk.HttpHeaders).items() if not k.startswith("_") and isinstance(v, str)}
    for name in ("PARTITION_KEY", "SESSION_TOKEN", "REQUEST_CHARGE", "SUBSTATUS", "RETRY_AFTER_MS",
                 "CONTINUATION", "MAX_ITEM_COUNT", "IS_UPSERT", "IS_QUERY", "IS_QUERY_PLAN", "IS_BATCH",
                 "BATCH_ATOMIC", "ALT_CONTENT_PATH", "PK_RANGE_ID", "ACTIVITY_ID", "CONSISTENCY_LEVEL",
                 "OFFER_THROUGHPUT", "OFFER_AUTOPILOT", "A_IM", "START_EPK", "END_EPK", "READ_KEY_TYPE",
                 "INTENDED_COLLECTION_RID", "LSN", "ITEM_LSN", "GLOBAL_COMMITTED_LSN", "ITEM_COUNT",
                 "X_MS_DATE", "X_MS_VERSION", "PREFER", "ETAG", "AUTHORIZATION", "IF_MATCH",
                 "IF_NONE_MATCH", "ENABLE_CROSS_PARTITION", "BATCH_CONTINUE_ON_ERROR",
                 "CHANGE_FEED_WIRE_FORMAT_VERSION", "SDK_SUPPORTED_CAPABILITIES"):
        assert getattr(headers, name) in sdk_names, name
    assert headers.A_IM_INCREMENTAL == sdk.HttpHeaders.IncrementalFeedHeaderValue


def test_status_values_match_the_sdk():
    sub = sdk.SubStatusCodes
    assert status.SUB_PARTITION_KEY_MISMATCH == sub.PARTITION_KEY_MISMATCH
    assert status.SUB_CROSS_PARTITION_QUERY_NOT_SERVABLE == sub.CROSS_PARTITION_QUERY_NOT_SERVABLE
    assert status.SUB_COLLECTION_RID_MISMATCH == sub.COLLECTION_RID_MISMATCH
    assert status.SUB_NAME_CACHE_STALE == sub.NAME_CACHE_IS_STALE
    assert status.SUB_PARTITION_KEY_RANGE_GONE == sub.PARTITION_KEY_RANGE_GONE
    assert status.SUB_COMPLETING_SPLIT == sub.COMPLETING_SPLIT
    assert status.SUB_COMPLETING_PARTITION_MIGRATION == sub.COMPLETING_PARTITION_MIGRATION
    assert status.SUB_WRITE_FORBIDDEN == sub.WRITE_FORBIDDEN
    assert status.SUB_DATABASE_ACCOUNT_NOT_FOUND == sub.DATABASE_ACCOUNT_NOT_FOUND
    assert status.SUB_READ_SESSION_NOT_AVAILABLE == sub.READ_SESSION_NOTAVAILABLE
    assert status.SUB_OWNER_RESOURCE_NOT_FOUND == sub.OWNER_RESOURCE_NOT_FOUND
    assert status.SUB_THROUGHPUT_OFFER_NOT_FOUND == sub.THROUGHPUT_OFFER_NOT_FOUND
    for name, value in vars(sdk.StatusCodes).items():
        if not name.startswith("_") and value < 1000:
            assert getattr(status, name) == value, name


def test_table_rows_are_unique_and_named():
    pairs = [(c.status, c.substatus) for c in status.TABLE]
    assert len(pairs) == len(set(pairs))
    assert status.describe(404, 1002).startswith("404/1002 ReadSessionNotAvailable")
    assert status.describe(418, 7) == "418/7 Unknown"


def test_code_names():
    assert [status.code_name(s) for s in (400, 401, 403, 404, 405, 408, 409, 412, 413, 429, 449,
                                         500, 503, 410, 501)] == [
        "BadRequest", "Unauthorized", "Forbidden", "NotFound", "MethodNotAllowed", "RequestTimeout",
        "Conflict", "PreconditionFailed", "RequestEntityTooLarge", "TooManyRequests", "RetryWith",
        "InternalServerError", "ServiceUnavailable", "Gone", "NotImplemented"]
