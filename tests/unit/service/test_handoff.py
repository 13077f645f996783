"""A surface (the HTTP gateway, direct mode) runs a request's first step itself and hands the
rest to a task (service/handoff.py `carry_on`). The handoff must be a native coroutine, which is all that
create_task accepts from Python 3.12 on (CI runs 3.11, which also takes generators), and it
must deliver results, exceptions and cancellation as if the task had run the handler whole."""
import asyncio
import types

import pytest

from regionlab.emulator.service.handoff import carry_on


def _started(coro):
    """(coro, what its first step yielded), as Connection._run leaves them."""
    return coro, coro.send(None)


def test_the_handoff_is_a_native_coroutine_that_finishes_the_handler():
    async def main():
        loop = asyncio.get_running_loop()
        fut, second = loop.create_future(), loop.create_future()

        async def handler():
            got = await fut
            return got + await second        # a second suspension, relayed too
        rest = carry_on(*_started(handler()))
        assert isinstance(rest, types.CoroutineType)
        task = loop.create_task(rest)
        fut.set_result(41)
        loop.call_soon(second.set_result, 1)
        return await task
    assert asyncio.run(main()) == 42


def test_an_exception_after_the_handoff_reaches_the_task():
    async def main():
        fut = asyncio.get_running_loop().create_future()

        async def handler():
            await fut
            raise ValueError("after the first step")
        task = asyncio.get_running_loop().create_task(carry_on(*_started(handler())))
        fut.set_result(None)
        with pytest.raises(ValueError, match="after the first step"):
            await task
    asyncio.run(main())


def test_cancelling_the_task_cancels_the_handler_where_it_waits():
    async def main():
        fut = asyncio.get_running_loop().create_future()
        seen = []

        async def handler():
            try:
                await fut
            except asyncio.CancelledError:
                seen.append("cancelled in the handler")
                raise
        loop = asyncio.get_running_loop()
        task = loop.create_task(carry_on(*_started(handler())))
        loop.call_soon(task.cancel)          # after the task's first step: it waits in the handler
        with pytest.raises(asyncio.CancelledError):
            await task
        return seen
    assert asyncio.run(main()) == ["cancelled in the handler"]
