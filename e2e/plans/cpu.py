"""The CPU tier: the same shape as the GPU tier against the reference engine and the bundled tasksets."""

from __future__ import annotations

import sys
from pathlib import Path

from e2e.plans.steps import BUNDLED, REPO, ROLLOUT_OK_EXIT, Step

CPU_SEED = 1234


def cpu_plan(run_dir: str = str(REPO / "runs" / "e2e-cpu"), *, groups: int = 2, n: int = 4, port: int = 30555,
             tasksets: tuple[str, ...] = BUNDLED, python: str | None = None, envs_dir: str | None = None,
             seed: int = CPU_SEED) -> list[Step]:
    """The CPU tier: the reference engine, then K groups of each bundled taskset, verified.
    `envs_dir` holds the installed generation's bundled configs (default: fixtures/envs).
    Rollouts are seeded (`--seed`: rollout i of the c-th group samples with seed + c×n + i, which the
    reference engine honours), so a run's rewards — and its verdict — are the same every time."""
    configs = Path(envs_dir) if envs_dir else REPO / "fixtures" / "envs"
    py = python or sys.executable
    run_dir = str(Path(run_dir).absolute())
    url = f"http://127.0.0.1:{port}"
    steps = [
        Step("start-engine", (py, "-m", "adapter.cli", "engine", "--port", str(port)), kind="background",
             produces=(f"{run_dir}/logs/start-engine.log",)),
        Step("wait-engine", (f"{url}/health",), kind="wait_http", timeout_s=600.0),
    ]
    for taskset in tasksets:
        out = f"{run_dir}/{taskset}.jsonl"
        steps.append(Step(f"rollouts-{taskset}", (
            py, "-m", "adapter.cli", "rollout", "--sglang-url", url, "--config",
            str(configs / f"{taskset}.toml"), "--model", "Qwen/Qwen3-0.6B",
            "--tokenizer", "{tiny_model_dir}", "--groups", str(groups), "--n", str(n),
            "--max-response-len", "32", "--seed", str(seed), "--out", out), produces=(out,), ok_exit=ROLLOUT_OK_EXIT))
        steps.append(Step(f"verify-{taskset}", (py, "-m", "e2e.judges.verify", "--samples", out, "--env", taskset,
                                                "--groups", str(groups), "--n", str(n))))
    steps.append(Step("stop-engine", ("start-engine",), kind="stop", always=True))
    return steps
