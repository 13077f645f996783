"""What a request may wait for, and who does the waiting.

The request layer never touches an event loop, a socket or the wall clock. The few places where a
request waits — a write until a quorum acknowledges it, a read until its region catches up with
the session or the strong LSN it needs, a reply a latency fault holds, a long query between its
slices — ask the surface that runs it, through the object below, which each Service is given:

* the runtime's (runtime/waits.py) waits on the asyncio loop, in real time;
* the simulator's (sim/driver.py) waits on the core scheduler, in virtual time, and drives the
  request coroutines itself.

So the simulator runs the same request code as the gateway and direct mode, not a copy of it.
"""
from typing import Awaitable, Callable, Protocol


class Waits(Protocol):
    def until(self, register: Callable, timeout_ms: int) -> Awaitable:
        """An awaitable of what `register`'s callback reports (register(settle) is called once,
        settle(value) may be called any number of times), or of None after timeout_ms."""

    def hold(self, delay_ms: int) -> Awaitable:
        """An awaitable done after delay_ms."""

    def turn(self) -> Awaitable:
        """An awaitable done once every other ready request has had its turn."""

    def soon(self, fn: Callable) -> None:
        """Run fn on a later turn (after the requests ready now)."""
