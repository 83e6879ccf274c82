"""A command that runs episodes ends on SIGTERM as it does on Ctrl-C.

`run(main)` is `asyncio.run(main)` with SIGTERM (what a pod eviction, `kill` and most
supervisors send) cancelling the main task, as asyncio's own SIGINT handler does: every
episode in flight is cancelled, its harness program's process group killed, its tool servers
torn down by Verifiers' runtime, the engine told to abort, and the run's resources closed, in
the `finally` blocks that an uncaught SIGTERM would skip. Either signal then surfaces as
`Interrupted`, which the entry point turns into one line and the exit status 128 + the signal.
What a run still left behind when its process ended, whatever ended it, the reaper ends
(adapter.episodes.reaper).
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class Interrupted(Exception):
    """The command was ended by a signal; its episodes were cancelled and closed."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"interrupted by {signal.Signals(signum).name}: the episodes in flight were cancelled")

    @property
    def exit_status(self) -> int:
        return 128 + self.signum


async def _cancelled_by_sigterm(main: Coroutine[Any, Any, T], received: list[int]) -> T:
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None

    def cancel() -> None:
        received.append(signal.SIGTERM)
        task.cancel()

    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        return await main
    loop.add_signal_handler(signal.SIGTERM, cancel)
    try:
        return await main
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)`, ended by SIGTERM or SIGINT as `Interrupted` (module docstring)."""
    received: list[int] = []
    try:
        return asyncio.run(_cancelled_by_sigterm(main, received))
    except KeyboardInterrupt:
        raise Interrupted(signal.SIGINT) from None
    except BaseException as exc:
        if received:
            raise Interrupted(received[0]) from exc
        raise
