"""One foreground step process with a deadline that holds whether or not it prints.

`run_with_deadline(argv, ...)` starts the step in its own session (so its process group is
its own: children and grandchildren included), pumps its merged stdout/stderr line by line to
`on_line` from a reader thread, and waits with the deadline. On expiry — or if the caller is
interrupted — the whole group gets SIGTERM, then SIGKILL after a grace period, and
`StepTimeout` is raised. After a normal exit, processes the step left behind in its group are
ended the same way: a runner ends what it started, and nothing else.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import IO

GRACE_S = 5.0


class StepTimeout(RuntimeError):
    def __init__(self, timeout_s: float, pgid: int) -> None:
        super().__init__(f"timed out after {timeout_s:g}s; its process group {pgid} was killed")
        self.timeout_s, self.pgid = timeout_s, pgid


def end_group(pgid: int, grace_s: float = GRACE_S, reap: Callable[[], object] | None = None) -> bool:
    """SIGTERM the group, SIGKILL what is left after `grace_s`; False if the group was gone.
    `reap` (the leader's `poll`) lets a leader that exited stop counting as alive."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    pause = threading.Event()
    for _ in range(int(grace_s / 0.1)):
        if reap is not None:
            reap()
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        pause.wait(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    return True


def _pump(stream: IO[bytes], on_line: Callable[[str], None]) -> None:
    for raw in stream:
        on_line(raw.decode(errors="replace").rstrip("\n"))


def run_with_deadline(argv: Sequence[str], *, env: Mapping[str, str], cwd: str | None, timeout_s: float,
                      on_line: Callable[[str], None]) -> int:
    """The step's exit status; `StepTimeout` if it ran past `timeout_s` (its group is killed)."""
    proc = subprocess.Popen(list(argv), env=dict(env), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    assert proc.stdout is not None
    reader = threading.Thread(target=_pump, args=(proc.stdout, on_line), daemon=True)
    reader.start()
    try:
        code = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        end_group(proc.pid, reap=proc.poll)
        proc.wait()
        raise StepTimeout(timeout_s, proc.pid) from None
    finally:
        if proc.poll() is None:  # interrupted (KeyboardInterrupt): end the step too
            end_group(proc.pid, reap=proc.poll)
            proc.wait()
        end_group(proc.pid, grace_s=1.0)  # leftovers of a finished step, if any
        reader.join(timeout=5.0)
        proc.stdout.close()
    return code
