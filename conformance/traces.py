"""Real Verifiers 0.2.x traces for tests, built from the package's own classes.

Every trace is a genuine `verifiers.v1.trace.Trace` with `MessageNode`s, so a field renamed
upstream breaks these builders instead of passing silently. A `Turn` is one model call: the
scaffold tokens Renderers adds before the completion (the generation prompt), the sampled ids
and their logprobs, and optionally the tokens of the messages that follow (a tool reply),
which are never sampled.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Turn:
    completion_ids: Sequence[int]
    logprobs: Sequence[float]
    text: str = ""
    scaffold_ids: Sequence[int] = (151644, 77091, 198)  # "<|im_start|>assistant\n"
    finish_reason: str = "stop"
    followup_ids: Sequence[int] = ()  # e.g. a tool reply's tokens, appended after the turn
    followup_text: str = "tool output"


@dataclass(frozen=True)
class TraceSpec:
    prompt_ids: Sequence[int] = (151644, 872, 198, 17, 10, 17, 151645, 198)
    prompt: Any = field(default_factory=lambda: [{"role": "user", "content": "2+2"}])
    turns: Sequence[Turn] = (Turn((19, 151645), (-0.25, -0.01), "4"),)
    rewards: Mapping[str, float] = field(default_factory=lambda: {"correct": 1.0})
    metrics: Mapping[str, float] = field(default_factory=dict)
    task_fields: Mapping[str, Any] = field(default_factory=lambda: {"answer": "4"})
    idx: int = 0
    stop_condition: str | None = "agent_completed"
    error: tuple[str, str] | None = None  # (type, message)
    extra_branches: int = 0  # leaves forked from the prompt node (compaction, sub-agents)
    dropped: str | None = None  # the reason a judge left the trace out of training (`Trace.drop`)


def build_trace(spec: TraceSpec = TraceSpec()) -> Any:
    from verifiers.v1.graph import MessageNode
    from verifiers.v1.task import WireTaskData
    from verifiers.v1.trace import Error, Trace, TraceTask
    from verifiers.v1.types import AssistantMessage, ToolMessage, UserMessage

    data = WireTaskData(idx=spec.idx, prompt=spec.prompt, **dict(spec.task_fields))
    nodes = [
        MessageNode(
            message=UserMessage(content="prompt"),
            token_ids=list(spec.prompt_ids),
            mask=[False] * len(spec.prompt_ids),
        )
    ]
    for turn in spec.turns:
        scaffold, sampled = list(turn.scaffold_ids), list(turn.completion_ids)
        nodes.append(
            MessageNode(
                parent=len(nodes) - 1,
                message=AssistantMessage(content=turn.text),
                sampled=True,
                token_ids=scaffold + sampled,
                mask=[False] * len(scaffold) + [True] * len(sampled),
                logprobs=list(turn.logprobs),
                finish_reason=turn.finish_reason,
            )
        )
        if turn.followup_ids:
            nodes.append(
                MessageNode(
                    parent=len(nodes) - 1,
                    message=ToolMessage(tool_call_id="call_0", content=turn.followup_text),
                    token_ids=list(turn.followup_ids),
                    mask=[False] * len(turn.followup_ids),
                )
            )
    for branch in range(spec.extra_branches):
        first = spec.turns[0]
        nodes.append(
            MessageNode(
                parent=0,
                message=AssistantMessage(content=f"branch {branch + 1}"),
                sampled=True,
                token_ids=list(first.scaffold_ids) + list(first.completion_ids),
                mask=[False] * len(first.scaffold_ids) + [True] * len(first.completion_ids),
                logprobs=list(first.logprobs),
                finish_reason=first.finish_reason,
            )
        )
    errors = [Error(type=spec.error[0], message=spec.error[1])] if spec.error else []
    trace = Trace(
        task=TraceTask(type="Task", data=data),
        nodes=nodes if spec.turns or spec.extra_branches else [],
        rewards=dict(spec.rewards),
        metrics=dict(spec.metrics),
        stop_condition=spec.stop_condition,
        errors=errors,
        is_completed=True,
    )
    if spec.dropped is None:
        return trace
    if callable(getattr(trace, "drop", None)):  # verifiers 0.4.1 on: the release's own drop
        trace.drop(spec.dropped)
        return trace
    return Dropped(trace, spec.dropped)


class Dropped:
    """A trace read with `dropped` set, for releases whose traces have no such field (before 0.4.1):
    every other attribute is the trace's."""

    def __init__(self, trace: Any, reason: str) -> None:
        self._trace = trace
        self.dropped = reason

    def __getattr__(self, name: str) -> Any:
        return getattr(self._trace, name)


@dataclass(frozen=True)
class NumpyBranch:
    """A branch whose streams are numpy arrays, as verifiers 0.4.1 on stores them (int32 ids, bool
    mask, float32 logprobs)."""

    index: int
    token_ids: Any
    sampled_mask: Any
    logprobs: Any


class NumpyStreams:
    """A trace read through `numpy_streams`: every attribute is the trace's, but `branches`, whose
    streams are numpy arrays (for the releases whose own traces still hold lists)."""

    def __init__(self, trace: Any) -> None:
        import numpy as np

        self._trace = trace
        self.branches = [NumpyBranch(b.index, np.asarray(b.token_ids, dtype=np.int32),
                                     np.asarray(b.sampled_mask, dtype=bool), np.asarray(b.logprobs, dtype=np.float32))
                         for b in trace.branches]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._trace, name)


def numpy_streams(trace: Any) -> Any:
    """`trace` with numpy branch streams: as-is where the installed Verifiers already stores them."""
    import numpy as np

    if all(isinstance(b.token_ids, np.ndarray) for b in trace.branches):
        return trace
    return NumpyStreams(trace)
