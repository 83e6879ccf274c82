"""Trace → Miles-shaped samples, and a group of traces → one training group (CONTRACT.md §4).

Consumes Verifiers traces (any object with the `Trace` attributes this module reads: `id`,
`task.data`, `branches`, `rewards`, `reward`, `metrics`, `stop_condition`, `errors`/`error`,
`has_error`, `is_truncated`, `last_reply`); branches carry `index`, `token_ids`,
`sampled_mask`, `logprobs` (0.0 on unsampled positions).
Emits one sample per branch (`sample_class()`): all branches of a trace share its
`rollout_id`, `routing_key` and reward, so GRPO normalisation per `group_index` stays correct.

Invariants enforced here: token_ids/sampled_mask/logprobs have equal length (else
`TraceConversionError` naming all three); a branchless trace is `EmptyTraceError`;
`len(loss_mask) == len(rollout_log_probs) == response_length`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from adapter.errors import EmptyTraceError, TraceConversionError
from adapter.sample_type import Status, sample_class

# Why a group is dropped: "episode_error" (the episode raised or returned the wrong number of
# traces), "trace_error" (a trace recorded an error, or broke a Sample invariant),
# "empty_trace" (a trace has no branches), or a dynamic filter's own reason.
DropReason = str


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


def trace_reward(trace: Any, reward_key: str | None) -> float | dict[str, float]:
    """The scalar `trace.reward`, or every component plus `"reward"` when a key picks one."""
    if not reward_key:
        return float(trace.reward)
    return {**{k: float(v) for k, v in trace.rewards.items()}, "reward": float(trace.reward)}


def trace_status(trace: Any) -> Status:
    if trace.has_error:
        return Status.FAILED
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
        meta["error"] = json.loads(trace.error.model_dump_json())
    return {"verifiers": meta}


def _aligned(trace: Any, branch: Any) -> tuple[list[int], list[bool], list[float]]:
    tokens, mask, logprobs = list(branch.token_ids), list(branch.sampled_mask), list(branch.logprobs)
    if not len(tokens) == len(mask) == len(logprobs):
        raise TraceConversionError(
            f"trace {trace.id!r} branch {branch.index}: token_ids, sampled_mask and logprobs "
            f"must have equal length: got {len(tokens)}, {len(mask)}, {len(logprobs)}",
            trace_id=trace.id,
        )
    return tokens, mask, logprobs


def trace_to_samples(trace: Any, *, reward_key: str | None = None) -> list[Any]:
    """One sample per branch; `group_index` and `index` are left for group assembly."""
    branches = trace.branches
    if not branches:
        raise EmptyTraceError(
            f"trace {trace.id!r} has no branches (stop_condition={trace.stop_condition!r})",
            trace_id=trace.id,
        )
    data = trace.task.data
    cls = sample_class()
    samples = []
    for branch in branches:
        tokens, mask, logprobs = _aligned(trace, branch)
        start = mask.index(True) if True in mask else len(tokens)
        sample = cls(
            prompt=task_prompt(data),
            tokens=tokens,
            response=trace.last_reply,
            response_length=len(tokens) - start,
            label=task_label(data),
            reward=trace_reward(trace, reward_key),
            loss_mask=[int(m) for m in mask[start:]],
            rollout_log_probs=[float(lp) if m else 0.0 for lp, m in zip(logprobs[start:], mask[start:], strict=False)],
            status=cls.Status(trace_status(trace).value),
            metadata=_metadata(trace, branch.index, getattr(data, "idx", None)),
            session_id=trace.id,
        )
        sample.rollout_id = trace.id
        sample.routing_key = trace.id
        samples.append(sample)
    return samples


def trace_to_eval_entry(trace: Any, *, reward_key: str | None, group_index: int, index: int) -> Any:
    """Exactly one sample per trace, so eval's rewards/truncated/samples stay aligned: the
    main (last) branch's sample, or, for a trace with no usable branch, an empty sample that
    keeps the trace's reward, status and metadata."""
    try:
        sample = trace_to_samples(trace, reward_key=reward_key)[-1]
    except TraceConversionError as exc:
        cls = sample_class()
        status = trace_status(trace) if trace.has_error or trace.is_truncated else Status.FAILED
        sample = cls(prompt=task_prompt(trace.task.data), response=trace.last_reply,
                     label=task_label(trace.task.data), reward=trace_reward(trace, reward_key),
                     status=cls.Status(status.value),
                     metadata=_metadata(trace, -1, getattr(trace.task.data, "idx", None)),
                     session_id=trace.id)
        sample.metadata["verifiers"]["conversion_error"] = str(exc)
        sample.rollout_id = sample.routing_key = trace.id
    sample.group_index, sample.index = group_index, index
    return sample


@dataclass(frozen=True)
class GroupOutcome:
    """A converted group (`samples`, one entry per sample) or why it was dropped."""

    samples: list[Any]
    drop_reason: DropReason | None = None
    detail: str = ""

    @property
    def kept(self) -> bool:
        return self.drop_reason is None


def assemble_group(
    traces: Sequence[Any],
    *,
    n: int,
    group_index: int,
    first_index: int,
    reward_key: str | None = None,
) -> GroupOutcome:
    """The n traces of one task → one group, or a drop with its reason. Samples get
    `group_index` and consecutive `index` values from `first_index`."""
    if len(traces) != n:
        return GroupOutcome([], "episode_error", f"expected {n} traces, got {len(traces)}")
    errored = [t for t in traces if t.has_error]
    if errored:
        first = errored[0]
        return GroupOutcome([], "trace_error", f"trace {first.id!r}: {first.error.message}")
    samples: list[Any] = []
    for trace in traces:
        try:
            samples.extend(trace_to_samples(trace, reward_key=reward_key))
        except EmptyTraceError as exc:
            return GroupOutcome([], "empty_trace", str(exc))
        except TraceConversionError as exc:
            return GroupOutcome([], "trace_error", str(exc))
    for offset, sample in enumerate(samples):
        sample.group_index = group_index
        sample.index = first_index + offset
    return GroupOutcome(samples)
