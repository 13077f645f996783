"""What a query page reports about itself when the client asks (docs/queries.md, "Query metrics").

* `x-ms-documentdb-populatequerymetrics: True` -> `x-ms-documentdb-query-metrics`, the
  service's `key=value;` list, in its key order. Counts and sizes are exact: documents the page
  loaded into the query engine and their stored bytes, results and their bytes. Of the times,
  regionlab measures one: the page's time on the service's clock (in milliseconds, so "0.00"
  for a page under a millisecond; slices and the turns of other requests between them
  included), reported as `totalExecutionTimeInMs` and `VMExecutionTimeInMs`; the phases the
  service times separately (compile, plan, index lookup, document load, output) are not timed
  and read 0.00. `indexUtilizationRatio` is results over documents loaded (1.00 when none were).
* `x-ms-cosmos-populateindexmetrics: True` -> `x-ms-cosmos-index-utilization`, base64 of the
  service's JSON: each partition key path the request scopes by, and each path a top-level WHERE
  conjunct compares to a constant (`core/query/hints.py`), as a single index, utilized when
  the container's indexing policy indexes it and potential when it does not. Composite indexes
  are not reported (both composite lists are empty).

Pure: takes the numbers and the compiled query, returns header values.
"""
import base64
import json

from ..core.index_policy import policy_of

# The service's keys, in its order; those regionlab does not time are reported as 0.00.
_TIMED_KEYS = ("totalExecutionTimeInMs", "queryCompileTimeInMs", "queryLogicalPlanBuildTimeInMs",
               "queryPhysicalPlanBuildTimeInMs", "queryOptimizationTimeInMs", "VMExecutionTimeInMs",
               "indexLookupTimeInMs", "documentLoadTimeInMs", "systemFunctionExecuteTimeInMs",
               "userFunctionExecuteTimeInMs")
_FILTER_OPS = ("=", "<", "<=", ">", ">=", "in")


def query_metrics(elapsed_ms: int, loaded: int, loaded_bytes: int, raw: list) -> str:
    times = {key: 0.0 for key in _TIMED_KEYS}
    times["totalExecutionTimeInMs"] = times["VMExecutionTimeInMs"] = float(elapsed_ms)
    output_bytes = sum(map(len, raw))
    ratio = len(raw) / loaded if loaded else 1.0
    fields = [f"{key}={value:.2f}" for key, value in times.items()]
    fields += [f"retrievedDocumentCount={loaded}", f"retrievedDocumentSize={loaded_bytes}",
               f"outputDocumentCount={len(raw)}", f"outputDocumentSize={output_bytes}",
               "writeOutputTimeInMs=0.00", f"indexUtilizationRatio={min(ratio, 1.0):.2f}"]
    return ";".join(fields)


def index_utilization(query, pk_paths: tuple, policy: dict | None) -> str:
    """pk_paths: the partition key's paths (tuples of steps) when the request is scoped by one."""
    compiled = policy_of(policy)
    utilized, potential = [], []
    for path in pk_paths:
        utilized.append(_single("", path))
    for hint in query.index_hints:
        if hint.op in _FILTER_OPS and hint.path not in pk_paths:
            entry = _single(_filter_text(hint), hint.path)
            (utilized if compiled.indexes(hint.path) else potential).append(entry)
    body = {"UtilizedSingleIndexes": utilized, "PotentialSingleIndexes": potential,
            "UtilizedCompositeIndexes": [], "PotentialCompositeIndexes": []}
    return base64.b64encode(json.dumps(body, separators=(",", ":")).encode()).decode()


def _single(filter_expression: str, path: tuple) -> dict:
    return {"FilterExpression": filter_expression, "IndexSpec": _index_spec(path),
            "FilterPreciseSet": True, "IndexPreciseSet": True, "IndexImpactScore": "High"}


def _index_spec(path: tuple) -> str:
    return "/" + "/".join("[]" if isinstance(step, int) else str(step) for step in path) + "/?"


def _filter_text(hint) -> str:
    """The conjunct as the service writes filter expressions: `(ROOT.a.b = "x")`."""
    target = "ROOT" + "".join(f"[{step}]" if isinstance(step, int) else f".{step}" for step in hint.path)
    if hint.op == "in":
        values = ", ".join(json.dumps(v) for v in hint.value)
        return f"({target} IN ({values}))"
    return f"({target} {hint.op} {json.dumps(hint.value)})"
