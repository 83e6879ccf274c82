"""The GPU tier: the whole plan (real SGLang, Qwen3-0.6B, code-golf-v1). `pytest -m gpu`.

Two variants: the direct one (the adapter's `rollout` against SGLang the plan starts) and the Miles
one (Miles' own verifiers E2E: `train.py` in Miles' image, the adapter's class `VerifiersRolloutFn` as
Miles' E2E runs it from #2695 on, and the legacy `generate_rollout` as a second case; Miles' dump
verified), which also needs Miles' image (`/root/miles/train.py`) and is skipped without it.

Marked `e2e` as well as `gpu`, so the fast lane (`-m "not e2e"`) never selects it, even on a
machine with CUDA (tests/e2e/test_gpu_prechecks.py proves it with a faked detector); `tox -e e2e`
runs the tier through `python -m e2e.runner` instead. Skipped with "needs CUDA" on machines
without a GPU; its plan is tested on CPU in tests/test_e2e_plan.py and tests/e2e/test_gpu_prechecks.py.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from e2e.common.ports import free_port
from e2e.plans.gpu import gpu_plan
from e2e.plans.steps import PlanOptions
from e2e.runner import Runner, cuda_available

pytestmark = [pytest.mark.gpu, pytest.mark.e2e,
              pytest.mark.skipif(not cuda_available(), reason="needs CUDA (nvidia-smi -L failed)")]


def test_gpu_tier_runs_grouped_rollouts_and_verifies(tmp_path) -> None:
    out = io.StringIO()
    options = PlanOptions(run_dir=str(tmp_path / "run"), sglang_port=free_port())
    code = Runner(log_dir=tmp_path / "logs", out=out).run(gpu_plan(options))
    assert code == 0, out.getvalue()[-5000:]


@pytest.mark.skipif(not (Path(PlanOptions.miles_root) / "train.py").is_file(),
                    reason=f"needs Miles' image ({PlanOptions.miles_root}/train.py is absent)")
@pytest.mark.parametrize("abi", ["class", "legacy"])  # Miles' E2E from #2695 on, and before it
def test_gpu_tier_runs_miles_train_with_the_adapter_and_verifies_its_dump(tmp_path, abi) -> None:
    out = io.StringIO()
    options = PlanOptions(run_dir=str(tmp_path / "run"), variant="miles", miles_abi=abi)
    code = Runner(log_dir=tmp_path / "run" / "logs", out=out).run(gpu_plan(options))
    assert code == 0, out.getvalue()[-5000:]
