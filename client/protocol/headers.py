"""HTTP header names of the Cosmos DB REST wire protocol, as the official SDKs send and read them.

Theory of operation: this module owns nothing but names. The emulator's gateway and our client
both import it, so a header is spelled in exactly one place. Values are lower case because HTTP
header names are case-insensitive and both aiohttp and the SDK compare them that way; when a
header's *value* is a fixed token (e.g. ``A-IM: Incremental Feed``) the token sits next to it.

Sections follow shared/cosmos-wire.md: §1 (sent on every request), §4 (per operation),
§2 (response headers the SDK reads).
"""

# --- Sent on every SDK request (§1) -------------------------------------------------------------
AUTHORIZATION = "authorization"
X_MS_DATE = "x-ms-date"
HTTP_DATE = "date"                        # signed as the 5th line when present; the SDK sends none
X_MS_VERSION = "x-ms-version"
ACTIVITY_ID = "x-ms-activity-id"
CLIENT_ID = "x-ms-client-id"
SDK_SUPPORTED_CAPABILITIES = "x-ms-cosmos-sdk-supportedcapabilities"
IS_CONTINUATION_EXPECTED = "x-ms-documentdb-query-iscontinuationexpected"
CONSISTENCY_LEVEL = "x-ms-consistency-level"
USER_AGENT = "user-agent"
CONTENT_TYPE = "content-type"
CONTENT_LENGTH = "content-length"
ACCEPT = "accept"
CACHE_CONTROL = "cache-control"
THINCLIENT_RESOURCE_TYPE = "x-ms-thinclient-proxy-resource-type"
THINCLIENT_OPERATION_TYPE = "x-ms-thinclient-proxy-operation-type"
INTENDED_COLLECTION_RID = "x-ms-cosmos-intended-collection-rid"
CORRELATED_ACTIVITY_ID = "x-ms-cosmos-correlated-activityid"
PRIORITY_LEVEL = "x-ms-cosmos-priority-level"
THROUGHPUT_BUCKET = "x-ms-cosmos-throughput-bucket"
DEDICATED_GATEWAY_MAX_AGE = "x-ms-dedicatedgateway-max-age"

# --- Request headers by operation (§4) ----------------------------------------------------------
PARTITION_KEY = "x-ms-documentdb-partitionkey"
PK_RANGE_ID = "x-ms-documentdb-partitionkeyrangeid"
IS_UPSERT = "x-ms-documentdb-is-upsert"
# Server-side scripts: a stored procedure's console.log lines (asked for, then returned URL-encoded),
# and the triggers a write runs (comma-separated ids).
SCRIPT_ENABLE_LOGGING = "x-ms-documentdb-script-enable-logging"
SCRIPT_LOG_RESULTS = "x-ms-documentdb-script-log-results"
PRE_TRIGGER_INCLUDE = "x-ms-documentdb-pre-trigger-include"
POST_TRIGGER_INCLUDE = "x-ms-documentdb-post-trigger-include"
IS_QUERY = "x-ms-documentdb-isquery"
IS_QUERY_PLAN = "x-ms-cosmos-is-query-plan-request"
SUPPORTED_QUERY_FEATURES = "x-ms-cosmos-supported-query-features"
QUERY_VERSION = "x-ms-cosmos-query-version"
ENABLE_CROSS_PARTITION = "x-ms-documentdb-query-enablecrosspartition"
POPULATE_QUERY_METRICS = "x-ms-documentdb-populatequerymetrics"
POPULATE_INDEX_METRICS = "x-ms-cosmos-populateindexmetrics"
MAX_ITEM_COUNT = "x-ms-max-item-count"
CONTINUATION = "x-ms-continuation"
IS_BATCH = "x-ms-cosmos-is-batch-request"
BATCH_ATOMIC = "x-ms-cosmos-batch-atomic"
BATCH_CONTINUE_ON_ERROR = "x-ms-cosmos-batch-continue-on-error"
OFFER_THROUGHPUT = "x-ms-offer-throughput"
OFFER_AUTOPILOT = "x-ms-cosmos-offer-autopilot-settings"
IF_MATCH = "if-match"
IF_NONE_MATCH = "if-none-match"
IF_MODIFIED_SINCE = "if-modified-since"
PREFER = "prefer"
PREFER_RETURN_MINIMAL = "return=minimal"
SESSION_TOKEN = "x-ms-session-token"
PRE_TRIGGER_INCLUDE = "x-ms-documentdb-pre-trigger-include"
POST_TRIGGER_INCLUDE = "x-ms-documentdb-post-trigger-include"
INDEXING_DIRECTIVE = "x-ms-indexing-directive"
ENABLE_SCAN_IN_QUERY = "x-ms-documentdb-query-enable-scan"
POPULATE_QUOTA_INFO = "x-ms-documentdb-populatequotainfo"
POPULATE_PARTITION_STATISTICS = "x-ms-documentdb-populatepartitionstatistics"
ALLOW_TENTATIVE_WRITES = "x-ms-cosmos-allow-tentative-writes"

# Change feed and EPK-scoped reads (§4, §7).
A_IM = "a-im"
A_IM_INCREMENTAL = "Incremental Feed"
A_IM_FULL_FIDELITY = "Full-Fidelity Feed"
CHANGE_FEED_WIRE_FORMAT_VERSION = "x-ms-cosmos-changefeed-wire-format-version"
READ_KEY_TYPE = "x-ms-read-key-type"
READ_KEY_TYPE_EPK_RANGE = "EffectivePartitionKeyRange"
START_EPK = "x-ms-start-epk"
END_EPK = "x-ms-end-epk"

# --- Response headers (§2) ----------------------------------------------------------------------
ETAG = "etag"
CONTENT_LOCATION = "content-location"
REQUEST_CHARGE = "x-ms-request-charge"
SUBSTATUS = "x-ms-substatus"
RETRY_AFTER_MS = "x-ms-retry-after-ms"
ALT_CONTENT_PATH = "x-ms-alt-content-path"
CONTENT_PATH = "x-ms-content-path"
ITEM_COUNT = "x-ms-item-count"
LSN = "lsn"
ITEM_LSN = "x-ms-item-lsn"
GLOBAL_COMMITTED_LSN = "x-ms-global-committed-lsn"
RESOURCE_QUOTA = "x-ms-resource-quota"
RESOURCE_USAGE = "x-ms-resource-usage"
RESOURCE_TOKEN_EXPIRY = "x-ms-documentdb-expiry-seconds"    # a permission read: its token's lifetime (s)
INDEX_TRANSFORMATION_PROGRESS = "x-ms-documentdb-collection-index-transformation-progress"
LAZY_INDEXING_PROGRESS = "x-ms-documentdb-collection-lazy-indexing-progress"
GATEWAY_VERSION = "x-ms-gatewayversion"
SERVICE_VERSION = "x-ms-serviceversion"
NUMBER_OF_READ_REGIONS = "x-ms-number-of-read-regions"
REQUEST_DURATION_MS = "x-ms-request-duration-ms"
INDEX_UTILIZATION = "x-ms-cosmos-index-utilization"
QUERY_METRICS = "x-ms-documentdb-query-metrics"
QUERY_ADVICE = "x-ms-cosmos-query-advice"
LAST_STATE_CHANGE_UTC = "x-ms-last-state-change-utc"
MAX_MEDIA_STORAGE_USAGE_MB = "x-ms-max-media-storage-usage-mb"
MEDIA_STORAGE_USAGE_MB = "x-ms-media-storage-usage-mb"

# Added by the SDK to its own last_response_headers; a server never sends them (§2).
THROTTLE_RETRY_COUNT = "x-ms-throttle-retry-count"
THROTTLE_RETRY_WAIT_TIME_MS = "x-ms-throttle-retry-wait-time-ms"
