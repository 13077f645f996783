"""Requests in virtual time: the service's waits (service/waits.py) on the core scheduler, and the
trampoline that runs each request's coroutine.

Theory of operation: `Service.handle(call)` is a coroutine that suspends only on what its Waits
hand out; here that is a `Wait`, settled by a core callback (a commit reaching its quorum, a
region catching up) or by a scheduler timer (a timeout, a held reply). `Driver.start` runs a
request's first step at once, so a request that needs no waiting is answered inside the call,
as the gateway answers it. A request that yields a Wait is parked on it; settling the Wait does
not resume the request inside the callback that settled it (that is the core in the middle of
its own bookkeeping) but schedules the next step at the current virtual time, as the asyncio
loop's call_soon does; the scheduler runs it in the same `run_due`. The first settle wins;
nothing is cancelled (a timeout that finds its Wait settled does nothing), as with the runtime's
loop timers. Everything happens in the order the scheduler gives, so a run stays a pure function
of its seed.

A Task may carry `on_wake(value)`, called when a Wait it is parked on settles, inside the settling
callback: the world uses it to note where every region stood at the moment a write's
acknowledgement wait ended.
"""


class Wait:
    """One thing a request waits for: settled once, with a value (None for a timeout or a hold)."""
    __slots__ = ("settled", "value", "task", "_driver")

    def __init__(self, driver: "Driver"):
        self.settled = False
        self.value = None
        self.task = None                # the Task parked on it, once its coroutine yielded it
        self._driver = driver

    def settle(self, value=None) -> None:
        if self.settled:
            return
        self.settled = True
        self.value = value
        task = self.task
        if task is not None:
            if task.on_wake is not None:
                task.on_wake(value)
            self._driver.resume(task)

    def __await__(self):
        if not self.settled:
            yield self
        return self.value


class Task:
    """One request's coroutine, stepped by the driver until it returns; on_done(its result)."""
    __slots__ = ("coro", "on_done", "on_wake", "done")

    def __init__(self, coro, on_done, on_wake=None):
        self.coro = coro
        self.on_done = on_done
        self.on_wake = on_wake
        self.done = False

    def step(self) -> None:
        try:
            wait = self.coro.send(None)
        except StopIteration as stop:
            self.done = True
            self.on_done(stop.value)
            return
        if not isinstance(wait, Wait):
            raise TypeError(f"a request in the simulator may await only the simulator's waits, not {wait!r}")
        wait.task = self


class Driver:
    """The simulator's Waits (service/waits.py), and the starter of request coroutines."""
    __slots__ = ("clock", "scheduler")

    def __init__(self, clock, scheduler):
        self.clock = clock
        self.scheduler = scheduler

    def start(self, coro, on_done, on_wake=None) -> Task:
        """Run coro's first step now; on_done(result) when it returns (perhaps before this does)."""
        task = Task(coro, on_done, on_wake)
        task.step()
        return task

    def resume(self, task: Task) -> None:
        self.scheduler.call_at(self.clock.now_ms(), task.step)

    # ---- the Waits protocol ----------------------------------------------------------------
    def until(self, register, timeout_ms: int) -> Wait:
        wait = Wait(self)
        self.scheduler.call_at(self.clock.now_ms() + timeout_ms, wait.settle, None)
        register(wait.settle)
        return wait

    def hold(self, delay_ms: int) -> Wait:
        wait = Wait(self)
        self.scheduler.call_at(self.clock.now_ms() + delay_ms, wait.settle, None)
        return wait

    def turn(self) -> Wait:
        return self.hold(0)

    def soon(self, fn) -> None:
        self.scheduler.call_at(self.clock.now_ms(), fn)
