"""What Miles (at 31f1ca961: docs/contract.md §8.5) checks on a rollout function's output, as functions.

`train_problems(output, args, sample_type)` walks a `RolloutFnTrainOutput` the way Miles'
`postprocess_rollout_data` → `convert_samples_to_train_data` does and lists every breach:

  * the batch flattens completely under Miles' own rule (`miles_flatten`: expand while the
    first entry of a level is a list), i.e. every entry of every group has one depth;
  * each group entry is a `Sample` or a nested `list[Sample]` (one rollout); siblings of a
    nested list share one non-None `rollout_id`;
  * `rollout_id` values are ints that fit int64 (Miles packs them into an int64 array);
  * `len(loss_mask) == response_length` (None counts as all ones) and the rollout logprobs
    have that length too;
  * `get_reward_value(args)` is a number, and samples sharing a rollout (by `rollout_id`, else
    `index`) inside a `group_index` share one reward (Miles raises ValueError otherwise);
  * every sample is an instance of `sample_type` and survives `from_dict(to_dict())`.

`eval_problems(output, sample_type)` checks a `RolloutFnEvalOutput`: per dataset, `rewards`
are numbers or None (Miles averages them, None as 0), `truncated` are bools, and the three
lists are aligned. Both return a list of messages; `assert_*` raise one AssertionError.
"""

from __future__ import annotations

import itertools
import math
import numbers
from typing import Any

INT64 = (-(2**63), 2**63 - 1)


def _rollout_id(sample: Any) -> Any:
    """The sample's `rollout_id`; None for a Miles without the field (miles-rl 0.0.2)."""
    return getattr(sample, "rollout_id", None)


def _shape_problems(groups: Any, sample_type: type) -> list[str]:
    problems: list[str] = []
    if not isinstance(groups, list):
        return [f"samples must be a list of groups, got {type(groups).__name__}"]
    for g, group in enumerate(groups):
        if not isinstance(group, list) or not group:
            problems.append(f"group {g}: must be a non-empty list, got {group!r:.80}")
            continue
        for position, entry in enumerate(group):
            siblings = entry if isinstance(entry, list) else [entry]
            bad = [type(s).__name__ for s in siblings if not isinstance(s, sample_type)]
            if bad or not siblings:
                problems.append(f"group {g} entry {position}: not {sample_type.__module__}.Sample: {bad}")
                continue
            if isinstance(entry, list) and len(entry) > 1:
                ids = [_rollout_id(s) for s in entry]
                if None in ids or len(set(ids)) != 1:
                    problems.append(f"group {g} entry {position}: nested siblings must share one "
                                    f"non-None rollout_id, got {ids}")
    return problems


def miles_flatten(groups: list[Any]) -> list[Any]:
    """Miles' own flattening of a train batch: expand one level while the FIRST entry of the
    current level is a list (it never looks at the others)."""
    data = list(groups)
    while data and isinstance(data[0], list):
        data = list(itertools.chain.from_iterable(data))
    return data


def _depth_problems(groups: list[Any]) -> list[str]:
    try:
        flat = miles_flatten(groups)
    except TypeError as exc:  # what Miles itself raises on a plain Sample inside a level it expands
        return [f"Miles' flattening fails ({exc}): every entry of every group in a batch must have the same depth"]
    left = [i for i, item in enumerate(flat) if isinstance(item, list)]
    if not left:
        return []
    return [f"Miles' flattening stops one level early: {len(left)} nested entries survive it (first at flat "
            f"position {left[0]}): every entry of every group in a batch must have the same depth"]


def _flat(groups: list[Any]) -> list[Any]:
    return [s for group in groups for entry in group for s in (entry if isinstance(entry, list) else [entry])]


def _sample_problems(sample: Any, args: Any) -> list[str]:
    rid = _rollout_id(sample)
    where = f"sample index={sample.index} rollout_id={rid!r}"
    problems = []
    if rid is not None and (isinstance(rid, bool) or not isinstance(rid, int) or not INT64[0] <= rid <= INT64[1]):
        problems.append(f"{where}: rollout_id must be an int64, got {type(rid).__name__} {rid!r}")
    mask = sample.loss_mask if sample.loss_mask is not None else [1] * sample.response_length
    if len(mask) != sample.response_length:
        problems.append(f"{where}: loss mask length {len(mask)} != response length {sample.response_length}")
    logprobs = sample.rollout_log_probs
    if logprobs is not None and len(logprobs) != sample.response_length:
        problems.append(f"{where}: rollout_log_probs length {len(logprobs)} != response length "
                        f"{sample.response_length}")
    try:
        value = sample.get_reward_value(args)
    except (KeyError, TypeError) as exc:
        return [*problems, f"{where}: get_reward_value failed: {type(exc).__name__}: {exc}"]
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        problems.append(f"{where}: reward value must be a finite number, got {value!r}")
    try:
        type(sample).from_dict(sample.to_dict())
    except (KeyError, TypeError, ValueError) as exc:
        problems.append(f"{where}: from_dict(to_dict()) failed: {exc}")
    return problems


def _reward_problems(samples: list[Any], args: Any) -> list[str]:
    units: dict[tuple[Any, Any], set[Any]] = {}
    for s in samples:
        unit = _rollout_id(s) if _rollout_id(s) is not None else s.index
        try:
            units.setdefault((s.group_index, unit), set()).add(s.get_reward_value(args))
        except (KeyError, TypeError):
            continue  # reported per sample
    return [f"group_index {g} rollout {u}: siblings must share one reward, got {sorted(map(str, r))}"
            for (g, u), r in units.items() if len(r) > 1]


def train_problems(output: Any, args: Any, sample_type: type) -> list[str]:
    problems = _shape_problems(output.samples, sample_type) + _depth_problems(output.samples)
    if problems:
        return problems
    samples = _flat(output.samples)
    if any(s.group_index is None for s in samples):
        problems.append("every sample needs a group_index (Miles normalises rewards per group_index)")
    for sample in samples:
        problems.extend(_sample_problems(sample, args))
    return problems + _reward_problems(samples, args)


def eval_problems(output: Any, sample_type: type) -> list[str]:
    problems: list[str] = []
    for name, data in output.data.items():
        rewards, truncated, samples = data["rewards"], data["truncated"], data["samples"]
        if not len(rewards) == len(truncated) == len(samples):
            problems.append(f"{name}: rewards/truncated/samples lengths {len(rewards)}, {len(truncated)}, "
                            f"{len(samples)} are not aligned")
        for i, reward in enumerate(rewards):
            if reward is not None and (isinstance(reward, bool) or not isinstance(reward, numbers.Real)):
                problems.append(f"{name}: rewards[{i}] must be a number or None, got {reward!r:.80}")
        if any(not isinstance(t, bool) for t in truncated):
            problems.append(f"{name}: truncated must be bools")
        if any(not isinstance(s, sample_type) for s in samples):
            problems.append(f"{name}: samples must be {sample_type.__module__}.Sample instances")
        if not problems and rewards:
            sum(r if r is not None else 0 for r in rewards) / len(rewards)  # what Miles' eval logger does
    return problems


def assert_train_ok(output: Any, args: Any, sample_type: type) -> None:
    problems = train_problems(output, args, sample_type)
    assert not problems, "Miles would reject this train output:\n- " + "\n- ".join(problems)


def assert_eval_ok(output: Any, sample_type: type) -> None:
    problems = eval_problems(output, sample_type)
    assert not problems, "Miles would reject this eval output:\n- " + "\n- ".join(problems)
