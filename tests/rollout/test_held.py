"""Contexts a rollout function holds open across calls: entered and exited by one task of their
own, whichever call's task asked, and closed last first."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator

import pytest

from adapter.rollout.held import HeldContexts


@contextlib.asynccontextmanager
async def traced(name: str, log: list[tuple[str, str, asyncio.Task[object] | None]]) -> AsyncIterator[str]:
    log.append(("enter", name, asyncio.current_task()))
    try:
        yield name
    finally:
        log.append(("exit", name, asyncio.current_task()))


async def test_contexts_entered_from_two_calls_are_exited_last_first_by_the_task_that_entered_them() -> None:
    held, log = HeldContexts(), []
    first = await asyncio.create_task(held.enter(traced("serving", log)))  # each call is its own task
    second = await asyncio.create_task(held.enter(traced("bridge", log)))
    assert (first, second) == ("serving", "bridge") and held.usable()
    await held.aclose()
    assert [(kind, name) for kind, name, _ in log] == [("enter", "serving"), ("enter", "bridge"),
                                                       ("exit", "bridge"), ("exit", "serving")]
    assert len({id(task) for *_, task in log}) == 1  # one holder task: an anyio cancel scope would allow it
    assert not held.usable() and held.loop is None


async def test_a_context_that_fails_to_enter_raises_in_the_caller_and_the_holder_goes_on() -> None:
    @contextlib.asynccontextmanager
    async def broken() -> AsyncIterator[None]:
        raise OSError("port taken")
        yield

    held, log = HeldContexts(), []
    await held.enter(traced("serving", log))
    with pytest.raises(OSError, match="port taken"):
        await held.enter(broken())
    assert await held.enter(traced("bridge", log)) == "bridge"
    await held.aclose()
    assert [kind for kind, *_ in log] == ["enter", "enter", "exit", "exit"]


def test_a_holder_of_a_finished_loop_is_not_usable_on_the_next_one() -> None:
    held, log = HeldContexts(), []

    async def call() -> bool:
        usable = held.usable()
        await held.enter(traced("serving", log))
        return usable

    assert asyncio.run(call()) is False  # the first call opens
    assert asyncio.run(call()) is False  # a new loop: the old holder died with its loop, a new one opens
    # each loop's end cancelled its holder, which exited what it held
    assert [kind for kind, *_ in log] == ["enter", "exit", "enter", "exit"]


def test_a_holder_on_a_loop_in_another_thread_is_closed_from_outside_it() -> None:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    held, log = HeldContexts(), []
    try:
        asyncio.run_coroutine_threadsafe(held.enter(traced("serving", log)), loop).result(10)
        assert held.loop is loop
        asyncio.run_coroutine_threadsafe(held.aclose(), loop).result(10)
        assert [kind for kind, *_ in log] == ["enter", "exit"]
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
