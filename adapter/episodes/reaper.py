"""What this process' episodes start does not outlive it, however it ends.

Verifiers' subprocess runtime starts every harness program and per-rollout tool server in a
session of its own, so a signal that ends the adapter's process (a pod eviction's SIGTERM, a
SIGKILL) reaches none of them, and nothing else ends them. The pre-forked runtime's zygotes and
their children die with this process (adapter.episodes.zygotes); this covers every runtime.

`ensure()` (called before an env is loaded: `GenerationSpec.load`) starts, once per process,
the reaper (`reaper_program.py`, stdlib only, `python -I -S`: a few ms) and puts
`VF_SGLANG_RUN_MARK=<pid>.<random>` into this process' environment, so that everything started
from then on, and everything that starts, inherits it. When this process is gone, the reaper
kills every process still carrying the mark (module docstring there). A process that inherited
another owner's mark (a `vf-sglang` run started by a Miles worker, a test) marks its own with a
mark of its own: each owner's reaper ends what that owner left, once the owner is gone.
"""

from __future__ import annotations

import os
import secrets
import sys
import threading
from pathlib import Path

from adapter.episodes.reaper_program import MARK_VAR

PROGRAM = Path(__file__).with_name("reaper_program.py")
_LOCK = threading.Lock()
# this process' pid → (its reaper's pid, the pipe's end it keeps open for life); a fork starts its own
_REAPERS: dict[int, tuple[int, int]] = {}


def _running(pid: int) -> bool:
    try:
        return os.waitpid(pid, os.WNOHANG) == (0, 0)
    except ChildProcessError:
        return False


def ensure() -> str:
    """Start this process' reaper if it has none running; the mark its descendants carry."""
    with _LOCK:
        known = _REAPERS.get(os.getpid())
        mark = os.environ.get(MARK_VAR, "")
        if known is not None and _running(known[0]) and mark.startswith(f"{os.getpid()}."):
            return mark
        if known is not None:
            os.close(known[1])
        mark = f"{os.getpid()}.{secrets.token_hex(8)}"
        env = {name: value for name, value in os.environ.items() if name != MARK_VAR}
        read, write = os.pipe()  # both close-on-exec: only the reaper's stdin (a dup) reaches it
        try:
            pid = os.posix_spawn(sys.executable, [sys.executable, "-I", "-S", str(PROGRAM), mark, str(os.getpid())],
                                 env, file_actions=[(os.POSIX_SPAWN_DUP2, read, 0),
                                                    (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)],
                                 setsid=True)
        except BaseException:
            os.close(write)
            raise
        finally:
            os.close(read)
        _REAPERS[os.getpid()] = (pid, write)
        os.environ[MARK_VAR] = mark
        return mark
