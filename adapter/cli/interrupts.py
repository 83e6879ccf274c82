"""A command that runs episodes ends on SIGTERM as it does on Ctrl-C, and says so in one line.

`run(main)` is `asyncio.run(main)` with SIGTERM (what a pod eviction, `kill` and most
supervisors send) and SIGINT both cancelling the main task: every episode in flight is
cancelled, its harness program's process group killed, its tool servers torn down by Verifiers'
runtime, the engine told to abort, and the run's resources closed, in the `finally` blocks that
an uncaught SIGTERM would skip. What the cancelled work raises and logs after that (a harness
whose program was killed, a server whose model call was cut off) is expected: log records up to
ERROR are dropped from then on, and the tasks' own exceptions go to DEBUG, not to a traceback. A
second signal stops waiting for the cleanup (SIGINT raises at once, SIGTERM ends the process).
Either way the command ends with `Interrupted`, which the entry point turns into one line and
the exit status 128 + the signal. What a run still left behind when its process ended, whatever
ended it, the reaper ends (adapter.episodes.reaper).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
SIGNALS = (signal.SIGTERM, signal.SIGINT)
logger = logging.getLogger(__name__)


class Interrupted(Exception):
    """The command was ended by a signal; its episodes were cancelled and closed."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"interrupted by {signal.Signals(signum).name}: the episodes in flight were cancelled")

    @property
    def exit_status(self) -> int:
        return 128 + self.signum


def _after_interruption(_loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    logger.debug("after the interruption: %s", context.get("message"), exc_info=context.get("exception"))


async def _until_signal(main: Coroutine[Any, Any, T], received: list[int]) -> T:
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None

    def stop(signum: int) -> None:
        received.append(signum)
        if len(received) > 1:  # a second signal: stop waiting for the cleanup
            loop.remove_signal_handler(signum)  # SIGINT's default raises KeyboardInterrupt, SIGTERM's ends us
            signal.raise_signal(signum)
            return
        logging.disable(logging.ERROR)  # the cancelled work's errors (servers, libraries) are expected now
        loop.set_exception_handler(_after_interruption)
        task.cancel()

    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        return await main
    for signum in SIGNALS:
        loop.add_signal_handler(signum, stop, signum)
    try:
        return await main
    finally:
        for signum in SIGNALS:
            loop.remove_signal_handler(signum)


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)`, ended by SIGTERM or SIGINT as `Interrupted` (module docstring)."""
    received: list[int] = []
    try:
        return asyncio.run(_until_signal(main, received))
    except KeyboardInterrupt:  # a Ctrl-C before the loop ran, or a second one
        raise Interrupted(signal.SIGINT) from None
    except BaseException as exc:
        if received:
            raise Interrupted(received[0]) from exc
        raise
