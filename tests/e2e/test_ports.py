"""The lanes' ports: below the kernel's ephemeral range, never chosen twice, never one in use."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

from e2e.common.ports import LOOPBACK, PORT_RANGE, RESERVATION_S, NoFreePortError, free_port


@pytest.fixture(autouse=True)
def own_reservations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    where = tmp_path / "ports"
    monkeypatch.setenv("VF_SGLANG_PORTS_DIR", str(where))
    return where


def test_a_port_comes_from_below_the_kernels_ephemeral_range() -> None:
    low, _ = (int(v) for v in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    port = free_port()
    assert port in PORT_RANGE
    assert port < low, "an ephemeral port can be taken by any outgoing connection before the server binds it"


def test_no_port_is_handed_out_twice_while_it_is_reserved() -> None:
    ports = [free_port(choices=range(21000, 21040)) for _ in range(40)]
    assert sorted(ports) == list(range(21000, 21040))
    with pytest.raises(NoFreePortError, match="VF_SGLANG_PORTS_DIR"):
        free_port(choices=range(21000, 21040))


def test_a_port_someone_has_bound_is_skipped_and_not_left_reserved(own_reservations: Path) -> None:
    with socket.socket() as taken:
        taken.bind((LOOPBACK, 0))
        held = taken.getsockname()[1]
        with pytest.raises(NoFreePortError):
            free_port(choices=range(held, held + 1))
    assert not (own_reservations / str(held)).exists()
    assert free_port(choices=range(held, held + 1)) == held  # released: free again


def test_a_stale_reservation_is_reclaimed(own_reservations: Path) -> None:
    port = free_port(choices=range(22000, 22001))
    stale = time.time() - RESERVATION_S - 60
    os.utime(own_reservations / str(port), (stale, stale))
    assert free_port(choices=range(22000, 22001)) == port
