"""The JavaScript engine of the service's scripts (service/script_engine.py): V8, through the
mini-racer package (the optional `scripts` extra), on the asyncio loop.

Every execution gets its own V8 isolate (a MiniRacer), so scripts share nothing, and its heap has
a hard limit. JavaScript runs on V8's own thread: an evaluation is a future of this loop, settled
by mini-racer's callback, so a script that loops forever holds no request of anyone else. The time
bound counts every round of an execution together, on the loop's clock; when it is up the
evaluation's task is cancelled, which terminates the JavaScript at once (mini-racer's
mr_cancel_task). At most `running_max` executions hold an isolate at a time; one more is refused
with 429 rather than queued, so a burst of scripts costs bounded memory.

User-defined functions are called from inside a query's evaluation, which cannot await: their
session (V8UdfSession) makes synchronous calls, each waiting on the V8 thread for at most
UDF_CALL_TIMEOUT_MS (the query engine keeps few calls per slice: service/udfs.py).
"""
import asyncio
import contextlib
import threading
import time

from ..core.errors import CosmosError
from ..core.limits import SCRIPTS_RUNNING_MAX
from ..service.script_engine import ScriptFailed, ScriptOutOfMemory, ScriptTimeout, no_engine

BUSY_RETRY_AFTER_MS = 100


class V8Engine:
    def __init__(self, loop, running_max: int = SCRIPTS_RUNNING_MAX):
        self._loop = loop
        self.running_max = running_max
        self.running = 0
        self._mr = None                 # the py_mini_racer module, imported at the first script
        self._udf_loop = None           # the loop thread UDF calls wait on (started at the first)

    def session(self, timeout_ms: int, heap_max_bytes: int) -> "V8Session":
        self._admit()
        return V8Session(self, timeout_ms, heap_max_bytes)

    async def udf_session(self, timeout_ms: int, call_timeout_ms: int, heap_max_bytes: int) -> "V8UdfSession":
        self._admit()
        if self._udf_loop is None:
            self._udf_loop = _start_loop_thread()
        self.running += 1           # counted while its isolate is made, so the cap holds
        try:
            stack, racer = await self._loop.run_in_executor(None, _isolate, self._mr, self._udf_loop)
        except BaseException:
            self.running -= 1
            raise
        racer.set_hard_memory_limit(heap_max_bytes)
        return V8UdfSession(self, stack, racer, timeout_ms, call_timeout_ms)

    def _admit(self) -> None:
        if self._mr is None:
            try:
                import py_mini_racer
            except ImportError:
                raise no_engine() from None
            self._mr = py_mini_racer
        if self.running >= self.running_max:
            raise CosmosError(429, 3200, f"{self.running_max} scripts are running in this emulator, the most it runs "
                                         "at once; retry shortly.", retry_after_ms=BUSY_RETRY_AFTER_MS)

    def _translated(self, racer, e: Exception) -> Exception:
        """The service's exception for what mini-racer raised."""
        mr = self._mr
        if isinstance(e, mr.JSOOMException) or (isinstance(e, mr.JSEvalException)
                                                 and racer.was_hard_memory_limit_reached()):
            return ScriptOutOfMemory()
        if isinstance(e, (mr.JSTimeoutException, mr._exc.JSTerminatedException)):
            return ScriptTimeout()
        return ScriptFailed(str(e))


class V8Session:
    def __init__(self, engine: V8Engine, timeout_ms: int, heap_max_bytes: int):
        self._engine = engine
        self._loop = loop = engine._loop
        self._deadline = loop.time() + timeout_ms / 1000
        # V8 makes the isolate on a worker thread (about 1.5 ms there, 10 ms made on the loop,
        # which would hold every other request meanwhile); mini-racer's callbacks still settle
        # this loop's futures.
        self._made = loop.run_in_executor(None, _isolate, engine._mr, loop)
        self._heap_max_bytes = heap_max_bytes
        self._racer = None
        engine.running += 1

    async def eval(self, code: str) -> str:
        mr = self._engine._mr
        if self._racer is None:
            self._stack, self._racer = await self._made
            self._racer.set_hard_memory_limit(self._heap_max_bytes)
        left_s = self._deadline - self._loop.time()
        if left_s <= 0:
            raise ScriptTimeout()
        task = self._loop.create_task(self._racer.eval_cancelable(code))
        expired = []

        def expire() -> None:
            expired.append(True)
            task.cancel()
        timer = self._loop.call_later(left_s, expire)
        try:
            return await task
        except mr._exc.MiniRacerBaseException as e:
            raise self._engine._translated(self._racer, e) from None
        except asyncio.CancelledError:
            # Our timer cancelled the evaluation: the script ran out of time. A cancellation of
            # the request itself (the surface stopping) goes on up, and stops the evaluation too.
            current = asyncio.current_task()
            if expired and (current is None or not current.cancelling()):
                raise ScriptTimeout() from None
            task.cancel()
            raise
        finally:
            timer.cancel()

    def close(self) -> None:
        made, self._made = self._made, None
        if made is None:
            return
        self._engine.running -= 1
        self._racer = None
        if made.done() and not made.cancelled() and made.exception() is None:
            made.result()[0].close()
        else:                               # closed before its isolate was made: free it once made
            made.add_done_callback(lambda f: f.cancelled() or f.exception() or f.result()[0].close())


def _isolate(mr, loop):
    """(the ExitStack that frees it, a MiniRacer bound to loop), made on a worker thread."""
    stack = contextlib.ExitStack()
    return stack, stack.enter_context(mr.mini_racer(event_loop=loop))


class V8UdfSession:
    """Synchronous calls for the query engine: the isolate's evaluations run on V8's thread, with
    mini-racer's bookkeeping on a loop thread of their own (`_start_loop_thread`), while the
    request's loop waits, at most call_timeout_ms a call."""

    def __init__(self, engine: V8Engine, stack, racer, timeout_ms: int, call_timeout_ms: int):
        self._engine = engine
        self._stack, self._racer = stack, racer
        self._left_s = timeout_ms / 1000
        self._call_s = call_timeout_ms / 1000

    def call(self, code: str):
        mr = self._engine._mr
        bound_s = min(self._call_s, self._left_s)
        if bound_s <= 0:
            raise ScriptTimeout()
        began = time.monotonic()
        try:
            value = self._racer.eval(code, timeout_sec=bound_s)
        except mr._exc.MiniRacerBaseException as e:
            raise self._engine._translated(self._racer, e) from None
        finally:
            self._left_s -= time.monotonic() - began
        return None if isinstance(value, mr.JSUndefinedType) else value

    def close(self) -> None:
        if self._racer is not None:
            self._racer = None
            self._stack.close()
            self._engine.running -= 1


def _start_loop_thread():
    """An asyncio loop on a daemon thread of its own, for mini-racer's synchronous calls."""
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, name="regionlab-udf-engine", daemon=True).start()
    return loop
