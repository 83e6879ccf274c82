"""The processes the miles lane starts inside its network namespace, each ended by its own
process group (a runner ends what it started, and nothing else):

    ray_head(venv, port)              `ray start --head --block` with ONE declared GPU resource
                                      (Miles' placement groups ask for GPU bundles; nothing uses a GPU)
    reference_engine(model_dir, port) `vf-sglang engine` (this interpreter), up when
                                      `/health_generate` answers 200
    loopback_up()                     `ip link set lo up` (a new network namespace starts with lo down)

Every wait is bounded; a service that does not come up raises `ServiceError` with its log's tail.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from e2e.process import end_group
from e2e.sglang_cpu.server import free_port, log_tail

HOST = "127.0.0.1"
RAY_START_TIMEOUT_S = 120.0
ENGINE_START_TIMEOUT_S = 180.0


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


@contextlib.contextmanager
def ray_head(venv: Path, log: Path, *, num_cpus: int = 4) -> Iterator[str]:
    """A Ray head on loopback; yields its GCS address (`127.0.0.1:PORT`)."""
    port = free_port()
    argv = [str(venv / "bin" / "ray"), "start", "--head", "--block", f"--port={port}", "--num-gpus=1",
            f"--num-cpus={num_cpus}", "--include-dashboard=false", "--disable-usage-stats",
            f"--node-ip-address={HOST}"]
    process = _spawn(argv, log)
    try:
        deadline = time.monotonic() + RAY_START_TIMEOUT_S
        while not _port_open(port):
            if process.poll() is not None or time.monotonic() > deadline:
                raise ServiceError(f"the Ray head did not come up (exit {process.poll()}):\n{log_tail(log)}")
            time.sleep(0.5)
        yield f"{HOST}:{port}"
    finally:
        _stop(process)


@contextlib.contextmanager
def reference_engine(model_dir: Path, log: Path) -> Iterator[str]:
    """The project's reference engine (not SGLang) on loopback; yields its URL."""
    port = free_port()
    argv = [sys.executable, "-m", "adapter.cli", "engine", "--port", str(port), "--model-dir", str(model_dir)]
    process = _spawn(argv, log)
    url = f"http://{HOST}:{port}"
    try:
        deadline = time.monotonic() + ENGINE_START_TIMEOUT_S
        with httpx.Client(timeout=30.0) as client:
            while True:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise ServiceError(f"the reference engine did not come up:\n{log_tail(log)}")
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(f"{url}/health_generate").status_code == 200:
                        break
                time.sleep(0.5)
        yield url
    finally:
        _stop(process)
