"""Keyword arguments, the client's and each request's, as azure-cosmos names them.

Theory of operation. azure-cosmos takes `**kwargs` on its constructor and every operation and
passes what it does not know down to its HTTP transport, which raises TypeError at the first
request ("Session.request() got an unexpected keyword argument 'x'" from requests,
"ClientSession._request() ..." from aiohttp). So code written for it never has a misspelt
keyword that does nothing. Here every keyword is one of three kinds:

* implemented: the client's are the constructor's parameters (and the SDK's names for them,
  `client_keywords`); a request's are `REQUEST_OPTIONS` (every operation takes them, as the SDK's
  `build_options` reads them for every operation) plus the operation's own parameters;
* refused: a keyword the SDK documents that this client does not implement raises
  NotImplementedError naming it and saying what to use instead (`CLIENT_REFUSED`,
  `REQUEST_REFUSED`);
* anything else raises TypeError, as Python does for a function's unknown keyword, at the call
  (before any request), with the closest known name.
"""
import difflib

from regionlab.client.protocol import headers as H

# The options every operation takes: excluded_locations replaces the client's list,
# availability_strategy the client's hedging, timeout is the end-to-end seconds; the rest are
# headers or conditions (request_fields), and no_response applies to item writes.
REQUEST_OPTIONS = frozenset({
    "excluded_locations", "availability_strategy", "timeout", "initial_headers", "session_token",
    "priority", "throughput_bucket", "etag", "match_condition", "no_response", "retry_write",
    "max_integrated_cache_staleness_in_ms"})

_HEADER_OPTIONS = {"session_token": H.SESSION_TOKEN, "priority": H.PRIORITY_LEVEL,
                   "throughput_bucket": H.THROUGHPUT_BUCKET,
                   "max_integrated_cache_staleness_in_ms": H.DEDICATED_GATEWAY_MAX_AGE}

_NO_TRIGGERS = ("triggers are not supported: regionlab has no stored procedures, triggers or UDFs "
                "(their paths answer 501)")
REQUEST_REFUSED = {
    "pre_trigger_include": _NO_TRIGGERS,
    "post_trigger_include": _NO_TRIGGERS,
    "response_hook": "use the result's get_response_headers(), .request_charge and .diagnostics "
                     "(a feed page's, from by_page())",
    "populate_query_metrics": "regionlab returns no query metrics; the result's .diagnostics has "
                              "each page's charge and latency",
    "populate_index_metrics": "regionlab returns no index metrics",
    "populate_query_advice": "regionlab returns no query advice",
    "full_text_score_scope": "full-text search is not supported",
    "continuation_token_limit": "continuation tokens are not limited in size",
    "feed_range": "query one partition with partition_key=, or read a feed range's changes with "
                  "query_items_change_feed(feed_range=)",
    "max_concurrency": "read_items reads all its items at once",
    "executor": "the client runs on its own event loop; there is no executor to give it",
    "consistency_level": "set consistency_level= on the client",
    "if_match": "pass etag= with match_condition=MatchConditions.IfNotModified",
    "if_none_match": "pass etag= with match_condition=MatchConditions.IfModified",
    "connection_timeout": "give the client connect_timeout_s= (or connection_timeout=), and the "
                          "request timeout=",
    "read_timeout": "give the client request_timeout_s= (or read_timeout=), and the request timeout=",
    "raw_response_hook": "use the result's get_response_headers() and .diagnostics",
    "raw_request_hook": "the result's .diagnostics lists every attempt of the request",
    "logging_enable": "operations slower than diagnostics_latency_threshold_ms are logged on "
                      "'regionlab.client.diagnostics'",
    "headers": "pass initial_headers=",
    "global_secondary_index": "global secondary indexes are not supported",
}

_LOGGING = ("diagnostics: every result and error has .diagnostics, and operations slower than "
            "diagnostics_latency_threshold_ms= are logged on 'regionlab.client.diagnostics'")
_RETRIES = ("the retry policy is the Java SDK's, per status code (docs/client.md, 'Policies and "
            "their defaults'); its knobs are retry_total=/retry_throttle_total=, "
            "retry_backoff_max=/retry_throttle_backoff_max= and retry_write=")
_TLS = "use connection_verify= (False, or a CA file or directory) or ssl_context= (an ssl.SSLContext)"
CLIENT_REFUSED = {
    "proxy_config": "HTTP proxies are not supported",
    "proxies": "HTTP proxies are not supported",
    "ssl_config": _TLS,
    "connection_cert": _TLS,
    "connection_policy": "pass its settings as keywords (preferred_locations=, connection_timeout=, ...)",
    "retry_options": _RETRIES,
    "connection_retry_policy": _RETRIES,
    "retry_fixed_interval": "a 429 waits the service's x-ms-retry-after-ms; " + _RETRIES,
    "retry_connect": _RETRIES,
    "retry_read": _RETRIES,
    "retry_status": _RETRIES,
    "retry_on_status_codes": _RETRIES,
    "retry_backoff_factor": _RETRIES,
    "retry_mode": _RETRIES,
    "enable_diagnostics_logging": _LOGGING,
    "logger": _LOGGING,
    "logging_enable": _LOGGING,
    "raw_response_hook": _LOGGING,
    "raw_request_hook": _LOGGING,
    "user_agent": "the client sends no User-Agent of its own choosing",
    "user_agent_suffix": "the client sends no User-Agent of its own choosing",
    "user_agent_overwrite": "the client sends no User-Agent of its own choosing",
    "headers": "pass initial_headers= per request",
    "throughput_bucket": "pass throughput_bucket= per request",
    "priority": "pass priority= per request",
    "availability_strategy_max_concurrency": "hedging runs at most one copy per region, as coroutines "
                                             "on the client's event loop",
    "availability_strategy_executor": "hedging runs at most one copy per region, as coroutines on the "
                                      "client's event loop",
    "enable_compact_utf8_item_writes": "item bodies are sent as compact JSON with non-ASCII characters "
                                       "escaped (\\uXXXX), which the service reads the same",
}

# azure-cosmos's names for the constructor's settings, in the units it takes them
_CLIENT_ALIASES = {"connection_timeout": "connect_timeout_s",
                   "read_timeout": "request_timeout_s",
                   "retry_write": "non_idempotent_write_retry"}
RETRY_KEYWORDS = frozenset({"retry_total", "retry_throttle_total", "retry_backoff_max",
                            "retry_throttle_backoff_max", "throttle_retries_max", "throttle_wait_ms_max",
                            "local_retries_max", "local_retry_wait_ms", "credits_wait_ms_max"})


def _unknown(where: str, name: str, known) -> TypeError:
    close = difflib.get_close_matches(name, sorted(known), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return TypeError(f"{where} got an unexpected keyword argument {name!r}{hint}")


def check(where: str, kwargs, known=frozenset(), refused=None) -> None:
    """Raise for the first keyword in `kwargs` that is neither REQUEST_OPTIONS nor in `known`:
    NotImplementedError for one the SDK documents (`refused`, REQUEST_REFUSED by default),
    TypeError for anything else."""
    refused = REQUEST_REFUSED if refused is None else refused
    where = f"{where}()"
    for name in kwargs:
        if name in REQUEST_OPTIONS or name in known:
            continue
        if name in refused:
            raise NotImplementedError(f"{where}: {name}= is not supported by regionlab's client: {refused[name]}")
        raise _unknown(where, name, REQUEST_OPTIONS | set(known) | set(refused))


def client_keywords(kwargs: dict, known) -> dict:
    """The constructor's extra keywords in its own names: azure-cosmos's names translated
    (connection_timeout and read_timeout in seconds, the legacy request_timeout in ms,
    retry_write); CLIENT_REFUSED and unknown ones raise (`known`: the constructor's own)."""
    out = {}
    for name, value in kwargs.items():
        if name in _CLIENT_ALIASES:
            out[_CLIENT_ALIASES[name]] = value
        elif name == "request_timeout":
            out["connect_timeout_s"] = value / 1000.0
        elif name in RETRY_KEYWORDS:
            out[name] = value
        elif name in CLIENT_REFUSED:
            raise NotImplementedError(f"CosmosClient(): {name}= is not supported by regionlab's client: "
                                      f"{CLIENT_REFUSED[name]}")
        else:
            raise _unknown("CosmosClient()", name, set(known) | set(_CLIENT_ALIASES) | RETRY_KEYWORDS
                           | {"request_timeout"} | set(CLIENT_REFUSED))
    return out


def _match_headers(etag, match_condition) -> dict:
    """If-Match / If-None-Match of azure-core's MatchConditions, as azure-cosmos's
    _get_match_headers (compared by name: the enum is azure-core's)."""
    if match_condition is None:
        if etag is not None:
            raise ValueError("'etag' specified without 'match_condition'.")
        return {}
    condition = getattr(match_condition, "name", None)
    if condition in ("IfNotModified", "IfModified") and not etag:
        raise ValueError("'match_condition' specified without 'etag'.")
    if condition == "IfNotModified":
        return {H.IF_MATCH: etag}
    if condition == "IfPresent":
        return {H.IF_MATCH: "*"}
    if condition == "IfModified":
        return {H.IF_NONE_MATCH: etag}
    if condition == "IfMissing":
        return {H.IF_NONE_MATCH: "*"}
    raise TypeError(f"Invalid match condition: {match_condition}")


def request_fields(kwargs) -> dict:
    """A call's REQUEST_OPTIONS as Request fields (kwargs are checked already)."""
    out = {}
    if "excluded_locations" in kwargs:
        out["excluded_locations"] = kwargs["excluded_locations"]
    if "availability_strategy" in kwargs:
        out["availability_strategy"] = kwargs["availability_strategy"]
    if "timeout" in kwargs:
        out["timeout_s"] = kwargs["timeout"]
    if kwargs.get("retry_write"):
        out["retry_write"] = True
    headers = _match_headers(kwargs.get("etag"), kwargs.get("match_condition"))
    for name, header in _HEADER_OPTIONS.items():
        if kwargs.get(name) is not None:
            headers[header] = str(kwargs[name])
    if headers:
        out["option_headers"] = headers
    if kwargs.get("initial_headers"):
        out["initial_headers"] = dict(kwargs["initial_headers"])
    return out
