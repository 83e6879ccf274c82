"""`real_sglang`: the server the tests in this folder run against. With `SGLANG_URL` set (the
sglang-cpu rehearsal serves one and points the tests at it) that server, described by its own
`/server_info` and `/model_info` (its log: `SGLANG_LOG`, when the one who started it says where);
else the session's `sglang_cpu_server` (VF_SGLANG_CPU=1). A lane's tests share its one server: a
start costs half a minute of CPU and ~4 GB."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest


@dataclass(frozen=True)
class RealServer:
    url: str
    version: str
    model_dir: Path
    log_path: Path | None = None  # the server's log, when known


@pytest.fixture(scope="session")
def real_sglang(request: pytest.FixtureRequest) -> RealServer:
    url = os.environ.get("SGLANG_URL")
    if not url:
        server = request.getfixturevalue("sglang_cpu_server")
        return RealServer(server.url, server.version, Path(server.model_dir), server.log_path)
    with httpx.Client(timeout=30, trust_env=False) as http:
        server_info = http.get(f"{url}/server_info").json()
        model_info = http.get(f"{url}/model_info").json()
    if not server_info.get("enable_deterministic_inference"):
        pytest.fail(f"{url} must run with --enable-deterministic-inference for these tests", pytrace=False)
    log = os.environ.get("SGLANG_LOG")
    return RealServer(url.rstrip("/"), str(server_info["version"]), Path(model_info["model_path"]),
                      Path(log) if log else None)
