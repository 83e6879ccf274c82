"""Loopback ports for the lanes' servers, safe when lanes run side by side.

A port the kernel hands out for `bind(0)` lies in its ephemeral range
(`/proc/sys/net/ipv4/ip_local_port_range`, 32768-60999 by default), the same range it draws the
local end of every outgoing connection from. Between choosing such a port and a server binding it,
any process's connection can take it: CI's sglang-cpu-0516 lane once lost its HTTP port that way
to the sglang-cpu lane beside it (uvicorn: "address already in use"), and waited out its start-up
timeout. So a lane's port comes from below the ephemeral range (`PORT_RANGE`, also clear of Ray's
worker ports 10002-19999 and of the 29xxx ports smg and torch.distributed default to), and each
one is reserved by an exclusively created file under `reservations_dir()`, so two of this
project's processes never choose the same port while it may still be in use (a reservation is
honoured for `RESERVATION_S`).

A port can still be taken from outside the project. `ensure_port_free(port)`, called right before
a launch, refuses it then (`PortInUseError`, naming the port and, via `port_holder`, the process
that holds it where /proc shows it) rather than let a server load for minutes and fail to bind.
"""

from __future__ import annotations

import contextlib
import os
import random
import socket
import tempfile
import time
from pathlib import Path

LOOPBACK = "127.0.0.1"
PORT_RANGE = range(20000, 29000)
RESERVATION_S = 6 * 3600.0
_PICKS = 200
_ENV = "VF_SGLANG_PORTS_DIR"


class NoFreePortError(RuntimeError):
    """Every port tried was bound or reserved."""


def reservations_dir() -> Path:
    """Where reservations live: $VF_SGLANG_PORTS_DIR, else <tmp>/vf-sglang-ports (one per machine)."""
    named = os.environ.get(_ENV)
    return Path(named) if named else Path(tempfile.gettempdir()) / "vf-sglang-ports"


def _reserve(port: int, where: Path, now: float) -> bool:
    path = where / str(port)
    with contextlib.suppress(FileNotFoundError):
        if now - path.stat().st_mtime > RESERVATION_S:
            path.unlink(missing_ok=True)  # stale: its lane has long ended
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError:
        return False
    return True


def _bindable(port: int, host: str) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = LOOPBACK, *, choices: range = PORT_RANGE) -> int:
    """A port in `choices` that nothing has bound and no other caller reserved; reserved now."""
    where = reservations_dir()
    where.mkdir(parents=True, exist_ok=True)
    now = time.time()
    for port in random.sample(choices, min(_PICKS, len(choices))):
        if _reserve(port, where, now):
            if _bindable(port, host):
                return port
            (where / str(port)).unlink(missing_ok=True)  # someone outside the project holds it
    raise NoFreePortError(f"no free port among {_PICKS} tried in {choices.start}-{choices.stop - 1} "
                          f"(reservations in {where}: remove stale ones, or set {_ENV})")


class PortInUseError(RuntimeError):
    """A port a server is about to be started on is already bound."""


def port_holder(port: int) -> str | None:
    """Who holds loopback/any-address TCP `port`, as far as this user can see: "pid N (command)",
    "a process this user cannot see", or None when no socket uses it. Linux only (reads /proc);
    None elsewhere. Meant for error messages: it scans every visible process's descriptors."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for row in Path(table).read_text().splitlines()[1:]:
                fields = row.split()
                if len(fields) > 9 and int(fields[1].rsplit(":", 1)[1], 16) == port and fields[9] != "0":
                    inodes.add(fields[9])
    if not inodes:
        return None
    wanted = {f"socket:[{inode}]" for inode in inodes}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in (proc / "fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) in wanted:
                        return f"pid {proc.name} ({_command(proc)})"
    return "a process this user cannot see"


def _command(proc: Path) -> str:
    try:
        words = (proc / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    return " ".join(w.decode(errors="replace") for w in words if w)[:200] or "?"


def ensure_port_free(port: int, host: str = LOOPBACK, *, what: str = "the server") -> None:
    """PortInUseError naming the port (and its holder, when visible) if `port` cannot be bound now:
    checked right before a launch, so that a server is not started onto a port it cannot get."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # as servers bind (uvicorn, asyncio): a closed connection's TIME_WAIT does not block them
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
            return
        except OSError:
            pass
    holder = port_holder(port) or "a holder not visible here"
    raise PortInUseError(f"cannot start {what}: port {port} on {host} is already in use, by {holder}")
