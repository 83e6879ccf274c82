"""The run's assertions, each one able to fail, as a list of failure lines (empty: all passed).

    mismatch KL ≤ limit at every step      the adapter's rollout_log_probs are the served
                                           policy's log-probs of exactly those tokens
    planted bugs exceed the limit           the KL check would catch logprobs shifted by one or a
                                           mask one token early, on this step's own samples
    weight_versions == [str(k)] at step k   every sample names the weights it was sampled with
    reward: mean of the last `window`       the samples train: exact tokens, masks, logprobs and
            steps > mean of the first       group rewards move the policy the right way

Pure: reads a `RunRecord` (`e2e.rl_cpu.records`); `e2e.rl_cpu.__main__` raises on failures.
"""

from __future__ import annotations

import statistics

from e2e.rl_cpu.records import RunRecord, StepRecord


def kl_failures(steps: list[StepRecord], limit: float) -> list[str]:
    return [f"step {s.step}: mismatch KL {s.mismatch_kl:.3g} > {limit:g} between rollout_log_probs and the "
            "trainer's recompute on the same weights (shifted logprobs, a wrong mask or temperature?)"
            for s in steps if not s.mismatch_kl <= limit]


def planted_failures(steps: list[StepRecord], limit: float) -> list[str]:
    return [f"step {s.step}: planted bug {name!r} gives KL {kl:.3g} ≤ {limit:g}: the KL check would not catch it"
            for s in steps for name, kl in s.planted_kl.items() if not kl > limit]


def version_failures(steps: list[StepRecord]) -> list[str]:
    return [f"step {s.step}: samples carry weight_versions {s.weight_versions}, expected only [{str(s.step)!r}] "
            "(the weight sync did not reach the rollouts, or versions are not recorded per sample)"
            for s in steps if s.weight_versions != [[str(s.step)]]]


def reward_failures(steps: list[StepRecord], window: int) -> list[str]:
    if len(steps) < 2 * window:
        return [f"{len(steps)} steps recorded: the reward check needs at least {2 * window} (2 × --window)"]
    first = statistics.fmean(s.reward_mean for s in steps[:window])
    last = statistics.fmean(s.reward_mean for s in steps[-window:])
    if last > first:
        return []
    return [f"mean reward of the last {window} steps {last:.3f} does not exceed the first {window} steps' "
            f"{first:.3f}: the policy did not improve (try more --steps or a larger --lr)"]


def failures(run: RunRecord, *, kl_limit: float, window: int) -> list[str]:
    """Every failed assertion of the run, one line each."""
    return [*kl_failures(run.steps, kl_limit), *planted_failures(run.steps, kl_limit),
            *version_failures(run.steps), *reward_failures(run.steps, window)]


def reward_gain(run: RunRecord, window: int) -> tuple[float, float]:
    """(mean of the first `window` steps' rewards, mean of the last `window`)."""
    return (statistics.fmean(s.reward_mean for s in run.steps[:window]),
            statistics.fmean(s.reward_mean for s in run.steps[-window:]))
