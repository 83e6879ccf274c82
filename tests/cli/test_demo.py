"""`vf-sglang demo` as a newcomer runs it: cold (empty model cache), then again warm. Both runs
print the same table, and rewards vary inside at least one group (GRPO needs std > 0)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # builds the tiny model and runs the reference engine (group `demo`)
pytest.importorskip("torch", reason="the demo's reference engine needs torch (dependency group `demo`)")

VF_SGLANG = str(Path(sys.executable).with_name("vf-sglang"))
STD = re.compile(r"group: reward mean [0-9.]+ std ([0-9.]+)")


def _demo(cache: Path, out: Path) -> str:
    env = {**os.environ, "VF_SGLANG_CACHE": str(cache)}
    done = subprocess.run([VF_SGLANG, "demo", "--out", str(out)], capture_output=True, text=True, env=env,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"samples written to {out.resolve()}" in done.stdout
    return "\n".join(line for line in done.stdout.splitlines() if line.startswith(" "))  # the table rows


def test_cold_then_warm_demo_print_the_same_table_with_varying_rewards(tmp_path: Path) -> None:
    cold = _demo(tmp_path / "cache", tmp_path / "cold.jsonl")
    assert len(list((tmp_path / "cache").glob("tiny-qwen3-*"))) == 1, "the build is cached by its recipe hash"
    warm = _demo(tmp_path / "cache", tmp_path / "warm.jsonl")
    assert cold == warm
    stds = [float(std) for std in STD.findall(cold)]
    assert len(stds) == 3 and max(stds) > 0, cold
    assert "completed" in cold and "failed" not in cold
