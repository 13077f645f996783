"""What the request layer asks of a JavaScript engine, and what it may answer.

The service runs a script (service/sproc.py) as a conversation of rounds: it evaluates a piece of
JavaScript, gets back text (JSON: the collection operations the script queued, or its result),
does those operations itself, and evaluates the next piece with their results. The engine itself
(a V8 isolate per execution, its wall-clock bound, its thread) belongs to the runtime
(runtime/script_engine.py); the service holds only this protocol, so it stays sans-I/O, and a
surface without an engine (the simulator) answers script requests with `no_engine()`.
"""
import re
from typing import Awaitable, Protocol

from ..core.errors import CosmosError

SCRIPTS_EXTRA = "pip install 'regionlab[scripts]'"


class ScriptTimeout(Exception):
    """The execution used up its time bound; the engine stopped it."""


class ScriptOutOfMemory(Exception):
    """The execution's heap reached its bound; the engine stopped it."""


class ScriptFailed(Exception):
    """The JavaScript threw (or did not parse); the message is the engine's, with the error."""


class ScriptSession(Protocol):
    """One execution's isolated JavaScript context, bounded in time over all its rounds."""

    def eval(self, code: str) -> Awaitable[str]:
        """The value of code (a string), or ScriptTimeout / ScriptOutOfMemory / ScriptFailed."""

    def close(self) -> None:
        """Free the context (always called, also after a failure)."""


class UdfSession(Protocol):
    """One query request's context for its user-defined functions: synchronous calls (the query
    engine evaluates rows synchronously), each bounded, and all of them together."""

    def call(self, code: str) -> str | None:
        """The value of code (a string, or None for undefined); the errors of ScriptSession.eval."""

    def close(self) -> None:
        """Free the context."""


class ScriptEngine(Protocol):
    def session(self, timeout_ms: int, heap_max_bytes: int) -> ScriptSession:
        """A fresh context for one execution; CosmosError 429 while too many run, 501 without
        the engine installed."""

    def udf_session(self, timeout_ms: int, call_timeout_ms: int, heap_max_bytes: int) -> Awaitable[UdfSession]:
        """A fresh context for one query's UDF calls (awaited: it is made off the loop); the
        errors of session()."""


def no_engine() -> CosmosError:
    return CosmosError(501, 0, "Running stored procedures, triggers and user-defined functions needs regionlab's "
                               f"JavaScript engine (V8, from the mini-racer package): {SCRIPTS_EXTRA}. "
                               "The simulator runs no scripts.")


def engine_error(text: str) -> str:
    """The engine's error without its position and source echo: V8 reports
    '<anonymous>:LINE: Error: boom', then the source line, a caret and the stack (which would
    show regionlab's own script API)."""
    first = text.strip().split("\n", 1)[0]
    m = _POSITION.match(first)
    return (first[m.end():] if m else first)[:2000]


_POSITION = re.compile(r"<anonymous>:\d+: ")
