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
