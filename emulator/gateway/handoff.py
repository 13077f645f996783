"""A handler's first step runs outside any task; if it suspends, a task carries on the rest.

Why: a point read never suspends, so running its coroutine's first step directly (coro.send)
costs no task and no scheduling; only a handler that does suspend (a write waiting for its
quorum) gets a task. `carry_on(coro, waiting)` is that task's coroutine: it hands the task the
future the first step yielded and relays every later step, results, exceptions and
cancellation included, as if the task had run the handler whole. Handlers so started may await
only futures and coroutines that do (not `asyncio.timeout`, which needs a current task). Used
by the gateway's connections (gateway/http.py) and the direct protocol's (runtime/direct_server.py).
"""


def _relay(coro, waiting):
    """The rest of a coroutine whose first step already ran and yielded `waiting` (a future):
    hand that to the task driving us, then relay every later step (as `yield from` would, had
    the coroutine not been started)."""
    while True:
        try:
            sent = yield waiting
        except BaseException as exc:            # cancellation, thrown in by the task
            try:
                waiting = coro.throw(exc)
            except StopIteration as done:
                return done.value
            continue
        try:
            waiting = coro.send(sent)
        except StopIteration as done:
            return done.value


class _Rest:
    __slots__ = ("coro", "waiting")

    def __init__(self, coro, waiting):
        self.coro = coro
        self.waiting = waiting

    def __await__(self):
        return _relay(self.coro, self.waiting)


async def carry_on(coro, waiting):
    """A native coroutine for the task (3.12+ accept nothing else) that finishes coro."""
    return await _Rest(coro, waiting)
