"""The run's settings, one frozen object, and the Miles-style namespace built from them.

`RLConfig` holds the loop's hyperparameters and thresholds (defaults: the values measured to
take echo-tool-shared-v1's reward from ≤ 0.35 to ≥ 0.8 on a 2-core machine within the lane's
budget; docs/rl-cpu.md shows the run and its lr-0 control). `miles_args` is the argparse
Namespace Miles would hand the rollout function class: the
same flags a `--rollout-function-path adapter.miles.VerifiersRolloutFn` job sets, with the router
address pointed at the one SGLang server.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
RENDERER = "Qwen/Qwen3-0.6B"  # the tiny model carries Qwen3's tokenizer and chat template


LANE_TASKSETS = Path(__file__).resolve().parent / "tasksets"  # the lane's own: echo-tool-shared-v1
LANE_ENVS = Path(__file__).resolve().parent / "envs"
MODELS = ("tool-rl", "arith-only")  # the tiny model's variants the loop can train (e2e.rl_cpu.loop.model_recipe)


@dataclass(frozen=True)
class RLConfig:
    steps: int = 5
    batch: int = 4  # groups per step (Miles' --rollout-batch-size); echo-tool-shared-v1 has 4 tasks
    n: int = 4  # rollouts per group (--n-samples-per-prompt)
    lr: float = 0.2  # of --optimizer, on the fp32 master weights (the gradient norm is clipped to 1)
    optimizer: str = "sgd"  # "sgd" or "adam" (e2e.rl_cpu.trainer says why SGD here)
    epochs: int = 1  # optimizer steps per batch (on-policy: the ratio is the engine/trainer mismatch)
    temperature: float = 0.8
    max_response_len: int = 48  # per turn: a tool call is 21 tokens, the stamp's reply 29
    seed: int = 1234  # --rollout-seed: rollout i of the c-th group samples with seed + c·n + i
    # steps averaged at each end for the reward checks: one step is 4 groups × 4 = every task 4 times;
    # the run is deterministic (seeded rollouts on a deterministic server), so a wider window averages
    # no noise between CI runs, it only costs steps (docs/rl-cpu.md's runs: the same rewards every time)
    window: int = 1
    kl_limit: float = 1e-3
    start_max: float = 0.35  # the first `window` steps' mean reward must not exceed it (the model starts bad)
    end_min: float = 0.8  # the last `window` steps' mean reward must reach it (it learned)
    flat_tol: float = 0.2  # the control (lr 0) may move by at most this between its first and last window
    control: bool = True  # also run the lr-0 control on the same seeds (the rise is learning, not drift)
    taskset: str = "echo-tool-shared-v1"  # the lane's own (e2e/rl_cpu/tasksets), else a bundled id
    model: str = "tool-rl"  # one of MODELS: the tiny model's variant served and trained
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
        if self.optimizer not in ("sgd", "adam"):
            found.append(f"--optimizer {self.optimizer}: choose sgd or adam")
        if self.model not in MODELS:
            found.append(f"--model {self.model}: choose one of {', '.join(MODELS)}")
        if not self.temperature > 0:
            found.append(f"--temperature {self.temperature} must be > 0 (log-probs are taken at it)")
        return found


def control_steps(config: RLConfig) -> list[int]:
    """The lr-0 control's steps: the first and the last `window` (the flat check reads only those;
    KL and weight versions are judged on every learning step). Steps 0 and 4 at the defaults."""
    return sorted({*range(config.window), *range(config.steps - config.window, config.steps)})


def control_runs(config: RLConfig) -> list[list[int]]:
    """The control steps that are run, as rollout functions: every one of `control_steps` but step 0,
    which is the learning run's step 0 (the same version-0 weights and seeds on a deterministic
    server: the same samples, so it is taken from the learning run instead of run twice)."""
    return contiguous_runs([k for k in control_steps(config) if k != 0])


def contiguous_runs(steps: list[int]) -> list[list[int]]:
    """[0, 1, 4, 5] → [[0, 1], [4, 5]]: each run is one resumed rollout function."""
    runs: list[list[int]] = []
    for k in steps:
        if runs and runs[-1][-1] == k - 1:
            runs[-1].append(k)
        else:
            runs.append([k])
    return runs


def env_config(taskset: str, generation: Any) -> Path:
    """The EnvConfig of `taskset`: the lane's own (`envs/<id>.toml`, generation A), else the
    bundled one of the installed generation."""
    own = LANE_ENVS / f"{taskset}.toml"
    return own if own.is_file() else generation.bundled_config(taskset)


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
