"""Per-session SGLang `meta_info` stats: what the engine said about each rollout's turns.

The bridge calls `SessionStats.record(session_id, output)` after every valid engine answer, and
`record_abort(session_id)` when SGLang aborted the request (the session id is Verifiers'
`X-Session-ID`, i.e. the trace id). The sample builder then takes a
trace's `RolloutStats` and folds them into its samples the way Miles'
`Sample.update_from_meta_info` does (design/MILES.md §1):

  * `weight_versions`: SGLang's `weight_version` of every turn, in order (on every sample of
    the rollout: each was generated under those weights);
  * `prefix_cache_info`: summed `cached_tokens` and `prompt_tokens` (on the rollout's main
    sample only, so summing over samples counts each engine call once);
  * `spec_info`: summed speculative-decoding counters, only when the engine reports them
    (SGLang sends them only with a speculative algorithm); main sample only, as above;
  * the last finish reason, for the status (`abort` → ABORTED).

`CallStats` gathers what one train/eval call saw (trace stats, the engine stats of every
trace) into its metrics. `prefix_cache_hit_rate(stats)` is the rollout metric `verifiers/prefix_cache_hit_rate`:
cached prompt tokens over prompt tokens, over every engine call of the given rollouts.
The store is a bounded LRU (like the bridge's session memory), so a long run cannot grow it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from adapter.lru import BoundedLRU
from adapter.metrics import TraceStats

SPEC_KEYS = ("spec_accept_token_num", "spec_draft_token_num", "spec_verify_ct")


@dataclass
class RolloutStats:
    """Everything the engine reported for one session (one trace), summed over its turns."""

    calls: int = 0
    weight_versions: list[str] = field(default_factory=list)
    cached_tokens: int = 0
    prompt_tokens: int = 0
    spec: dict[str, int] | None = None  # None: the engine never reported speculative counters
    last_finish: str | None = None

    def add(self, meta: Mapping[str, Any]) -> None:
        self.calls += 1
        if meta.get("weight_version") is not None:
            self.weight_versions.append(str(meta["weight_version"]))
        self.cached_tokens += int(meta.get("cached_tokens") or 0)
        self.prompt_tokens += int(meta.get("prompt_tokens") or 0)
        if any(key in meta for key in SPEC_KEYS):
            spec = self.spec if self.spec is not None else dict.fromkeys((*SPEC_KEYS, "completion_token_num"), 0)
            for key in SPEC_KEYS:
                spec[key] += int(meta.get(key) or 0)
            spec["completion_token_num"] += int(meta.get("completion_tokens") or 0)
            self.spec = spec
        finish = meta.get("finish_reason")
        kind = finish.get("type") if isinstance(finish, Mapping) else finish
        if isinstance(kind, str):
            self.last_finish = kind

    def apply(self, sample: Any, *, main: bool) -> None:
        """Fold these stats into `sample` (Miles' class or ours; nested info objects mutated)."""
        sample.weight_versions = list(self.weight_versions)
        if not main:
            return
        sample.prefix_cache_info.cached_tokens = self.cached_tokens
        sample.prefix_cache_info.total_prompt_tokens = self.prompt_tokens
        if self.spec is not None:
            for key, value in self.spec.items():
                setattr(sample.spec_info, key, value)


class SessionStats:
    """Session id → `RolloutStats`, bounded (oldest sessions evicted past `max_size`)."""

    def __init__(self, max_size: int = 10_000) -> None:
        self._by_session: BoundedLRU[str, RolloutStats] = BoundedLRU(max_size, what="session stats")
        self.max_size = max_size

    def __len__(self) -> int:
        return len(self._by_session)

    def record(self, session_id: str | None, output: Any) -> None:
        """Fold one `/generate` output in; outputs without a session or `meta_info` are skipped."""
        meta = output.get("meta_info") if isinstance(output, Mapping) else None
        if session_id and isinstance(meta, Mapping):
            self._by_session.touch(session_id, RolloutStats).add(meta)

    def record_abort(self, session_id: str | None) -> None:
        """The engine aborted this session's request (there is no valid output to fold in)."""
        if session_id:
            self._by_session.touch(session_id, RolloutStats).last_finish = "abort"

    def get(self, session_id: str) -> RolloutStats | None:
        return self._by_session.get(session_id)


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
