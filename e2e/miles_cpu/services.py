"""The processes the miles lane starts inside its network namespace, each ended by its own
process group (a runner ends what it started, and nothing else):

    ray_head(venv, log, dashboard=)   `ray start --head --block` with ONE declared GPU resource
                                      (Miles' placement groups ask for GPU bundles; nothing uses a GPU),
                                      and its dashboard (the `ray job submit` address) when asked
    loopback_up()                     `ip link set lo up` (a new network namespace starts with lo down)

Every wait is bounded, and ends at once when the service exits or logs that its port is taken
(`e2e.common.process.wait_ready`); a service that does not come up raises `ServiceError` with its
log's tail. A port already in use fails before the launch.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from e2e.common.ports import PortInUseError, ensure_port_free, free_port
from e2e.common.process import Watched, end_group, wait_ready

HOST = "127.0.0.1"
RAY_START_TIMEOUT_S = 120.0
DASHBOARD_START_TIMEOUT_S = 120.0


class ServiceError(RuntimeError):
    """A lane service did not start."""


def loopback_up() -> None:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)


def _spawn(argv: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env)


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1.0)
        return sock.connect_ex((HOST, port)) == 0


def _stop(process: subprocess.Popen[bytes]) -> None:
    end_group(process.pid, grace_s=15.0, reap=process.poll)
    process.wait()


@dataclass(frozen=True)
class RayHead:
    address: str  # the GCS (`127.0.0.1:PORT`): the driver run directly
    dashboard: str | None  # `http://127.0.0.1:PORT`: the `ray job submit` address, when started


def _wait_for(ready: Callable[[], bool], process: subprocess.Popen[bytes], log: Path, what: str,
              timeout_s: float, port: int | None = None) -> None:
    """`e2e.common.process.wait_ready`: fails at once if the process exits or cannot bind `port`."""
    wait_ready(ready, Watched(process, log, what, port=port), timeout_s=timeout_s, error=ServiceError)


def _dashboard_up(url: str) -> bool:
    """The job API answers: `ray job submit` lists jobs through it before it submits."""
    with contextlib.suppress(httpx.HTTPError):
        return httpx.get(f"{url}/api/jobs/", timeout=5.0).status_code == 200
    return False


@contextlib.contextmanager
def ray_head(venv: Path, log: Path, *, num_cpus: int = 4, dashboard: bool = False) -> Iterator[RayHead]:
    """A Ray head on loopback, with its dashboard (and job agent) only when `dashboard`."""
    port = free_port()
    web = free_port() if dashboard else 0
    shown = ["--include-dashboard=true", f"--dashboard-host={HOST}", f"--dashboard-port={web}"] if dashboard \
        else ["--include-dashboard=false"]
    argv = [str(venv / "bin" / "ray"), "start", "--head", "--block", f"--port={port}", "--num-gpus=1",
            f"--num-cpus={num_cpus}", *shown, "--disable-usage-stats", f"--node-ip-address={HOST}"]
    try:  # a port taken by another process would answer `_port_open` in the head's stead
        for taken in filter(None, (port, web)):
            ensure_port_free(taken, HOST, what="the Ray head")
    except PortInUseError as exc:
        raise ServiceError(str(exc)) from None
    process = _spawn(argv, log)
    url = f"http://{HOST}:{web}" if dashboard else None
    try:
        _wait_for(lambda: _port_open(port), process, log, "the Ray head", RAY_START_TIMEOUT_S, port)
        if url is not None:
            _wait_for(lambda: _dashboard_up(url), process, log, "the Ray dashboard", DASHBOARD_START_TIMEOUT_S, web)
        yield RayHead(f"{HOST}:{port}", url)
    finally:
        _stop(process)
