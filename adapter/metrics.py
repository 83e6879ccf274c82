"""Rollout metrics over every trace seen (kept or dropped): reward mean, error rate, truncated
rate, mean turns. (Configuration refusals do not travel on traces: the bridge records the
typed error, `adapter.bridge.BridgeState.refusal`, and the orchestrator re-raises it.)"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass
class TraceStats:
    traces: int = 0
    reward_sum: float = 0.0
    errors: int = 0
    truncated: int = 0
    turns: int = 0

    def add(self, traces: Iterable[Any]) -> None:
        for trace in traces:
            self.traces += 1
            self.reward_sum += float(trace.reward)
            self.errors += int(bool(trace.has_error))
            self.truncated += int(bool(trace.is_truncated))
            self.turns += int(trace.num_turns)

    def metrics(self) -> dict[str, float]:
        seen = max(self.traces, 1)
        return {
            "verifiers/traces": float(self.traces),
            "verifiers/reward_mean": self.reward_sum / seen,
            "verifiers/error_rate": self.errors / seen,
            "verifiers/truncated_rate": self.truncated / seen,
            "verifiers/num_turns_mean": self.turns / seen,
        }
