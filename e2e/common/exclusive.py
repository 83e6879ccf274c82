"""One machine-wide turn for work that must not share the CPU with its twin in the lane beside it.

CI runs sglang-cpu and sglang-cpu-0516 side by side, each with its own SGLang server on the same two
cores. Their abort tests decode long answers on purpose (the aborts must land on requests in
flight); with 600-token answers, measured: 58 s alone, 88 s beside a lighter step, 811 s and 909+ s
when both lanes ran that test at once (two CPU servers each oversubscribing both cores); with the
160-token answers it decodes now, 22 s alone and 100 s beside a CPU hog on both cores.
`machine_turn(name)` takes an exclusive `flock` on `<tmp>/vf-sglang-locks/<name>.lock` (the kernel
releases it when its holder exits, so a killed lane never leaves it taken): the twin waits its turn
instead of slowing both.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

_ENV = "VF_SGLANG_LOCKS_DIR"


class TurnTimeoutError(RuntimeError):
    """The lock stayed taken past the wait allowed (its holder hung)."""


def locks_dir() -> Path:
    """$VF_SGLANG_LOCKS_DIR, else <tmp>/vf-sglang-locks (one per machine)."""
    named = os.environ.get(_ENV)
    return Path(named) if named else Path(tempfile.gettempdir()) / "vf-sglang-locks"


@contextlib.contextmanager
def machine_turn(name: str, *, wait_s: float, poll_s: float = 0.5) -> Iterator[float]:
    """Hold the machine-wide lock `name`; yields the seconds waited for it. Raises
    `TurnTimeoutError` naming the lock file when it is still taken after `wait_s`."""
    where = locks_dir()
    where.mkdir(parents=True, exist_ok=True)
    path = where / f"{name}.lock"
    started = time.monotonic()
    with path.open("a") as handle:
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() - started > wait_s:
                    raise TurnTimeoutError(f"{path} is still held after {wait_s:.0f} s (by a hung lane?)") from None
                time.sleep(poll_s)
        try:
            yield time.monotonic() - started
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
