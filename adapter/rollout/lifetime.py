"""The one owner of a rollout function's lifetime: what its calls open, closed in one place, once.

    lifetime = RunLifetime(engine)           adopts the run's engine session: it closes it
    lifetime.engine                          that session (on the loop the lifetime is open on)
    lifetime.engine_for(url)                 another address' session (a snapshot eval's router),
                                             built here on first use and closed here
    await lifetime.hold(key, open_context)   `open_context()` entered once per key (None: nothing
                                             to enter) and held open across calls by one task
                                             (`adapter.rollout.held`); returns what it yielded
    lifetime.on_close(undo)                  a synchronous undo run at close (what loading the run's
                                             environment changed for the process, its zygotes)
    @a_call                                  a train or eval method of an object with a
                                             `lifetime`: in flight, `aclose()` cancels it first
    await lifetime.aclose()                  close everything, once
    close_all()                              interpreter exit: the adapter's one `atexit`

What it holds, in the order it closes them (last opened first): the bridge clients and their
served ports, the env's sized servings, the env's serving (all `hold`), then every engine
session, then the undos (last registered first). The CLI (`vf-sglang rollout`, `demo`,
`check`), the Miles class ABI and the legacy ABI (through the class) reach it the same way:
build it around the run's engine session, hand it to `adapter.rollout.job.prepare_orchestrator`,
close it when the run ends (`async with`, or `aclose()` when Miles' run ends).

States (`state`):

    new ──hold() on loop L──▶ open(L) ──hold() on L──▶ open(L)
     │                         │ │
     │                         │ ├─ hold() on loop M after L ended ──▶ open(M): L's end cancelled the
     │                         │ │    holder, which exited what it held and closed the engine sessions;
     │                         │ │    they are reopened explicitly (`EngineSession.reopened`), warned
     │                         │ ├─ hold() on loop M while L runs ──▶ RolloutFunctionClosedError
     │                         │ │    (what it holds lives on L: call there, or aclose() there first)
     │                         │ └─ aclose() on L, or close_all() at exit while L runs ─┐
     └─ aclose() ───────────────────────────────────────────────────────────────────────┴─▶ closed
    closed: hold() and engine → RolloutFunctionClosedError; aclose() does nothing.

The undos are the loaded environment's (`EpisodeBackend.release`, registered by
`adapter.rollout.job.prepare_orchestrator`): the harness programs it held to the host's versions
and, once no other loaded environment runs pre-forked, the zygotes and the runtime plug
(`adapter.episodes.prefork.release`).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import logging
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Iterator
from contextlib import AbstractAsyncContextManager
from typing import Any, Literal, ParamSpec, TypeVar

from adapter.engine.session import EngineSession
from adapter.errors import RolloutFunctionClosedError
from adapter.rollout.held import HeldContexts

logger = logging.getLogger(__name__)

State = Literal["new", "open", "closed"]
P = ParamSpec("P")
T = TypeVar("T")

# Every lifetime not yet garbage-collected: `close_all()` closes those still open at exit.
_LIVE: weakref.WeakSet[RunLifetime] = weakref.WeakSet()


class RunLifetime:
    """See the module docstring."""

    def __init__(self, engine: EngineSession, *, name: str = "vf-sglang rollout function") -> None:
        self._engine = engine
        self._others: dict[str, EngineSession] = {}
        self._held = HeldContexts(name)
        self._values: dict[Hashable, Any] = {}  # what each key's context yielded, on the open loop
        self._undos: list[Callable[[], None]] = []
        self._calls: set[asyncio.Task[Any]] = set()  # train/eval calls in flight (`a_call`)
        self._opened = False  # held something on some loop (a later loop reopens the sessions)
        self._closed = False
        _LIVE.add(self)

    @property
    def state(self) -> State:
        if self._closed:
            return "closed"
        return "open" if self._held.loop is not None else "new"

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The loop what the lifetime holds lives on (None: nothing held)."""
        return self._held.loop

    @property
    def engine(self) -> EngineSession:
        self._refuse_if_closed()
        return self._engine

    def engine_for(self, url: str) -> EngineSession:
        """The run's session for its own address; another address' own session, made once."""
        self._refuse_if_closed()
        url = url.rstrip("/")
        if url == self._engine.url:
            return self._engine
        if url not in self._others:
            self._others[url] = self._engine.sibling(url)
        return self._others[url]

    def on_close(self, undo: Callable[[], None]) -> None:
        self._undos.append(undo)

    async def hold(self, key: Hashable,
                   open_context: Callable[[], AbstractAsyncContextManager[Any] | None]) -> Any:
        """What `open_context()` yielded, entered the first time `key` is asked for on this loop."""
        self._refuse_if_closed()
        if not self._held.usable():
            await self._open_here()
        if key not in self._values:
            context = open_context()
            self._values[key] = None if context is None else await self._held.enter(context)
        return self._values[key]

    async def aclose(self) -> None:
        """Close what the calls held (on the loop that holds it), then the engine sessions not
        closed with it, then run the undos. Once: the lifetime stays closed."""
        if self._closed:
            return
        self._closed = True
        await self._end_calls()
        try:
            await self._held.aclose()
        finally:
            self._values = {}
            try:
                await self._close_engines()
            finally:
                undos, self._undos = self._undos, []
                for undo in reversed(undos):
                    undo()

    async def _end_calls(self) -> None:
        """Cancel the calls still in flight on this loop and wait for them: their episodes end and
        the engine drops their requests (the orchestrator's own cancellation) before what they use
        closes (an interpreter exit mid-call, a Ctrl-C in Miles' driver)."""
        running, current = asyncio.get_running_loop(), asyncio.current_task()
        calls = [task for task in self._calls if task is not current and task.get_loop() is running]
        for task in calls:
            task.cancel()
        await asyncio.gather(*calls, return_exceptions=True)

    @contextlib.contextmanager
    def _in_flight(self) -> Iterator[None]:
        task = asyncio.current_task()
        assert task is not None
        self._calls.add(task)
        try:
            yield
        finally:
            self._calls.discard(task)

    async def __aenter__(self) -> RunLifetime:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    def _refuse_if_closed(self) -> None:
        if self._closed:
            raise RolloutFunctionClosedError("the rollout function was closed (aclose()): what it held is gone; "
                                             "build a new one for another run")

    async def _open_here(self) -> None:
        """Open on the running loop: the first call, or a call after the loop that held everything ended."""
        running = asyncio.get_running_loop()
        held_on = self._held.loop
        if held_on is not None and held_on is not running and held_on.is_running():
            raise RolloutFunctionClosedError(
                "the rollout function is called on a second event loop while the loop holding its bridge and the "
                "env's serving still runs in another thread: call it on that loop, or aclose() it there first")
        if self._opened:
            logger.warning("the rollout function is called on a new event loop: its engine sessions, bridge and the "
                           "env's serving are opened again there (close it with aclose() on the loop that used it)")
            self._engine = self._engine.reopened()
            self._others = {url: session.reopened() for url, session in self._others.items()}
        self._values, self._opened = {}, True
        await self._held.enter(self._engines_closed_last())

    @contextlib.asynccontextmanager
    async def _engines_closed_last(self) -> AsyncIterator[None]:
        """Entered first by the holder, so exited last: the engine sessions close with what the
        calls held, also when their loop ends without `aclose()` (its end cancels the holder)."""
        try:
            yield
        finally:
            await self._close_engines()

    async def _close_engines(self) -> None:
        for session in [self._engine, *self._others.values()]:
            if not session.closed:
                await session.aclose()


def a_call(method: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """Mark an async method of an object with a `lifetime` as one train or eval call: while it
    runs, its lifetime's `aclose()` cancels it before closing what it uses."""

    @functools.wraps(method)
    async def call(*args: P.args, **kwargs: P.kwargs) -> T:
        lifetime: RunLifetime = args[0].lifetime  # type: ignore[attr-defined]
        with lifetime._in_flight():
            return await method(*args, **kwargs)

    return call


def close_all(timeout: float = 30.0) -> None:
    """At interpreter exit: close every lifetime still holding something open on an event loop
    that still runs in another thread (Miles' background loop, the legacy ABI's loop). One on a
    finished loop cannot be reached any more; its resources end with the process."""
    for lifetime in list(_LIVE):
        loop = lifetime.loop
        if lifetime.state != "open" or loop is None or loop.is_closed() or not loop.is_running():
            continue
        try:
            asyncio.run_coroutine_threadsafe(lifetime.aclose(), loop).result(timeout)
        except Exception as exc:  # at exit: say so, and go on closing the others
            logger.warning("closing a rollout function at exit failed: %s: %s", type(exc).__name__, exc)


atexit.register(close_all)
