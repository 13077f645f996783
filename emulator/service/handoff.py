"""Handing a request's rest to a task, after a surface ran its first step itself.

A surface on the asyncio loop starts `Service.handle(call)` with `coro.send(None)`, outside any
task: nearly every request finishes in that one step, and a task per request would cost more
than the request. One that suspends yielded what it waits on (a plain future of the runtime's
Waits, runtime/waits.py); `carry_on(coro, waiting)` is the native coroutine the surface gives
`loop.create_task` to finish it (create_task takes nothing else from Python 3.12 on). The task
drives the rest as if it had run the coroutine whole: results, exceptions and cancellation go
through unchanged. No loop is touched here.
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
    """A native coroutine for the task that finishes coro, whose first step yielded waiting."""
    return await _Rest(coro, waiting)
