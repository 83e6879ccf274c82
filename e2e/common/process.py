"""One foreground step process with a deadline that holds whether or not it prints.

`run_with_deadline(argv, ...)` starts the step in its own session (so its process group is
its own: children and grandchildren included), pumps its merged stdout/stderr line by line to
`on_line` from a reader thread, and waits with the deadline. On expiry — or if the caller is
interrupted — the whole group gets SIGTERM, then SIGKILL after a grace period, and
`StepTimeout` is raised. After a normal exit, processes the step left behind in its group are
ended the same way: a runner ends what it started, and nothing else.

`wait_ready(ready, Watched(process, log, what, port=...), timeout_s=...)` is the one wait every
lane uses for a server it started (SGLang, the reference and stub engines, smg, Ray, the runner's
background steps): it polls `ready()` and returns the seconds it took, but fails at once, with
the exit status and the last LOG_TAIL_LINES lines of the server's log, when the server exits;
when its log says it could not bind `port` while it stays alive (uvicorn logs "address already
in use" and SGLang's main process then waits on its children), naming the port and its holder;
and only otherwise at `timeout_s`. So a server that cannot start fails its lane within seconds.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from e2e.common.ports import port_holder

GRACE_S = 5.0
LOG_TAIL_LINES = 40
_BIND_FAILED = re.compile(r"address already in use|error while attempting to bind", re.IGNORECASE)


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


def log_tail(path: Path, lines: int = LOG_TAIL_LINES, *, offset: int = 0) -> str:
    """The last `lines` lines of `path` from byte `offset` on (a reused log: this run's part)."""
    try:
        with path.open("rb") as log:
            log.seek(offset)
            text = log.read().decode(errors="replace")
    except OSError as exc:
        return f"(cannot read {path}: {exc})"
    return "\n".join(text.splitlines()[-lines:])


class ServerNotReady(RuntimeError):
    """A server a lane started exited, could not bind its port, or was not ready in time."""


@dataclass(frozen=True)
class Watched:
    """A started server `wait_ready` watches: its process, its log (read from `log_offset` on),
    what to call it in a message, and the port it must bind (None: not known)."""

    process: subprocess.Popen[bytes]
    log: Path
    what: str
    port: int | None = None
    log_offset: int = 0


class _LogScan:
    """New complete lines of a log, read incrementally (a poll reads only what was appended)."""

    def __init__(self, path: Path, offset: int) -> None:
        self.path, self.offset, self._partial = path, offset, b""

    def new_lines(self) -> list[str]:
        try:
            with self.path.open("rb") as log:
                log.seek(self.offset)
                chunk = log.read()
        except OSError:
            return []
        self.offset += len(chunk)
        *lines, self._partial = (self._partial + chunk).split(b"\n")
        return [line.decode(errors="replace") for line in lines]


def _bind_failure(line: str, port: int) -> bool:
    return bool(_BIND_FAILED.search(line)) and re.search(rf"(?<!\d){port}(?!\d)", line) is not None


def _parent(pid: int) -> int:
    try:  # /proc/PID/stat: "pid (comm) state ppid ..."; comm may hold spaces and parentheses
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def _held_by_own(port: int, pid: int) -> bool:
    """Whether the visible holder of `port` is process `pid` or one of its descendants (a
    server that bound its port after all: a logged bind failure was some other attempt's)."""
    holder = port_holder(port)
    if holder is None or not holder.startswith("pid "):
        return False
    current = int(holder.split()[1])
    for _ in range(64):  # a parent chain is short; never loop on a racing /proc
        if current == pid:
            return True
        if current <= 1:
            return False
        current = _parent(current)
    return False


def wait_ready(ready: Callable[[], bool], watched: Watched | Sequence[Watched], *, timeout_s: float,
               poll_s: float = 0.5, error: Callable[[str], Exception] = ServerNotReady) -> float:
    """Seconds until `ready()` held. Fails with `error(message)` — the message names the server,
    and ends with its log's path and last LOG_TAIL_LINES lines — as soon as a watched process has
    exited (its exit status), or its log reports that its `port` is in use and neither it nor a
    descendant holds that port (the port and its holder, when visible); else after `timeout_s`."""
    servers = [watched] if isinstance(watched, Watched) else list(watched)
    scans = [_LogScan(server.log, server.log_offset) for server in servers]
    started = time.monotonic()
    pause = threading.Event()

    def fail(server: Watched, why: str) -> Exception:
        return error(f"{server.what} {why}; log {server.log}:\n{log_tail(server.log, offset=server.log_offset)}")

    while True:
        for server, scan in zip(servers, scans, strict=True):
            code = server.process.poll()
            if code is not None:
                raise fail(server, f"exited with status {code} after {time.monotonic() - started:.1f}s, "
                                   "before it was ready")
            port = server.port
            if port is not None and any(_bind_failure(line, port) for line in scan.new_lines()) \
                    and not _held_by_own(port, server.process.pid):
                holder = port_holder(port) or "a holder not visible here"
                raise fail(server, f"could not bind port {port}: it is in use, by {holder} "
                                   f"(the server is still running, pid {server.process.pid}, and would never be ready)")
        if ready():
            return time.monotonic() - started
        if time.monotonic() - started >= timeout_s:
            names = " and ".join(server.what for server in servers) or "the server"  # none watched: none started
            logs = "".join(f"; log {server.log} (pid {server.process.pid}, still running):\n"
                           f"{log_tail(server.log, offset=server.log_offset)}" for server in servers)
            raise error(f"{names} was not ready within {timeout_s:g}s: timed out while it was still starting "
                        f"(a busy machine may need a longer start timeout){logs}")
        pause.wait(poll_s)
