"""User-defined functions in SQL: `SELECT udf.name(c.x) FROM c` runs the container's UDF `name`.

Theory of operation: the query engine evaluates a row's expressions synchronously, inside a
slice of its page (core/query_page.py), so a UDF call cannot await: `UdfCalls` asks the engine
for a synchronous session (ScriptEngine.udf_session), whose JavaScript runs on V8's thread while
the call waits, bounded per call (UDF_CALL_TIMEOUT_MS) and for the whole request (the scripts'
time bound). A call counts UDF_CALL_WORK_UNITS in its slice, so a slice holds only a few calls
and every other request gets in between them. One session serves one query request; each UDF
is defined in it at its first call, from the container's script of that id.
"""
import json

from ..core.cache import Cache, text_bytes
from ..core.errors import CosmosError, bad_request
from ..core.limits import SCRIPT_HEAP_MAX_BYTES, UDF_CALL_TIMEOUT_MS, UDF_RESULTS_CACHE_MAX_BYTES
from ..core.query.values import UNDEFINED
from .script_engine import ScriptFailed, ScriptOutOfMemory, ScriptTimeout, engine_error, no_engine


class UdfCalls:
    """f(name, args) -> value for CompiledQuery.set_udfs; close() when the request ends."""

    def __init__(self, container, session, timeout_ms: int):
        self._container = container
        self._timeout_ms = timeout_ms
        self._session = session
        self._first = True
        self._defined = {}                       # udf id -> its JavaScript name in the session
        # (udf id, arguments' JSON) -> its result's JSON: a UDF is a function of its arguments
        # (the service requires it), and a query often calls one twice a row (WHERE and SELECT).
        self._results = Cache(UDF_RESULTS_CACHE_MAX_BYTES)

    @classmethod
    async def open(cls, call, container) -> "UdfCalls":
        engine = call.svc.script_engine
        if engine is None:
            raise no_engine()
        timeout_ms = call.svc.script_timeout_ms
        return cls(container, await engine.udf_session(timeout_ms, UDF_CALL_TIMEOUT_MS, SCRIPT_HEAP_MAX_BYTES),
                   timeout_ms)

    def __call__(self, name: str, args: list):
        fn = self._defined.get(name)
        if fn is None:
            fn = self._define(name)
        try:
            text = ",".join("undefined" if a is UNDEFINED else json.dumps(a) for a in args)
        except (TypeError, ValueError):
            raise bad_request(f"An argument of udf.{name} is not a JSON value.") from None
        key = (name, text)
        out = self._results.get(key)
        if out is None:
            out = self._run(name, f"(function () {{ var r = {fn}({text}); "
                                  "var t = __stringify(r); return t === undefined ? '' : t; })()")
            if not isinstance(out, str):
                raise bad_request(f"The user-defined function udf.{name} changed the JSON object it runs with.")
            self._results.put(key, out, text_bytes(name) + text_bytes(text) + text_bytes(out))
        return UNDEFINED if out == "" else json.loads(out)

    def _define(self, name: str) -> str:
        if self._first:           # a UDF may replace JSON.stringify; results keep the original
            self._first = False
            self._run(name, "var __stringify = JSON.stringify;")
        udf = self._container.scripts.by_kind["udfs"].get(name)
        if udf is None:
            raise bad_request(f"The user-defined function udf.{name} does not exist in container "
                              f"'{self._container.id}'; create it first (container.scripts.create_user_defined_function).")
        fn = f"__udf{len(self._defined)}"
        self._run(name, f"var {fn} = (\n{udf.body}\n); if (typeof {fn} !== 'function') "
                        "{ throw new Error('The UDF body is not a JavaScript function.'); }")
        self._defined[name] = fn
        return fn

    def _run(self, name: str, code: str):
        try:
            return self._session.call(code)
        except ScriptTimeout:
            raise CosmosError(408, 0, f"The user-defined function udf.{name} ran past its bound ({UDF_CALL_TIMEOUT_MS} "
                                      f"ms a call, {self._timeout_ms / 1000:g} s for the query); it was stopped.") from None
        except ScriptOutOfMemory:
            raise bad_request(f"The user-defined function udf.{name} used more than "
                              f"{SCRIPT_HEAP_MAX_BYTES // (1024 * 1024)} MiB of JavaScript heap.") from None
        except ScriptFailed as e:
            raise bad_request(f"Encountered exception while executing function udf.{name}. "
                              f"Exception = {engine_error(str(e))}") from None

    def close(self) -> None:
        self._session.close()
