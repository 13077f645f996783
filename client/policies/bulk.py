"""Bulk (non-atomic batches): which operations go in which request, and what to do with each
operation's answer. Sans-IO; client/aio/bulk.py sends.

Theory of operation. Every operation's partition key is hashed to its EPK and placed in the
partition key range that holds it (the container's routing map); a range's operations go in
requests of at most BULK_OPERATIONS_MAX (the service's cap on a batch), in input order, and the
ranges run concurrently. An operation's answer is final unless it is a 429 (the partition's
budget ran out: resend it after its retry-after, up to THROTTLE_RETRIES_MAX times, as the
throttle policy does for a point operation) or a 410/1002 (the range split or merged: refresh
the routing map and regroup it, up to GONE_REFRESHES_MAX times).
"""
from regionlab.client.partition_key import RangeMap
from regionlab.client.protocol import status as S

BULK_OPERATIONS_MAX = 100                # the service caps a batch request at 100 operations
THROTTLE_RETRIES_MAX = 9                 # per operation, as the 429/3200 policy
THROTTLE_WAIT_MS_DEFAULT = 100           # a 429 that names no retry-after
GONE_REFRESHES_MAX = 3                   # routing-map refreshes per bulk call
FINAL, THROTTLED, GONE = "final", "throttled", "gone"


def group(epks: list[str], indices, ranges: RangeMap) -> dict[str, list[list[int]]]:
    """range id -> chunks (input order, at most BULK_OPERATIONS_MAX each) of operation indices."""
    by_range: dict[str, list[int]] = {}
    for i in indices:
        by_range.setdefault(ranges.range_of(epks[i]), []).append(i)
    return {rid: [idx[k:k + BULK_OPERATIONS_MAX] for k in range(0, len(idx), BULK_OPERATIONS_MAX)]
            for rid, idx in by_range.items()}


def verdict(result: dict, throttle_retries: int) -> tuple[str, float]:
    """(FINAL | THROTTLED | GONE, wait ms) for one operation's result after `throttle_retries`
    earlier 429s of it."""
    status, sub = result.get("statusCode"), result.get("subStatusCode", 0)
    if status == S.TOO_MANY_REQUESTS and throttle_retries < THROTTLE_RETRIES_MAX:
        return THROTTLED, float(result.get("retryAfterMilliseconds") or THROTTLE_WAIT_MS_DEFAULT)
    if status == S.GONE and sub == S.SUB_PARTITION_KEY_RANGE_GONE:
        return GONE, 0.0
    return FINAL, 0.0
