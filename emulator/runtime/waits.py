"""The service's waits (service/waits.py) on the asyncio loop, in real time.

Each is a plain future and a loop timer, not asyncio.wait_for or asyncio.sleep: a surface starts
a request's coroutine outside any task (gateway/http.py runs its first step inline), and a plain
future is what such a step may yield.
"""


class LoopWaits:
    __slots__ = ("_loop",)

    def __init__(self, loop):
        self._loop = loop

    def until(self, register, timeout_ms: int):
        return self._until(register, timeout_ms)

    async def _until(self, register, timeout_ms: int):
        fut = self._loop.create_future()

        def settle(ok) -> None:
            if not fut.done():
                fut.set_result(ok)
        timer = self._loop.call_later(timeout_ms / 1000, settle, None)
        register(settle)
        try:
            return await fut
        finally:
            timer.cancel()

    def hold(self, delay_ms: int):
        fut = self._loop.create_future()
        self._loop.call_later(delay_ms / 1000, lambda: fut.done() or fut.set_result(None))
        return fut

    def turn(self):
        fut = self._loop.create_future()
        self._loop.call_soon(lambda: fut.done() or fut.set_result(None))
        return fut

    def soon(self, fn) -> None:
        self._loop.call_soon(fn)
