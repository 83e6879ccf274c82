"""pytest fixtures for real SGLang on CPU (load with `pytest_plugins = ["e2e.sglang_cpu.fixtures"]`).

    sglang_cpu_server   session-scoped: a running deterministic-mode SGLang server (`Server`:
                        url, version, pid, log_path, ...), ended after the session

The lane is opt-in: without `VF_SGLANG_CPU=1` the fixture skips, naming the command that
enables it (building the venv takes ~20 s and 5.7 GB; a server ~4 GB of RAM and 40–130 s to
start). With `VF_SGLANG_CPU=1` it builds the venv when missing and FAILS, not skips, when the
venv or the server cannot be had: that lane exists to run against real SGLang.
`VF_SGLANG_CPU_VERSION` picks the sglang version (default DEFAULT_VERSION).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import pytest

from adapter.reference.errors import TinyModelBuildError
from e2e.sglang_cpu.errors import SGLangCPUError
from e2e.sglang_cpu.server import DEFAULT_VERSION, Server, serving

ENABLE_ENV = "VF_SGLANG_CPU"
VERSION_ENV = "VF_SGLANG_CPU_VERSION"


def requested_version() -> str:
    return os.environ.get(VERSION_ENV) or DEFAULT_VERSION


def lane_enabled() -> bool:
    return os.environ.get(ENABLE_ENV) == "1"


@pytest.fixture(scope="session")
def sglang_cpu_server() -> Iterator[Server]:
    version = requested_version()
    if not lane_enabled():
        pytest.skip(f"needs real SGLang on CPU: set {ENABLE_ENV}=1 (tox -e sglang-cpu); "
                    f"`python -m e2e.sglang_cpu install --version {version}` builds its venv")
    with contextlib.ExitStack() as running:
        try:
            server = running.enter_context(serving(version, deterministic=True))
        except (SGLangCPUError, TinyModelBuildError) as exc:
            pytest.fail(f"{ENABLE_ENV}=1 but real SGLang {version} on CPU is not available: {exc}\n"
                        f"try `python -m e2e.sglang_cpu serve --version {version} --deterministic`", pytrace=False)
        yield server
