"""Rollout metrics over every trace seen (kept or dropped): reward mean, error rate, truncated
rate, mean turns. Also the one place that recognises a configuration error on a trace."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from adapter.errors import ConfigurationError

# Error types (as Verifiers records them on `trace.errors`, by class name) that mean the run is
# misconfigured: resampling can never help. `adapter.generations.a.AdapterRequestError` is the
# one the TrainClient raises (generation B's served bridge answers a 400, recorded by Verifiers).
CONFIGURATION_ERROR_TYPES: frozenset[str] = frozenset({"AdapterRequestError"})


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

    @staticmethod
    def raise_on_configuration_error(traces: Iterable[Any]) -> None:
        for trace in traces:
            error = trace.error
            if error is not None and error.type in CONFIGURATION_ERROR_TYPES:
                raise ConfigurationError(f"trace {trace.id!r} hit a configuration error: {error.message}")
