"""Rollout metrics over every trace seen (kept or dropped): reward mean (over the traces Verifiers
scored: a trace it dropped is counted in `verifiers/dropped_traces` instead), error rate, truncated
rate, mean turns, and `verifiers/prefix_cache_hit_rate` (cached prompt tokens over prompt tokens,
over every engine call of those traces, from the bridge's per-session stats; `CallStats`).
Configuration refusals do not travel on traces: the bridge records the typed error
(`adapter.bridge.handler.BridgeState.refusal`) and the orchestrator re-raises it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from adapter.bridge.stats import RolloutStats, SessionStats
from adapter.samples.conversion import dropped_reason


@dataclass
class TraceStats:
    traces: int = 0
    reward_sum: float = 0.0
    errors: int = 0
    truncated: int = 0
    turns: int = 0
    dropped: int = 0  # traces Verifiers dropped (`Trace.dropped`): out of the reward mean

    def add(self, traces: Iterable[Any]) -> None:
        for trace in traces:
            self.traces += 1
            if dropped_reason(trace) is None:
                self.reward_sum += float(trace.reward)
            else:
                self.dropped += 1
            self.errors += int(bool(trace.has_error))
            self.truncated += int(bool(trace.is_truncated))
            self.turns += int(trace.num_turns)

    def metrics(self) -> dict[str, float]:
        seen = max(self.traces, 1)
        return {
            "verifiers/traces": float(self.traces),
            "verifiers/dropped_traces": float(self.dropped),
            "verifiers/reward_mean": self.reward_sum / max(self.traces - self.dropped, 1),
            "verifiers/error_rate": self.errors / seen,
            "verifiers/truncated_rate": self.truncated / seen,
            "verifiers/num_turns_mean": self.turns / seen,
        }


def prefix_cache_hit_rate(stats: Iterable[RolloutStats | None]) -> float:
    """Cached prompt tokens / prompt tokens over the given rollouts (0.0 when none reported)."""
    seen = [s for s in stats if s is not None]
    prompt = sum(s.prompt_tokens for s in seen)
    return sum(s.cached_tokens for s in seen) / prompt if prompt else 0.0


@dataclass
class CallStats:
    """What one train/eval call accumulates: trace stats, the bridge's engine stats, the
    engine stats of every trace seen, and every converted group (for `all_samples`)."""

    engine: SessionStats
    traces: TraceStats = field(default_factory=TraceStats)
    seen: list[RolloutStats | None] = field(default_factory=list)
    converted: list[list[Any]] = field(default_factory=list)

    def see(self, traces: Sequence[Any]) -> None:
        self.traces.add(traces)
        self.seen.extend(self.engine.get(trace.id) for trace in traces)

    def metrics(self) -> dict[str, float]:
        return {**self.traces.metrics(), "verifiers/prefix_cache_hit_rate": prefix_cache_hit_rate(self.seen)}
