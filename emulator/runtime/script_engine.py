"""The JavaScript engine of the service's scripts (service/script_engine.py): V8, through the
mini-racer package (the optional `scripts` extra), on the asyncio loop.

Every execution gets its own V8 isolate (a MiniRacer), so scripts share nothing, and its heap has
a hard limit. JavaScript runs on V8's own thread: an evaluation is a future of this loop, settled
by mini-racer's callback, so a script that loops forever holds no request of anyone else. The time
bound counts every round of an execution together, on the loop's clock; when it is up the
evaluation's task is cancelled, which terminates the JavaScript at once (mini-racer's
mr_cancel_task). At most `running_max` executions hold an isolate at a time; one more is refused
with 429 rather than queued, so a burst of scripts costs bounded memory.
"""
import asyncio

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

    def session(self, timeout_ms: int, heap_max_bytes: int) -> "V8Session":
        if self._mr is None:
            try:
                import py_mini_racer
            except ImportError:
                raise no_engine() from None
            self._mr = py_mini_racer
        if self.running >= self.running_max:
            raise CosmosError(429, 3200, f"{self.running_max} scripts are running in this emulator, the most it runs "
                                         "at once; retry shortly.", retry_after_ms=BUSY_RETRY_AFTER_MS)
        return V8Session(self, timeout_ms, heap_max_bytes)


class V8Session:
    def __init__(self, engine: V8Engine, timeout_ms: int, heap_max_bytes: int):
        self._engine = engine
        self._loop = engine._loop
        self._deadline = self._loop.time() + timeout_ms / 1000
        self._racer = engine._mr.MiniRacer()     # on the running loop: its callbacks settle our futures
        self._racer.set_hard_memory_limit(heap_max_bytes)
        engine.running += 1

    async def eval(self, code: str) -> str:
        mr = self._engine._mr
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
        except mr.JSOOMException:
            raise ScriptOutOfMemory() from None
        except mr.JSTimeoutException:
            raise ScriptTimeout() from None
        except mr.JSEvalException as e:
            if self._racer.was_hard_memory_limit_reached():
                raise ScriptOutOfMemory() from None
            raise ScriptFailed(str(e)) from None
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
        if self._racer is not None:
            self._racer.close()
            self._racer = None
            self._engine.running -= 1
