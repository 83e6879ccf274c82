"""The real SGLang router (`smg`) in front of engines, as processes a test or a benchmark starts.

    smg_binary()                    the `smg` executable: $VF_SGLANG_SMG, else beside this Python
                                    (the router lane installs smg into its env), else on PATH; None
    free_port()                     a loopback port no other lane holds (`e2e.common.ports`)
    Started(argv, log)              one process in its own session (its pgid is its pid), output to
                                    `log`; `end()` ends its whole group (SIGTERM, then SIGKILL),
                                    `kill()` SIGKILLs it at once (a worker dying mid-run)
    reference_engine(port, log)     `python -m adapter.cli engine --port P` (the tiny model), ready
    stub_engine(port?, log, ...)    `python -m benchmarks.stub` (an instant or failing stub), ready
    smg_router(workers, log, ...)   `smg launch` on loopback in front of `workers`, every worker
                                    healthy; Prometheus bound to loopback on a free port;
                                    `ADAPTER_FLAGS` (`--disable-retries`) unless told otherwise

Every wait for readiness is `e2e.common.process.wait_ready`: it ends at once, with the log's
tail, when the process exits or logs that its port is taken (`ServerNotReady`, a RuntimeError).
Everything listens on 127.0.0.1. Nothing here looks a process up by name: each helper ends the
process group it started, and only that one (`e2e.common.process.end_group`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx

from e2e.common.ports import ensure_port_free, free_port
from e2e.common.process import LOG_TAIL_LINES, Watched, end_group, log_tail, wait_ready

SMG_VERSION = "1.13.0"
LOOPBACK = "127.0.0.1"
# What the adapter expects of the router (docs/router.md): no retries of its own, so the
# adapter's per-turn attempt budget is the number of worker calls.
ADAPTER_FLAGS = ("--disable-retries",)
ENGINE_READY = "reference engine ready at "
STUB_READY = "stub ready at "


def smg_binary() -> str | None:
    named = os.environ.get("VF_SGLANG_SMG")
    if named:
        return named
    beside = Path(sys.executable).with_name("smg")
    return str(beside) if beside.exists() else shutil.which("smg")


class Started:
    """A process in its own session, writing to `log`; ended by its process group."""

    def __init__(self, argv: Sequence[str], log: Path, *, env: dict[str, str] | None = None) -> None:
        self.argv, self.log = list(argv), log
        log.parent.mkdir(parents=True, exist_ok=True)
        self._offset = log.stat().st_size if log.exists() else 0  # a reused log: read only this run's lines
        with log.open("ab") as out:
            self.process = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                            env={**os.environ, **(env or {})})
        self.url = ""

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def watched(self, what: str, port: int | None = None) -> Watched:
        """This process as `e2e.common.process.wait_ready` watches it (this run's part of the log)."""
        return Watched(self.process, self.log, what, port=port, log_offset=self._offset)

    def wait_for_line(self, prefix: str, timeout: float, port: int | None = None) -> str:
        """The rest of the first log line starting with `prefix` (its first word: a URL); fails at
        once, with the log's tail, if the process exits or logs that it cannot bind `port`."""
        found: list[str] = []

        def printed() -> bool:
            found.extend(line[len(prefix):].split()[0] for line in self._output().splitlines()
                         if line.startswith(prefix))
            return bool(found)

        wait_ready(printed, self.watched(f"{self.argv[0]} (to print {prefix!r})", port), timeout_s=timeout,
                   poll_s=0.2)
        return found[0]

    def _output(self) -> str:
        with self.log.open("rb") as log:
            log.seek(self._offset)
            return log.read().decode(errors="replace")

    def tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return log_tail(self.log, lines, offset=self._offset)

    def kill(self) -> None:
        """SIGKILL the group now: the process dies as a crashed worker does, mid-request."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def end(self) -> None:
        end_group(self.pid, reap=self.process.poll)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=30)


@contextlib.contextmanager
def started(process: Started) -> Iterator[Started]:
    try:
        yield process
    finally:
        process.end()


def _ready(argv: list[str], log: Path, marker: str, timeout: float, port: int | None = None) -> Started:
    """`argv` started, its URL read from the line after `marker`; ended if it never gets there."""
    if port:
        ensure_port_free(port, LOOPBACK, what="python " + " ".join(argv[1:4]))
    process = Started(argv, log)
    try:
        process.url = process.wait_for_line(marker, timeout, port or None)
    except BaseException:
        process.end()
        raise
    return process


def reference_engine(port: int, log: Path, *, timeout: float = 300.0) -> Started:
    """The project's reference engine on the tiny model at `port`, ready (loading torch: slow)."""
    return _ready([sys.executable, "-m", "adapter.cli", "engine", "--port", str(port)], log, ENGINE_READY, timeout,
                  port)


def stub_engine(log: Path, *, delay: float = 0.0, status: int = 200, timeout: float = 60.0) -> Started:
    """The benchmarks' stub engine (`benchmarks.stub`): `status` != 200 makes every /generate fail."""
    return _ready([sys.executable, "-m", "benchmarks.stub", "--delay", str(delay), "--status", str(status)], log,
                  STUB_READY, timeout)


def smg_argv(workers: Sequence[str], port: int, *, policy: str, extra: Sequence[str] = ADAPTER_FLAGS) -> list[str]:
    binary = smg_binary()
    if binary is None:
        raise RuntimeError(f"smg is not installed: pip install smg=={SMG_VERSION} (tox -e router installs it)")
    return [binary, "launch", "--host", LOOPBACK, "--port", str(port), "--worker-urls", *workers,
            "--policy", policy, "--prometheus-host", LOOPBACK, "--prometheus-port", str(free_port()),
            "--log-level", "warn", *extra]


def smg_router(workers: Sequence[str], log: Path, *, policy: str = "consistent_hashing",
               extra: Sequence[str] = ADAPTER_FLAGS, timeout: float = 60.0) -> Started:
    """`smg launch` in front of `workers`, returned once it lists every one of them healthy."""
    port = free_port()
    router = Started(smg_argv(workers, port, policy=policy, extra=extra), log)
    router.url = f"http://{LOOPBACK}:{port}"
    try:
        _wait_healthy(router, len(workers), timeout, port)
    except BaseException:
        router.end()
        raise
    return router


def healthy_workers(url: str) -> list[str]:
    """The workers the router at `url` lists as healthy."""
    with httpx.Client(timeout=5.0, trust_env=False) as http:
        listing = http.get(f"{url}/workers").json()
    return [w["url"] for w in listing.get("workers", []) if w.get("is_healthy")]


def _wait_healthy(router: Started, count: int, timeout: float, port: int | None = None) -> None:
    def listed() -> bool:
        with contextlib.suppress(httpx.HTTPError, ValueError):
            return len(healthy_workers(router.url)) == count
        return False

    wait_ready(listed, router.watched(f"smg at {router.url} (to list {count} healthy workers)", port),
               timeout_s=timeout, poll_s=0.2)
