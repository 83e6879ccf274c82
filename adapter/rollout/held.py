"""Async contexts held open across calls: entered and exited by one task of their own.

    HeldContexts.enter(cm) -> value   enter `cm` in the holder's task (started on first use) and
                                       return what it yields; it stays open until `aclose()`
    HeldContexts.aclose()             exit everything entered, last first, in that same task
    HeldContexts.usable()             open on the running loop (False: never opened, closed, or
                                       opened on another loop)

The mechanism under `adapter.rollout.lifetime` (the owner that decides what is held, and when it
closes). A rollout function lives for a whole run, but each Miles call is its own task. Generation B's
served bridge and `env.serving()` must outlive the call that opened them, and a context that
holds an anyio cancel scope (Verifiers' serving may) must be exited by the task that entered
it: so a holder task enters each context, parks until closed, and exits them itself.
"""

from __future__ import annotations

import asyncio
import contextlib
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

_CLOSE = object()


@dataclass
class _Request:
    context: AbstractAsyncContextManager[Any]
    answer: asyncio.Future[Any]


@dataclass
class HeldContexts:
    name: str = "vf-sglang held contexts"
    _queue: asyncio.Queue[Any] | None = None
    _task: asyncio.Task[None] | None = None
    _loop: asyncio.AbstractEventLoop | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The loop the holder runs on while it holds anything."""
        return self._loop if self._task is not None and not self._task.done() else None

    def usable(self) -> bool:
        """Open, on the running loop."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            return False
        return self._task is not None and not self._task.done() and self._loop is running

    async def enter(self, context: AbstractAsyncContextManager[Any]) -> Any:
        if not self.usable():
            self._start()
        assert self._queue is not None and self._task is not None
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(_Request(context, answer))
        # the holder may die (cancelled with its loop, or a context's exit failed): never wait forever
        done, _ = await asyncio.wait({answer, self._task}, return_when=asyncio.FIRST_COMPLETED)
        if answer not in done:
            answer.cancel()
            self._task.result()  # raises what ended the holder
            raise RuntimeError(f"{self.name}: the holder ended before entering the context")
        return answer.result()

    async def aclose(self) -> None:
        """Exit every held context (last first), on the loop that holds them (`loop`); a no-op when
        nothing is held."""
        task, queue = self._task, self._queue
        self._task = self._queue = self._loop = None
        if task is None or queue is None or task.done():
            return
        queue.put_nowait(_CLOSE)
        await task

    def _start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._queue = asyncio.Queue()
        self._task = self._loop.create_task(self._hold(self._queue), name=self.name)

    @staticmethod
    async def _hold(queue: asyncio.Queue[Any]) -> None:
        async with contextlib.AsyncExitStack() as stack:
            while (request := await queue.get()) is not _CLOSE:
                try:
                    value = await stack.enter_async_context(request.context)
                except BaseException as exc:  # the caller gets the failure; the holder goes on
                    if not request.answer.done():
                        request.answer.set_exception(exc)
                    if isinstance(exc, asyncio.CancelledError):
                        raise
                    continue
                if request.answer.done():  # the caller gave up meanwhile: nobody will use it
                    continue
                request.answer.set_result(value)
