"""Every limit a request or a client connection can hit, in one place (docs/limits.md lists the
user-facing ones and points here).

Each is a named constant with its unit last (`_BYTES`, `_CHARS`, `_S`, `_MS`, `_ITEMS`,
`_ENTRIES`, ...; a count of the thing the name already says has none, as
CONNECTIONS_PER_LISTENER_MAX). Past a limit the client gets the answer its comment names, with a
message that names the limit; nothing of a refused request is applied. The module holds values
only: each rule that enforces one lives with its user, which imports the value from here.

Limits that are part of the wire contract the bundled client shares (the direct protocol's frame
size, request ids, per-connection caps and deadlines; the auth cache and clock-skew window) are
defined once in `client/protocol/` (the client never imports the emulator) and re-exported here,
so this module still lists them all.

Left where they are, because no request or client connection reaches them: bounds that validate
configuration and scenarios (`config.py`'s ports, partitions and delays; `core/faults.py` and
`core/request_faults.py` fault durations and counts set through the control port;
`core/placement.py`, `core/replica.py` weights; `drill/scenario.py`, `sim/` run sizes), rules of
the throttle (`core/throttle.py`: windows, burst, retry-after search), replication's retained log
(`core/replica_set.py`), and internal work chunking (`core/store.py`, `core/scheduler.py`,
`service/queries.py` scan chunks, `core/query/evaluate.py` chain compilation). The bundled
client's own bounds (its reply framing, pools, retries) live in `client/`, which cannot import
this module.
"""
# Re-exported: the wire contract's limits, listed here with the rest.
from regionlab.client.protocol.auth import AAD_TOKEN_MAX_CHARS, CLOCK_SKEW_MAX_S, VERIFIED_CACHE_MAX_ENTRIES
from regionlab.client.protocol.direct import (
    CONNECTIONS_PER_NODE_MAX, CONTAINER_MAX_ELEMENTS, FRAME_MAX_BYTES, FRAME_TIMEOUT_S, HANDSHAKE_TIMEOUT_S,
    IDLE_TIMEOUT_S, IN_FLIGHT_PER_CONNECTION_MAX, INSTANCE_MAX_CHARS, PRE_READY_FRAME_MAX_BYTES, REQUEST_ID_MAX,
    STRING_MAX_BYTES,
)

# ---- items and JSON bodies (core/validation.py) ------------------------------------------------
# The service's limits: past them 413 (size) or 400 (id, nesting), also for an item as a patch
# leaves it.
ITEM_MAX_BYTES = 2 * 1024 * 1024
ID_MAX_BYTES = 1023                          # UTF-8 bytes of an item's (or resource's) id
ID_MAX_CHARS = 255                           # characters of a database's or container's id
ITEM_NESTING_MAX_LEVELS = 128                # objects and arrays inside one another
PARTITION_KEY_MAX_PATHS = 3                  # a hierarchical (MultiHash) key's paths; more is 400
TTL_MAX_S = 2_147_483_647                    # an item's ttl, a container's defaultTtl (an int32); more is 400
TTL_SWEEP_TURN_MAX_ENTRIES = 512             # log entries indexed + items deleted per sweep turn (core/ttl.py)

# ---- operations per request --------------------------------------------------------------------
BATCH_MAX_OPERATIONS = 100                   # the service's cap; more is 400 (bulk cuts batches this size)
PATCH_MAX_OPERATIONS = 10                    # the service's cap; more is 400

# ---- provisioned throughput (core/offers.py): outside the range is 400 --------------------------
THROUGHPUT_MIN_RU_PER_S = 400
AUTOSCALE_MAX_THROUGHPUT_MIN_RU_PER_S = 1000  # an autoscale offer's maximum is at least this
# The service's default ceiling per container or database (support can raise it there): past
# it, the partitions derived from the throughput would outgrow the key space's ranges.
THROUGHPUT_MAX_RU_PER_S = 1_000_000

# ---- pages (read feed, change feed, queries) --------------------------------------------------
PAGE_DEFAULT_ITEMS = 100                     # without x-ms-max-item-count
PAGE_MAX_ITEMS = 1000                        # a larger x-ms-max-item-count is served as this
# A page ends before an item that would take it past this (it always holds at least one item,
# and an item is at most ITEM_MAX_BYTES), as the service caps its pages.
PAGE_MAX_BYTES = 4 * 1024 * 1024

# ---- SQL queries (core/query/, service/queries.py): past each, 400 unless said ------------------
QUERY_TEXT_MAX_CHARS = 512 * 1024            # the service caps query text at 512 KiB
# How deep expressions may nest: brackets, calls, subqueries (two levels), the middle branch of
# a ternary and links of a comparison chain each count one level. Chains of AND/OR/arithmetic
# operators, prefix operators, member accesses and ternary else-branches do not count: they
# are parsed, compiled and evaluated in loops, at any length.
# The service documents no such limit; this one keeps every stage far from Python's stack limit.
QUERY_NESTING_MAX_LEVELS = 64
QUERY_INTEGER_MAX_DIGITS = 309               # an integer literal with more digits is beyond a double's range
QUERY_COUNT_MAX = 2 ** 31 - 1                # largest TOP / OFFSET / LIMIT accepted
FUNCTION_MAX_ARGS = 256                      # of CONCAT, ARRAY_CONCAT, SETUNION, CHOOSE, ...
REPLICATE_MAX_CHARS = 10_000                 # the service refuses to build longer strings (undefined)
# A query page's execution budget, counted in work units (one per document loaded, one per row
# a FROM or JOIN makes) so the core stays clock-free (core/query_page.py). Every page runs in
# slices, and the event loop serves every other request between two: a slice is about a
# millisecond of CPU for every query shape in bench/query_budget.py. A streaming page ends
# (with a continuation) after QUERY_PAGE_MAX_WORK_UNITS (at most about 40 ms of CPU); a page of
# aggregates that carries its partials in its continuation after
# QUERY_AGGREGATE_PAGE_MAX_WORK_UNITS (about a third of a second here, a few seconds on a loaded
# machine: well inside the clients' request timeouts; the service's pages stop at about 5 s);
# a GROUP BY, ORDER BY or DISTINCT page reads all its inputs and is 400 with advice to narrow it
# past QUERY_REQUEST_MAX_WORK_UNITS.
QUERY_SLICE_MAX_WORK_UNITS = 500
QUERY_PAGE_MAX_WORK_UNITS = 16_000
QUERY_AGGREGATE_PAGE_MAX_WORK_UNITS = 16 * QUERY_PAGE_MAX_WORK_UNITS
QUERY_REQUEST_MAX_WORK_UNITS = 2_000 * QUERY_PAGE_MAX_WORK_UNITS
# An aggregate page's partials ride its continuation, a header the client sends back: past this
# (a MAX over long strings) the page runs on to its end instead.
QUERY_PARTIALS_MAX_BYTES = 8 * 1024

# ---- the gateway's HTTP requests (gateway/http.py, gateway/chunked.py) -------------------------
REQUEST_HEAD_MAX_BYTES = 64 * 1024           # request line and headers; past it 431, then close
REQUEST_BODY_MAX_BYTES = ITEM_MAX_BYTES + 512 * 1024   # an item plus the JSON framing of a batch; 413
# A refused body (413) larger than this is not read to its end: the connection is just closed.
REFUSED_BODY_READ_MAX_BYTES = 64 * 1024 * 1024
CHUNK_LINE_MAX_BYTES = 1024                  # a chunk-size line with its extensions, or one trailer line
CHUNK_TRAILER_MAX_BYTES = 8 * 1024           # all trailer lines together
# Defaults of ServerConfig's header_timeout_s, body_timeout_s, keepalive_timeout_s: a head or
# body not complete in time is 408, then close; an idle keep-alive connection is closed.
HEAD_DEADLINE_S = 10.0
BODY_DEADLINE_S = 30.0
KEEPALIVE_TIMEOUT_S = 75.0
# A signed request's x-ms-date may be this far from the server's clock (CLOCK_SKEW_MAX_S, the
# default of --max-clock-skew-s), else 401: re-exported from client/protocol/auth.py.

# ---- connections (core/connection_slots.py, gateway/refusal.py, gateway/tls_listener.py) ---------
# Per listener (each gateway port and the control port). At the cap a new connection sheds a
# silent or idle one (core/connection_slots.py); only when every one has a request in progress
# is it answered 503 with TURNED_AWAY_RETRY_AFTER_MS and closed; its request is read and dropped
# for TURNED_AWAY_LINGER_S so the client reads the answer, and at most TURNED_AWAY_LINGERING_MAX
# such refusals linger per listener (later ones are closed at once). Five listeners at the cap
# stay below the common 1,024 open-files default.
CONNECTIONS_PER_LISTENER_MAX = 128
# A listener (a direct node too) with this share of its cap taken is under pressure: a connection
# must then begin a request (first byte, any TLS or direct handshake, and a whole first head)
# within SILENT_DEADLINE_UNDER_PRESSURE_S of connecting, or it is closed.
PRESSURE_OCCUPANCY_FRACTION = 0.75
SILENT_DEADLINE_UNDER_PRESSURE_S = 2.0
TURNED_AWAY_LINGERING_MAX = 16
TURNED_AWAY_LINGER_S = 2.0
TURNED_AWAY_RETRY_AFTER_MS = 1000
TLS_HANDSHAKE_DEADLINE_S = 10.0              # a TLS listener's handshake, then close
PLAIN_ON_TLS_LINGER_S = 2.0                  # plain HTTP to a TLS port: its 400 lingers this long
# The control port (aiohttp) closes a connection idle this long, a new one that never sent a
# request included (aiohttp starts the timer at connect).
CONTROL_KEEPALIVE_TIMEOUT_S = 15.0

# ---- request waits (service/service.py) --------------------------------------------------------
WRITE_ACK_DEADLINE_MS = 30_000               # then a write is answered 408: it may or may not be applied
SESSION_WAIT_MS = 200                        # a read waits this long for its region to reach a session token, then 404/1002
STRONG_WAIT_MS = 2_000                       # ... for the global committed LSN a Strong read needs

# ---- direct mode (direct/) ---------------------------------------------------------------------
# FRAME_MAX_BYTES, PRE_READY_FRAME_MAX_BYTES, CONTAINER_MAX_ELEMENTS, STRING_MAX_BYTES,
# REQUEST_ID_MAX, IN_FLIGHT_PER_CONNECTION_MAX, CONNECTIONS_PER_NODE_MAX, HANDSHAKE_TIMEOUT_S,
# IDLE_TIMEOUT_S, FRAME_TIMEOUT_S and INSTANCE_MAX_CHARS are the wire contract's
# (client/protocol/direct.py), re-exported above.
# A reply body above this cannot be framed with its envelope (the reply's other fields, well
# under 64 KiB): it is answered 413/SUB_REPLY_TOO_LARGE before it is counted.
DIRECT_REPLY_BODY_MAX_BYTES = FRAME_MAX_BYTES - 64 * 1024
# A peer that does not read its replies: once the replies queued pass this and the transport is
# past it too, the frames left of the read wait, unread, until the transport drains.
DIRECT_WRITE_BUFFER_HIGH_BYTES = 1024 * 1024
DIRECT_CLOSE_GRACE_S = 1.0                   # a closing connection gets this long to drain, then abort
DIRECT_TLS_READ_CHUNK_BYTES = 64 * 1024      # ciphertext read from a TLS peer at once
# Resolved replicas per node: only a canonical key resolves, so a node holds one per replica it
# serves, far fewer.
TARGETS_CACHE_MAX_ENTRIES = 65_536
# Replica sets one connection keeps read pins in (each pin is one entry); past this many the
# connection's pins are dropped and it pins afresh, so a long-lived client touching ever new
# containers holds a bounded number of them.
PINS_PER_CONNECTION_MAX = 1024

# ---- the control port (runtime/control*.py, core/account.py) ----------------------------------
# Past these a body is 413 / 400.
CONTROL_BODY_MAX_BYTES = 1024 * 1024         # a fault or knob body is a few hundred bytes
CONTROL_BODY_NESTING_MAX_LEVELS = 32         # the deepest real body is 2 levels
REGION_NAME_MAX_CHARS = 64                   # a runtime-added region's display name ("North Europe")

# ---- retained per container -------------------------------------------------------------------
CONFLICTS_KEPT_MAX = 10_000                  # a conflicts feed keeps the newest this many losers

# ---- caches: what a client's requests can fill is bounded, the oldest entries go first ---------
CHARGE_TEXTS_CACHE_MAX_ENTRIES = 4096        # request charges as header text (service/responses.py)
# Caches keyed by a client's text (up to a 64 KiB head or direct string each) are bounded in
# bytes (core/cache.py: emptied when the next entry would pass the budget).
PARTITION_KEYS_CACHE_MAX_BYTES = 8 * 1024 * 1024     # parsed partition-key headers (service/partition_keys.py)
SESSION_TOKENS_CACHE_MAX_BYTES = 4 * 1024 * 1024     # parsed session-token headers (service/sessions.py)
EPK_CACHE_MAX_BYTES = 2 * 1024 * 1024                # EPKs by canonical key, per container (core/container.py)
# Parsed x-ms-date values per service (clients send each for about a second): parsed before the
# signature is checked, and a valid date may carry any text after its fields.
DATES_CACHE_MAX_BYTES = 1024 * 1024
RID_PATHS_CACHE_MAX_BYTES = 1024 * 1024              # parsed rid-based paths (service/paths.py)
HEADER_NAMES_CACHE_MAX_BYTES = 256 * 1024            # header name as sent -> lower case (gateway/request_head.py)
# Compiled queries, by body and by text + parameters (service/queries.py); a body, or a text with
# its parameters, over COMPILED_QUERY_TEXT_MAX_BYTES is compiled each time, not kept.
COMPILED_QUERIES_CACHE_MAX_ENTRIES = 1024
COMPILED_QUERY_TEXT_MAX_BYTES = 8 * 1024
# Parse trees by query text (core/query/query.py): a text sent with many parameter values is
# parsed once (parsing is ~75 % of compiling a point query); longer texts are not kept.
PARSED_QUERIES_CACHE_MAX_ENTRIES = 256
PARSED_QUERY_TEXT_MAX_CHARS = 8 * 1024
# Containers' computed property definitions, parsed (core/query/computed.py): at most 20 per
# container, each query at most COMPUTED_QUERY_TEXT_MAX_CHARS.
COMPUTED_DEFINITIONS_CACHE_MAX_ENTRIES = 64
COMPUTED_PROPERTIES_MAX = 20                 # per container, as the service allows
COMPUTED_QUERY_TEXT_MAX_CHARS = 8 * 1024
# Vertex-edge pairs one spatial function call compares (core/query/spatial_functions.py): at most
# about 0.1 s of CPU for ST_DISTANCE, which does the most per pair (0.3 s measured at load 13).
SPATIAL_PAIRS_MAX = 4_000
LIKE_PATTERNS_CACHE_MAX_ENTRIES = 256        # compiled LIKE patterns (core/query/like.py)
QUERY_SHAPES_CACHE_MAX_ENTRIES = 1024        # query shapes' plans (core/query_plan.py), as many as compiled queries
EPK_MEMO_MAX_ENTRIES = 16384                 # string components whose V2 hash is remembered (~4 MB; core/epk.py)
CHARGES_CACHE_MAX_ENTRIES = 65_536           # point-operation charges by their arguments (core/charge.py)
CHARGE_POLICIES_CACHE_MAX_ENTRIES = 256      # indexing-policy shapes the charge reads (core/charge.py)
INDEX_POLICIES_CACHE_MAX_ENTRIES = 256       # compiled indexing policies, one per live container definition
PATH_DECISIONS_CACHE_MAX_ENTRIES = 4096      # "is this path indexed" answers per policy (core/index_policy.py)
INDEXED_PATHS_PER_STORE_MAX = 16             # materialised index paths per store; queries on further paths scan
COLLECTION_RIDS_CACHE_MAX_ENTRIES = 4096     # a collection's rid bytes by its rid (core/rid.py)

# Users and permissions (core/users.py; the service states no quota for them, these bound what the
# account keeps and rewrites on each metadata change).
USERS_PER_DATABASE_MAX = 1000
PERMISSIONS_PER_USER_MAX = 100
RESOURCE_LINK_MAX_CHARS = 2048                # a permission's `resource`: four ids and their segments
RESOURCE_TOKEN_EXPIRY_DEFAULT_S = 3600        # x-ms-documentdb-expiry-seconds when absent (the service's)
RESOURCE_TOKEN_EXPIRY_MIN_S = 10              # the service's range: 10 s to 5 hours
RESOURCE_TOKEN_EXPIRY_MAX_S = 18_000
RESOURCE_TOKENS_CACHE_MAX_BYTES = 1024 * 1024  # verified resource tokens by header text (service/resource_tokens.py)

# ---- server-side JavaScript (core/scripts.py, service/sproc.py, runtime/script_engine.py) ------
# A script resource's body (the JavaScript text); past it 413.
SCRIPT_BODY_MAX_BYTES = 256 * 1024
# Script resources per container, as the service's quota (x-ms-resource-quota); past it 403.
SPROCS_PER_CONTAINER_MAX = 100
TRIGGERS_PER_CONTAINER_MAX = 25
UDFS_PER_CONTAINER_MAX = 25
# One execution's time, all of its rounds together (the service stops a script at about 5 s):
# past it 408 RequestTimeout, nothing applied. ServerConfig.script_timeout_s changes it.
SCRIPT_TIMEOUT_MS = 5_000
# One execution's JavaScript heap (its own V8 isolate); past it 400, nothing applied.
SCRIPT_HEAP_MAX_BYTES = 64 * 1024 * 1024
# Executions running at once in one emulator (each holds an isolate): past it 429 with
# x-ms-retry-after-ms, which the SDKs retry.
SCRIPTS_RUNNING_MAX = 4
# Collection operations one execution may issue: past it each further call returns false
# (not accepted), as the service does when a script nears its bounds.
SCRIPT_OPERATIONS_MAX = 1000
# Bytes of items one execution stages (writes) and of results it is handed (reads, queries,
# feeds) together; an operation that would pass it fails with 413 (its callback gets the error).
SCRIPT_DATA_MAX_BYTES = 16 * 1024 * 1024
# A stored procedure's response body (setBody / setValue / appendValue), in JSON bytes; past it 413.
SCRIPT_RESPONSE_MAX_BYTES = 2 * 1024 * 1024
# The bytes of an execution request's parameters; past it 413.
SCRIPT_PARAMS_MAX_BYTES = 2 * 1024 * 1024
# A user-defined function: one call's time (it runs while its query's slice holds the loop, so
# it is short; past it 408), and the work units a call counts in its query's slice and page
# (core/query_page.py): a slice of QUERY_SLICE_MAX_WORK_UNITS holds at most 5 calls.
UDF_CALL_TIMEOUT_MS = 100
UDF_CALL_WORK_UNITS = 100
# One query request's remembered UDF results ((udf, arguments) -> result), in bytes of their text.
UDF_RESULTS_CACHE_MAX_BYTES = 1024 * 1024
# Times an execution is run again because another write landed in its partition while it ran
# (its writes are validated at commit, optimistically); then 449 RetryWith, nothing applied.
SCRIPT_RERUNS_MAX = 3
