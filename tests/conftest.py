"""Test lanes (markers registered in pyproject.toml, `--strict-markers`):

    fast (default):  uvx --with tox-uv tox -e fast      # == pytest -m "not e2e and not gpu and not live"
    lint:            uvx --with tox-uv tox -e lint
    gpu:             pytest -m gpu        (skipped with "needs CUDA" on machines without it)
"""

from __future__ import annotations

from collections.abc import Callable
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


@pytest.fixture
def make_settings() -> Callable[..., Settings]:
    """Settings as the adapter sees them in a well-formed Miles run, with overrides."""

    def make(**overrides: Any) -> Settings:
        base: dict[str, Any] = {"rollout_batch_size": 2, "n_samples_per_prompt": 2}
        return Settings(**{**base, **overrides})

    return make
