"""The load-through-the-router benchmark at the lane's size, so it cannot rot: smg in front of two
stub engines, every request answered, both workers used, the paired added latency reported."""

from __future__ import annotations

import re

import pytest

from benchmarks import router_load

pytestmark = pytest.mark.router


def test_the_router_load_scenario_runs_at_tiny_size(smg) -> None:
    text = "\n".join(router_load.main(["--tiny"]))
    assert re.search(r"^\| through smg \| 32 \| 0 \|", text, flags=re.M), text
    assert re.search(r"^\| straight \| 32 \| 0 \| .* \| 16 / 16 \|$", text, flags=re.M), text
    split = re.search(r"^\| through smg \| .* \| (\d+) / (\d+) \|$", text, flags=re.M)
    assert split and int(split[1]) > 0 and int(split[2]) > 0 and int(split[1]) + int(split[2]) == 32, text
    assert "Added latency through the router, paired per turn: median" in text
