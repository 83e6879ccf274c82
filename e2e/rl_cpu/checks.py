"""The run's assertions, each one able to fail, as a list of failure lines (empty: all passed).

    mismatch KL ≤ limit at every step      the adapter's rollout_log_probs are the served
      (and on the turns after a tool)      policy's log-probs of exactly those tokens
    planted bugs exceed the limit           the KL check would catch logprobs shifted by one or a
      (where the tokens were uncertain)    mask one token early, on this step's own samples
    weight_versions all str(k) at step k    every sample names the weights each of its turns used
    reward: first `window` steps ≤          the samples train: exact tokens, masks, logprobs and
      start_max, last `window` ≥ end_min    group rewards teach a model that starts bad at the task
    the lr-0 control stays flat             on the same seeds, within flat_tol: the rise is learning

Pure: reads a `RunRecord` (`e2e.rl_cpu.records`); `e2e.rl_cpu.__main__` raises on failures.
"""

from __future__ import annotations

import statistics
from typing import Any

from e2e.rl_cpu.config import RLConfig
from e2e.rl_cpu.records import RunRecord, StepRecord


def kl_failures(steps: list[StepRecord], limit: float) -> list[str]:
    found = [f"step {s.step}: mismatch KL {s.mismatch_kl:.3g} > {limit:g} between rollout_log_probs and the "
             "trainer's recompute on the same weights (shifted logprobs, a wrong mask or temperature?)"
             for s in steps if not s.mismatch_kl <= limit]
    return found + [f"step {s.step}: mismatch KL on the turns after a tool's answer {s.tool_turn_kl:.3g} > {limit:g} "
                    "(the tool response's tokens or the later turns' logprobs are misaligned?)"
                    for s in steps if s.tool_turn_kl is not None and not s.tool_turn_kl <= limit]


PLANTED_MIN_SURPRISAL = 0.005  # nats per sampled token: below it a step cannot show a planted bug


def planted_failures(steps: list[StepRecord], limit: float) -> list[str]:
    """Each planted bug must push the KL over the limit at every step whose samples could show it:
    where the policy was unsure of its tokens (`surprisal` ≥ PLANTED_MIN_SURPRISAL). A trained
    policy sure of every token has log-probs ≈ 0 everywhere, so shifting them changes nothing
    there (measured on the lane: surprisal 0.0016 after learning, shift KL 0.000; before, 0.013–0.06 and
    0.07–20); at least one step must qualify."""
    judged = [s for s in steps if s.surprisal >= PLANTED_MIN_SURPRISAL]
    if steps and not judged:
        return [f"no step sampled uncertain tokens (surprisal ≥ {PLANTED_MIN_SURPRISAL:g}): the planted bugs were "
                "never given data they could show in"]
    return [f"step {s.step}: planted bug {name!r} gives KL {kl:.3g} ≤ {limit:g}: the KL check would not catch it"
            for s in judged for name, kl in s.planted_kl.items() if not kl > limit]


def version_failures(steps: list[StepRecord]) -> list[str]:
    """Every engine call of step k (one entry per turn in a sample's `weight_versions`) used version k."""
    return [f"step {s.step}: samples carry weight_versions {s.weight_versions}, expected only {str(s.step)!r} "
            "in each (the weight sync did not reach the rollouts, or versions are not recorded per sample)"
            for s in steps if not s.weight_versions or not all(
                versions and all(v == str(s.step) for v in versions) for versions in s.weight_versions)]


def window_means(steps: list[StepRecord], window: int) -> tuple[float, float]:
    """(mean reward of the first `window` steps, of the last `window`)."""
    return (statistics.fmean(s.reward_mean for s in steps[:window]),
            statistics.fmean(s.reward_mean for s in steps[-window:]))


def reward_failures(steps: list[StepRecord], window: int, *, start_max: float, end_min: float) -> list[str]:
    if len(steps) < 2 * window:
        return [f"{len(steps)} steps recorded: the reward check needs at least {2 * window} (2 × --window)"]
    first, last = window_means(steps, window)
    found = []
    if not first <= start_max:
        found.append(f"mean reward of the first {window} steps {first:.3f} > {start_max:g}: the model does not "
                     "start bad at the task, so a rise would not show learning (--start-max)")
    if not last >= end_min:
        found.append(f"mean reward of the last {window} steps {last:.3f} < {end_min:g} (first {window}: "
                     f"{first:.3f}): the policy did not learn the task (try more --steps or a larger --lr)")
    return found


def control_failures(control: list[StepRecord], window: int, *, flat_tol: float) -> list[str]:
    """The lr-0 control on the same seeds must stay flat: its rise would be drift, not learning."""
    if len(control) < 2 * window:
        return [f"{len(control)} control steps recorded: the control check needs at least {2 * window}"]
    first, last = window_means(control, window)
    if abs(last - first) <= flat_tol:
        return []
    return [f"the lr-0 control moved from {first:.3f} to {last:.3f} (more than {flat_tol:g}): with frozen "
            "weights the reward should stay put, so the learning run's rise is not shown to be learning"]


def failures(run: RunRecord, *, kl_limit: float, window: int, start_max: float, end_min: float,
             flat_tol: float) -> list[str]:
    """Every failed assertion of the run, one line each (the KL and version checks cover the
    control's steps too, prefixed "control")."""
    found = [*kl_failures(run.steps, kl_limit), *planted_failures(run.steps, kl_limit),
             *version_failures(run.steps),
             *reward_failures(run.steps, window, start_max=start_max, end_min=end_min)]
    if run.control:
        found += [f"control {line}" for line in (*kl_failures(run.control, kl_limit),
                                                  *planted_failures(run.control, kl_limit),
                                                  *version_failures(run.control))]
        found += control_failures(run.control, window, flat_tol=flat_tol)
    return found


def thresholds(config: dict[str, object]) -> dict[str, Any]:
    """The checks' thresholds as a run recorded them (`RunRecord.config`); a run recorded before
    the start/end/flat thresholds existed is judged by the defaults."""
    defaults = RLConfig()
    return {"kl_limit": float(config["kl_limit"]), "window": int(config["window"]),
            **{name: float(config.get(name, getattr(defaults, name))) for name in ("start_max", "end_min", "flat_tol")}}
