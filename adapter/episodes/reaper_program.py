"""The reaper: what a process' episodes started does not outlive it (stdlib only; run as
`python -I -S reaper_program.py MARK OWNER_PID`, by adapter.episodes.reaper).

It waits, its stdin a pipe from its owner that the owner never writes nor closes, until the
owner is gone: the pipe at EOF (the owner's files closed as it exited), or its parent no longer
the owner (it was reparented). However the owner ended (SIGTERM, SIGKILL, an interpreter exit
that skipped a cleanup, or a clean exit), what its episodes started and left running is an
orphan now: harness programs and tool servers Verifiers started in sessions of their own, and
what they started. The reaper kills, with SIGKILL, every process whose environment holds
`VF_SGLANG_RUN_MARK=MARK` (all of them inherited it from the owner) and the process group each
of them leads, scanning again until a few scans in a row find none (a dying program may fork
once more).

It runs in a session of its own (a Ctrl-C at the terminal does not reach it) and ignores SIGINT
and SIGHUP; SIGTERM ends it as usual.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time

MARK_VAR = "VF_SGLANG_RUN_MARK"
POLL_S = 1.0  # how often the owner is looked for when the pipe is silent
SWEEP_S = 10.0  # the longest a sweep goes on
QUIET_SCANS = 3  # a sweep ends after this many scans in a row find nothing


def marked(entry: bytes) -> list[int]:
    """The live processes whose environment holds `entry` (`NAME=VALUE`), this one excepted."""
    found: list[int] = []
    if not os.path.isdir("/proc"):  # no process table to read (not Linux): nothing it can find
        return found
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as environ:
                if entry in environ.read().split(b"\0"):
                    found.append(int(name))
        except OSError:  # gone, or not ours to read
            continue
    return found


def kill(pid: int) -> None:
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGKILL)
        os.kill(pid, signal.SIGKILL)
    except OSError:  # gone already
        pass


def sweep(entry: bytes) -> int:
    """Kill every marked process (and the group it leads) until none is left; how many were found."""
    killed: set[int] = set()
    quiet = 0
    deadline = time.monotonic() + SWEEP_S
    while quiet < QUIET_SCANS and time.monotonic() < deadline:
        found = marked(entry)
        quiet = 0 if found else quiet + 1
        for pid in found:
            kill(pid)
        killed.update(found)
        time.sleep(0.05)
    return len(killed)


def wait_for_owner(owner: int) -> None:
    """Block until the owner is gone (module docstring)."""
    while os.getppid() == owner:
        ready, _, _ = select.select([0], [], [], POLL_S)
        if ready and not os.read(0, 4096):
            return


def main(argv: list[str]) -> int:
    mark, owner = argv[1], int(argv[2])
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    wait_for_owner(owner)
    count = sweep(f"{MARK_VAR}={mark}".encode())
    if count:
        print(f"vf-sglang reaper: process {owner} ended; killed {count} process(es) its episodes had started and "
              "left running", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
