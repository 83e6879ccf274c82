"""Interrupt a process mid-run and find what it left running: every process started for a test
carries `VF_SGLANG_TEST_MARK=<random>` in its environment (inherited by everything it starts,
whatever session it runs in), so what is left is read off `/proc` after the process ended."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

TEST_MARK = "VF_SGLANG_TEST_MARK"
# How long what a process left may take to end after it exited (the reaper's sweep takes a few
# hundred ms; a harness program left behind lives on until something kills it)
SETTLE_S = 5.0
# An interrupted run's exit after a signal it handles: about 1–3 s on an idle machine; the bound
# leaves room for a machine loaded by other work (the tool servers' teardown waits on processes
# that are slow to end when the cores are busy).
EXIT_BOUND_S = 30


def marked(mark: str) -> list[int]:
    """The live processes whose environment holds `VF_SGLANG_TEST_MARK=mark`."""
    entry = f"{TEST_MARK}={mark}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if entry in (proc / "environ").read_bytes().split(b"\0"):
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:200]
    except OSError:
        return "(gone)"


@dataclass
class Interrupted:
    status: int  # the process' exit status (minus the signal that killed it)
    seconds_to_exit: float  # from the signal sent to the process reaped
    in_flight: int  # marked processes alive when the signal was sent (the process itself included)
    left: list[str]  # command lines of marked processes still alive SETTLE_S after it exited
    stderr: str


def interrupt(argv: list[str], sig: int, stderr: Path, *, at_least: int, timeout: float = 180.0) -> Interrupted:
    """Start `argv`, send `sig` once `at_least` marked processes run, and report what it left."""
    mark = secrets.token_hex(8)
    with stderr.open("wb") as err:  # a file: a process it left would hold a pipe open
        process = subprocess.Popen(argv, env={**os.environ, TEST_MARK: mark}, stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + timeout
        while len(marked(mark)) < at_least:
            assert process.poll() is None, f"exited {process.returncode} first: {stderr.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"fewer than {at_least} processes in flight after {timeout} s"
            time.sleep(0.2)
        in_flight = len(marked(mark))
        process.send_signal(sig)
        sent = time.monotonic()
        status = process.wait(60)
        seconds = time.monotonic() - sent
        settle = time.monotonic() + SETTLE_S
        while marked(mark) and time.monotonic() < settle:
            time.sleep(0.2)
        left = [_cmdline(pid) for pid in marked(mark)]
        return Interrupted(status, seconds, in_flight, left, stderr.read_text())
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for pid in marked(mark):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

