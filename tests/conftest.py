"""Test lanes (markers registered in pyproject.toml, `--strict-markers`):

    fast (default):  uvx --with tox-uv tox -e fast   # pytest -m "not e2e"; gpu/live tests skip with a reason
    e2e:             uvx --with tox-uv tox -e e2e    # pytest -m e2e (reference engine), then the E2E runner
    lint:            uvx --with tox-uv tox -e lint
    gpu:             pytest -m gpu        (skipped with "needs CUDA" on machines without it)
    router:          uvx --with tox-uv tox -e router   # pytest -m router: smg in front of two reference engines
    lane-isolation:  uvx --with tox-uv tox -e lane-isolation   # pytest -m lane_isolation: tox + uv run in a copy
    sglang-cpu:      uvx --with tox-uv tox -e sglang-cpu       # real SGLang 0.5.23 on CPU: the rehearsal
                     uvx --with tox-uv tox -e sglang-cpu-0516  # the same on 0.5.16 (Miles' image pin)
                     (pytest -m sglang_cpu needs VF_SGLANG_CPU=1 or SGLANG_URL; skipped with the command otherwise)
"""

from __future__ import annotations

import importlib
import os
import shutil
import socket
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

from adapter.config.settings import Settings

if TYPE_CHECKING:
    from adapter.rollout.lifetime import RunLifetime

# Tests-only tasksets (fixtures/tasksets: arith-mini-v1 and group-mini-v1, two tasks each, for eval-heavy tests).
FIXTURE_TASKSETS = Path(__file__).resolve().parents[1] / "fixtures" / "tasksets"

# `sglang_cpu_server`: real SGLang on CPU for the whole suite (skips unless VF_SGLANG_CPU=1), and
# the conformance layer (`sglang_mock`, `sglang_replay`, `qwen3_tokenizer`, `--sglang-url`): the
# package registers no pytest11 entry point, so every suite loads it by name, as a user's does
# (`-p conformance.plugin`, or this list in their top conftest.py), in every lane and interpreter.
pytest_plugins = ["e2e.sglang_cpu.fixtures", "conformance.plugin"]

# 2-core CI machines are slow and noisy: no per-example deadline, no "slow draw" health check
# (the first draw pays for strategy setup); the example count stays hypothesis' default.
hypothesis_settings.register_profile(
    "vf-sglang", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
hypothesis_settings.load_profile("vf-sglang")
# Hypothesis imports its optimiser lazily, from inside a running test, under pytest's assertion
# rewriting (hypothesis is a pytest plugin, so all its modules are rewritten). On CPython 3.11.7
# that `ast.parse` once failed mid-suite with "SystemError: AST constructor recursion depth
# mismatch" (a CPython 3.11 bug in the AST's recursion accounting). Imported here, at the top of
# the stack and before any test runs, it is parsed once, where that cannot happen.
importlib.import_module("hypothesis.internal.conjecture.optimiser")


@pytest.fixture(scope="session", autouse=True)
def fixture_tasksets_importable() -> None:
    """The bundled tasksets are imported by module name, also by tool-server subprocesses,
    so they go on PYTHONPATH (inherited) as well as sys.path; uv must be on PATH for the
    subprocess runtime (it is a test dependency, installed into the test environment)."""
    from adapter.episodes.bundled import add_env_sources
    from adapter.episodes.generations import installed

    add_env_sources([installed().bundled_tasksets(), FIXTURE_TASKSETS])
    bin_dir = str(Path(sys.executable).parent)
    if shutil.which("uv") is None and (Path(bin_dir) / "uv").exists():
        os.environ["PATH"] = os.pathsep.join([bin_dir, os.environ.get("PATH", "")])
    assert shutil.which("uv"), "uv must be on PATH for Verifiers' subprocess runtime: pip install uv"


@pytest.fixture
def make_settings() -> Callable[..., Settings]:
    """Settings as the adapter sees them in a well-formed Miles run, with overrides."""

    def make(**overrides: Any) -> Settings:
        base: dict[str, Any] = {"rollout_batch_size": 2, "n_samples_per_prompt": 2, "rollout_global_dataset": False}
        return Settings(**{**base, **overrides})

    return make


@pytest.fixture
async def lifetimes() -> AsyncIterator[Callable[[Settings, str], RunLifetime]]:
    """`lifetimes(settings, url)`: a rollout function's owner around an engine session for `url`
    (`adapter.rollout.job.run_lifetime`, as the CLI builds one), closed on the test's own loop before
    it ends, as its builder would."""
    made: list[RunLifetime] = []

    def make(settings: Settings, url: str) -> RunLifetime:
        from adapter.rollout.job import run_lifetime

        made.append(run_lifetime(settings, url))
        return made[-1]

    yield make
    for lifetime in made:
        await lifetime.aclose()


@pytest.fixture
def proxy_nowhere(monkeypatch) -> str:
    """The http proxy variables set to a loopback port nothing listens on; no NO_PROXY."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        nowhere = f"http://127.0.0.1:{sock.getsockname()[1]}"
    for name in ("http_proxy", "HTTP_PROXY"):  # the http ones only: uv's https downloads keep working
        monkeypatch.setenv(name, nowhere)
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.setenv(name, "")  # recorded, so what the adapter sets is undone after the test
        monkeypatch.delenv(name)
    return nowhere


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: the contract cells run without xdist
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: one worker more than the cores this process may use. The suite's real episodes
    and CLI tests wait on subprocesses and sockets; a spare worker fills those waits (measured on
    2 cores: 2 workers 160 s, 3 workers 133 s, 4 workers 139 s)."""
    return len(os.sched_getaffinity(0)) + 1
