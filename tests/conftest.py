"""Test lanes (markers registered in pyproject.toml, `--strict-markers`):

    fast (default):  uvx --with tox-uv tox -e fast   # pytest -m "not e2e"; gpu/live tests skip with a reason
    e2e:             uvx --with tox-uv tox -e e2e    # pytest -m e2e (reference engine), then the E2E runner
    lint:            uvx --with tox-uv tox -e lint
    gpu:             pytest -m gpu        (skipped with "needs CUDA" on machines without it)
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

from adapter.settings import Settings

# 2-core CI machines are slow and noisy: no per-example deadline, no "slow draw" health check
# (the first draw pays for strategy setup); the example count stays hypothesis' default.
hypothesis_settings.register_profile(
    "vf-sglang", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
hypothesis_settings.load_profile("vf-sglang")


FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.fixture(scope="session", autouse=True)
def fixture_tasksets_importable() -> None:
    """The bundled tasksets are imported by module name, also by tool-server subprocesses,
    so they go on PYTHONPATH (inherited) as well as sys.path; uv must be on PATH for the
    subprocess runtime (it is a test dependency, installed into the test environment)."""
    from adapter.versions import installed_decision

    # Generation B's modules that differ from A's (same names) come first.
    dirs = ["tasksets_b", "tasksets"] if installed_decision().generation == "B" else ["tasksets"]
    sources = [str(FIXTURES / d) for d in dirs]
    for source in reversed(sources):
        if source not in sys.path:
            sys.path.insert(0, source)
    paths = [*sources, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    bin_dir = str(Path(sys.executable).parent)
    if shutil.which("uv") is None and (Path(bin_dir) / "uv").exists():
        os.environ["PATH"] = os.pathsep.join([bin_dir, os.environ.get("PATH", "")])
    assert shutil.which("uv"), "uv must be on PATH for Verifiers' subprocess runtime: pip install uv"


@pytest.fixture
def make_settings() -> Callable[..., Settings]:
    """Settings as the adapter sees them in a well-formed Miles run, with overrides."""

    def make(**overrides: Any) -> Settings:
        base: dict[str, Any] = {"rollout_batch_size": 2, "n_samples_per_prompt": 2}
        return Settings(**{**base, **overrides})

    return make
