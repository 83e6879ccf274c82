"""The run's settings, one frozen object, and the Miles-style namespace built from them.

`RLConfig` holds the loop's hyperparameters and thresholds (defaults: the values measured to
raise arith-v1's reward on a 2-core machine within the lane's budget; docs/rl-cpu.md shows the
run). `miles_args` is the argparse Namespace Miles would hand the rollout function class: the
same flags a `--rollout-function-path adapter.miles.VerifiersRolloutFn` job sets, with the router
address pointed at the one SGLang server.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RENDERER = "Qwen/Qwen3-0.6B"  # the tiny model carries Qwen3's tokenizer and chat template


@dataclass(frozen=True)
class RLConfig:
    steps: int = 10
    batch: int = 6  # groups per step (Miles' --rollout-batch-size); arith-v1 has 12 tasks
    n: int = 4  # rollouts per group (--n-samples-per-prompt)
    lr: float = 5e-4  # Adam on the fp32 master weights
    epochs: int = 1  # optimizer steps per batch (on-policy: the ratio is the engine/trainer mismatch)
    temperature: float = 0.8
    max_response_len: int = 32
    seed: int = 1234  # --rollout-seed: rollout i of the c-th group samples with seed + c·n + i
    window: int = 2  # steps averaged at each end for the reward check (2 × 6 groups = every task once)
    kl_limit: float = 1e-3
    taskset: str = "arith-v1"
    sglang_version: str = "0.5.23"
    run_dir: Path = REPO / "runs" / "rl-cpu"
    plant: str | None = None  # a planted bug applied to every sample (e2e.rl_cpu.metrics.PLANTED)

    def problems(self) -> list[str]:
        """Settings that cannot make a meaningful run, each naming the flag."""
        found = []
        if self.steps < 2 * self.window:
            found.append(f"--steps {self.steps} must be at least twice --window {self.window}")
        if self.n < 2:
            found.append(f"--n {self.n}: group-normalised advantages need at least 2 rollouts per group")
        if self.window < 1 or self.batch < 1 or self.epochs < 1:
            found.append("--window, --batch and --epochs must be at least 1")
        if not self.temperature > 0:
            found.append(f"--temperature {self.temperature} must be > 0 (log-probs are taken at it)")
        return found


def miles_args(config: RLConfig, *, url: str, model_dir: Path, env_config: Path) -> argparse.Namespace:
    """The namespace Miles builds from its command line, for the flags the adapter reads."""
    host, _, port = url.removeprefix("http://").rpartition(":")
    return argparse.Namespace(
        verifiers_config=str(env_config), hf_checkpoint=str(model_dir), renderer_model_name=RENDERER,
        rollout_global_dataset=False, rollout_batch_size=config.batch, n_samples_per_prompt=config.n,
        rollout_max_response_len=config.max_response_len, rollout_max_context_len=1024,
        rollout_temperature=config.temperature, rollout_seed=config.seed,
        sglang_router_ip=host, sglang_router_port=int(port), sglang_enable_deterministic_inference=True,
        advantage_estimator="grpo",
    )
