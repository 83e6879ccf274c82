"""Trace → Miles-shaped samples, and a group of traces → one training group (docs/contract.md §4).

Consumes Verifiers traces (any object with the `Trace` attributes this module reads: `id`,
`task.data`, `branches`, `rewards`, `reward`, `metrics`, `stop_condition`, `errors`/`error`,
`has_error`, `is_truncated`, `last_reply`); branches carry `index`, `token_ids`,
`sampled_mask`, `logprobs` (0.0 on unsampled positions), lists or numpy arrays; optionally the engine's per-session
`RolloutStats` (adapter.bridge.stats), keyed by trace id. `weight_versions` takes the shape the
installed Miles' `Sample` declares: one version string per turn, or (Miles #1891 on) one
`WeightVersionsPerCall` per model turn with spans at absolute offsets in `tokens`.
Emits samples of `sample_class()` (Miles' own class when Miles is importable). One trace is
one rollout, routed by `routing_key = trace.id` (miles-rl 0.0.2: `session_id`); the siblings of
a multi-branch rollout share an int `rollout_id` (unique in the run, from the caller's counter),
a plain sample keeps None (`sample_type.identity_fields`). A single-branch trace is one `Sample` entry of its group; a
multi-branch trace (compaction, sub-agents) is ONE nested `list[Sample]` entry, one sample per
branch, all sharing the rollout's `rollout_id` and reward (Miles asserts both). The last
branch is the rollout's main sample (eval reports it; it carries the prefix-cache stats).

Invariants enforced here: token_ids/sampled_mask/logprobs have equal length (else
`TraceConversionError` naming all three); a branchless trace is `EmptyTraceError`;
`len(loss_mask) == len(rollout_log_probs) == response_length`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from adapter.bridge.stats import RolloutStats
from adapter.errors import EmptyTraceError, RewardKeyError, StreamLengthError, TraceConversionError
from adapter.samples.sample_type import Sample, Status, identity_fields, sample_class, span_classes
from adapter.samples.streams import Columns, columns
from adapter.samples.weight_spans import turn_spans

# Why a group is dropped: "episode_error" (the episode raised or returned the wrong number of
# traces), "trace_error" (a trace recorded an error, or broke a Sample invariant),
# "empty_trace" (a trace has no branches), "trace_dropped" (Verifiers marked a trace dropped:
# `Trace.dropped`, 0.4.1 on), or a dynamic filter's own reason.
DropReason = str
TRACE_DROPPED = "trace_dropped"

# One group entry: a rollout's only sample, or its samples nested (multi-branch traces).
Entry = Any
StatsLookup = Callable[[str], "RolloutStats | None"]


def _dump(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, Mapping):
        return {k: _dump(v) for k, v in value.items() if v is not None}
    return value


def task_prompt(data: Any) -> str | list[dict[str, Any]]:
    """The task's prompt: messages as JSON dicts without None fields; a string as-is; ""."""
    prompt = getattr(data, "prompt", None)
    if prompt is None:
        return ""
    if isinstance(prompt, str):
        return prompt
    return [_dump(message) for message in prompt]


def task_label(data: Any) -> Any:
    """The task's `label`, else its `answer`, else None (extra row fields included)."""
    for name in ("label", "answer"):
        value = getattr(data, name, None)
        if value is None and isinstance(getattr(data, "model_extra", None), Mapping):
            value = data.model_extra.get(name)
        if value is not None:
            return value
    return None


def dropped_reason(trace: Any) -> str | None:
    """Why Verifiers left the trace out of training (`Trace.dropped`, 0.4.1 on: a judge, a
    non-finite reward; "leave the trace out of reward means and training batches"), or None.
    Releases before it have no such field: None."""
    reason = getattr(trace, "dropped", None)
    if reason is None or reason is False:
        return None
    return "dropped" if reason is True else str(reason)


def trace_reward(trace: Any, reward_key: str | None) -> float | dict[str, float]:
    """The scalar `trace.reward`, or every component plus `"reward"` when a key picks one."""
    if not reward_key:
        return float(trace.reward)
    return {**{k: float(v) for k, v in trace.rewards.items()}, "reward": float(trace.reward)}


def trace_status(trace: Any, stats: RolloutStats | None = None) -> Status:
    """FAILED if the trace errored (ABORTED when the engine's last answer was an abort);
    else TRUNCATED if truncated; else COMPLETED."""
    if trace.has_error:
        return Status.ABORTED if stats is not None and stats.last_finish == "abort" else Status.FAILED
    if trace.is_truncated:
        return Status.TRUNCATED
    return Status.COMPLETED


def _metadata(trace: Any, branch_index: int, task_index: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "branch_index": branch_index,
        "task_index": task_index,
        "rewards": dict(trace.rewards),
        "metrics": dict(trace.metrics),
        "stop_condition": trace.stop_condition,
    }
    if trace.error is not None:
        meta["error"] = trace.error.model_dump(mode="json", exclude_none=True)
    dropped = dropped_reason(trace)
    if dropped is not None:
        meta["dropped"] = dropped
    return {"verifiers": meta}


def _columns(trace: Any, branch: Any) -> Columns:
    try:
        return columns(branch.token_ids, branch.sampled_mask, branch.logprobs)
    except StreamLengthError as exc:
        raise TraceConversionError(
            f"trace {trace.id!r} branch {branch.index}: token_ids, sampled_mask and logprobs "
            f"must have equal length: {exc}",
            trace_id=trace.id,
        ) from exc


def _base(cls: type[Sample], trace: Any, *, reward_key: str | None, rollout_id: int,
          stats: RolloutStats | None, branches: int = 1) -> dict[str, Any]:
    data = trace.task.data
    return {"prompt": task_prompt(data), "response": trace.last_reply, "label": task_label(data),
            "reward": trace_reward(trace, reward_key),
            **identity_fields(cls, trace_id=trace.id, rollout_id=rollout_id, branches=branches),
            "status": cls.Status(trace_status(trace, stats).value)}


def trace_to_samples(trace: Any, *, rollout_id: int, reward_key: str | None = None,
                     stats: RolloutStats | None = None) -> list[Any]:
    """One sample per branch, all sharing `rollout_id`; `group_index`/`index` are left for
    group assembly. `stats` (the engine's report for this trace) fills the engine fields."""
    branches = trace.branches
    if not branches:
        raise EmptyTraceError(
            f"trace {trace.id!r} has no branches (stop_condition={trace.stop_condition!r})",
            trace_id=trace.id,
        )
    cls = sample_class()
    base = _base(cls, trace, reward_key=reward_key, rollout_id=rollout_id, stats=stats, branches=len(branches))
    task_index = getattr(trace.task.data, "idx", None)
    samples = []
    for position, branch in enumerate(branches):
        column = _columns(trace, branch)
        sample = cls(
            **base,
            tokens=column.tokens,
            response_length=len(column.tokens) - column.start,
            loss_mask=column.loss_mask,
            rollout_log_probs=column.rollout_log_probs,
            metadata=_metadata(trace, branch.index, task_index),
        )
        if stats is not None:
            stats.apply(sample, main=position == len(branches) - 1)
            _spans_per_turn(sample, column.sampled_mask, stats)
        samples.append(sample)
    return samples


def _spans_per_turn(sample: Any, mask: Sequence[bool], stats: RolloutStats) -> None:
    """Where Miles' `Sample` holds `list[WeightVersionsPerCall]` (#1891 on): one per model turn,
    its spans at the turn's absolute offsets (`adapter.samples.weight_spans`), replacing the
    per-turn strings `stats.apply` wrote for the older `list[str]` field."""
    classes = span_classes()
    if classes is None:
        return
    per_call, span = classes
    sample.weight_versions = [per_call(spans=[span(version=v, abs_start=a, abs_end=b) for v, a, b in spans])
                              for spans in turn_spans(list(map(bool, mask)), stats.turns)]


def as_entry(samples: list[Any]) -> Entry:
    """A rollout's group entry: its only sample, or its samples nested as one list."""
    return samples[0] if len(samples) == 1 else samples


def uniform_depth(groups: list[list[Entry]]) -> list[list[Entry]]:
    """One train batch with every entry at one depth: when any rollout of the batch has several
    branches, every rollout is a list (single-branch ones of length 1). Miles flattens a batch
    level by level looking only at the first entry of each level, so a batch mixing plain and
    nested entries would stop one level early."""
    if not any(isinstance(entry, list) for group in groups for entry in group):
        return groups
    return [[entry if isinstance(entry, list) else [entry] for entry in group] for group in groups]


def flatten(entries: Sequence[Entry]) -> Iterator[Any]:
    """The samples of a group, nested entries expanded in order."""
    for entry in entries:
        yield from (entry if isinstance(entry, list) else [entry])


def main_sample(entry: Entry) -> Any:
    """The rollout's main sample: its last branch."""
    return entry[-1] if isinstance(entry, list) else entry


def trace_to_eval_entry(trace: Any, *, reward_key: str | None, group_index: int, index: int,
                        rollout_id: int, stats: RolloutStats | None = None) -> Any:
    """Exactly one sample per trace, so eval's rewards/truncated/samples stay aligned: the
    main (last) branch's sample, or, for a trace with no usable branch, an empty sample that
    keeps the trace's reward, status and metadata."""
    try:
        sample = trace_to_samples(trace, rollout_id=rollout_id, reward_key=reward_key, stats=stats)[-1]
    except TraceConversionError as exc:
        cls = sample_class()
        base = _base(cls, trace, reward_key=reward_key, rollout_id=rollout_id, stats=stats)
        if not (trace.has_error or trace.is_truncated):
            base["status"] = cls.Status.FAILED
        sample = cls(**base, metadata=_metadata(trace, -1, getattr(trace.task.data, "idx", None)))
        sample.metadata["verifiers"]["conversion_error"] = str(exc)
    sample.group_index, sample.index = group_index, index
    return sample


def eval_reward_value(reward: Any, *, key: str | None, trace: Any) -> float | None:
    """The number Miles' eval logger averages: `reward[key]` for a dict reward, else the
    scalar; None for a trace Verifiers dropped. An errored trace lacking the key gives None (Miles
    counts it as 0 and reports the
    ratio); a healthy trace lacking it is a `RewardKeyError` naming the flag."""
    if dropped_reason(trace) is not None:  # not scored: reported beside the scored ones (eval's metrics)
        return None
    if not isinstance(reward, Mapping):
        return None if reward is None else float(reward)
    if key is not None and key in reward:
        return None if reward[key] is None else float(reward[key])
    if trace.has_error:
        return None
    if key is None:
        raise RewardKeyError(
            f"trace {trace.id!r}: the reward is a dict {sorted(reward)} but no key picks a number: set "
            "--eval-reward-key (or --reward-key) to one of those names")
    raise RewardKeyError(
        f"trace {trace.id!r}: its rewards {sorted(reward)} have no {key!r}, the key "
        "--eval-reward-key (else --reward-key) picks for eval: set it to one of those names"
    )


@dataclass(frozen=True)
class GroupOutcome:
    """A converted group (`samples`: one entry per rollout, see `as_entry`) or why it was dropped."""

    samples: list[Entry]
    drop_reason: DropReason | None = None
    detail: str = ""

    @property
    def kept(self) -> bool:
        return self.drop_reason is None

    @property
    def flat(self) -> list[Any]:
        return list(flatten(self.samples))


def assemble_group(
    traces: Sequence[Any],
    *,
    n: int,
    group_index: int,
    first_index: int,
    first_rollout_id: int,
    reward_key: str | None = None,
    stats: StatsLookup | None = None,
) -> GroupOutcome:
    """The n traces of one task → one group, or a drop with its reason. Trace i is rollout
    `first_rollout_id + i`; samples get `group_index` and consecutive `index` values from
    `first_index`; `stats(trace_id)` is the engine's report for a trace."""
    if len(traces) != n:
        return GroupOutcome([], "episode_error", f"expected {n} traces, got {len(traces)}")
    errored = [t for t in traces if t.has_error]
    if errored:
        first = errored[0]
        return GroupOutcome([], "trace_error", f"trace {first.id!r}: {first.error.message}")
    dropped = [(t, reason) for t in traces if (reason := dropped_reason(t)) is not None]
    if dropped:  # a dropped trace never trains: its group is dropped and replaced like any other drop
        first, reason = dropped[0]
        return GroupOutcome([], TRACE_DROPPED, f"trace {first.id!r} dropped by Verifiers: {reason}")
    entries: list[Entry] = []
    for offset, trace in enumerate(traces):
        try:
            samples = trace_to_samples(trace, rollout_id=first_rollout_id + offset, reward_key=reward_key,
                                       stats=stats(trace.id) if stats is not None else None)
        except EmptyTraceError as exc:
            return GroupOutcome([], "empty_trace", str(exc))
        except TraceConversionError as exc:
            return GroupOutcome([], "trace_error", str(exc))
        entries.append(as_entry(samples))
    for offset, sample in enumerate(flatten(entries)):
        sample.group_index = group_index
        sample.index = first_index + offset
    return GroupOutcome(entries)
