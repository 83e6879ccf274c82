"""Per-session SGLang `meta_info` stats: what the engine said about each rollout's turns.

The bridge calls `SessionStats.record(session_id, output)` after every valid engine answer, and
`record_abort(session_id)` when SGLang aborted the request (the session id is Verifiers'
`X-Session-ID`, i.e. the trace id). The sample builder then takes a
trace's `RolloutStats` and folds them into its samples the way Miles'
`Sample.update_from_meta_info` does (docs/contract.md §8.1):

  * `weight_versions`: SGLang's `weight_version` of every turn, in order (on every sample of
    the rollout: each was generated under those weights);
  * `turns`: per engine call, where its output starts in the token sequence (the prompt's
    length) and its weight-version spans relative to that output, so a Miles whose `Sample`
    holds `WeightVersionsPerCall` gets spans at absolute offsets (`adapter.samples.weight_spans`);
  * `prefix_cache_info`: summed `cached_tokens` and `prompt_tokens` (on the rollout's main
    sample only, so summing over samples counts each engine call once);
  * `spec_info`: summed speculative-decoding counters, only when the engine reports them
    (SGLang sends them only with a speculative algorithm); main sample only, as above;
  * the last finish reason, for the status (`abort` → ABORTED).

The store is a bounded LRU (like the bridge's session memory), so a long run cannot grow it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from adapter.bridge.lru import BoundedLRU
from adapter.wire.translate import weight_spans
from adapter.wire.types import MetaInfo

# Miles' `Sample.SpecInfo` field ← the `meta_info` counter SGLang sends for it
SPEC_FIELDS = (
    ("spec_accept_token_num", "spec_num_correct_drafts"),
    ("spec_draft_token_num", "spec_num_proposed_drafts"),
    ("spec_verify_ct", "spec_verify_ct"),
    ("completion_token_num", "completion_tokens"),
)
SPEC_KEYS = tuple(key for _, key in SPEC_FIELDS[:3])  # their presence means a speculative algorithm ran


def answer_versions(meta: MetaInfo) -> list[str]:
    """The weight versions one answer was sampled under, in order, each once: 0.5.23's
    `weight_versions` spans, else the single `weight_version` of older servers."""
    if meta.weight_versions:
        return list(dict.fromkeys(str(span.version) for span in meta.weight_versions))
    return [] if meta.weight_version is None else [str(meta.weight_version)]


@dataclass(frozen=True)
class TurnVersions:
    """One engine call: its output is tokens [output_start, output_start + output_len) of the
    sequence it extends; `spans` are (version, start, end) relative to that output."""

    output_start: int
    output_len: int
    spans: tuple[tuple[str, int, int], ...]


def turn_versions(meta: MetaInfo, output_start: int) -> TurnVersions:
    """One answer's spans as Miles' `WeightVersionsPerCall.from_meta_info` reads them
    (`adapter.wire.translate.weight_spans`: the same spans the bridge answers the client)."""
    return TurnVersions(output_start, len(meta.output_token_logprobs or ()), tuple(weight_spans(meta)))


@dataclass
class RolloutStats:
    """Everything the engine reported for one session (one trace), summed over its turns."""

    calls: int = 0
    weight_versions: list[str] = field(default_factory=list)
    cached_tokens: int = 0
    prompt_tokens: int = 0
    spec: dict[str, int] | None = None  # None: the engine never reported speculative counters
    last_finish: str | None = None
    # per call, in order; only calls whose prompt length the bridge knew (not part of equality)
    turns: list[TurnVersions] = field(default_factory=list, compare=False)

    def add(self, meta: MetaInfo, *, prompt_len: int | None = None) -> None:
        self.calls += 1
        self.weight_versions += answer_versions(meta)
        if prompt_len is not None:
            self.turns.append(turn_versions(meta, prompt_len))
        self.cached_tokens += meta.cached_tokens or 0
        self.prompt_tokens += meta.prompt_tokens or 0
        if any(getattr(meta, key) is not None for key in SPEC_KEYS):
            spec = self.spec if self.spec is not None else dict.fromkeys((name for name, _ in SPEC_FIELDS), 0)
            for name, key in SPEC_FIELDS:
                spec[name] += getattr(meta, key) or 0
            self.spec = spec
        finish = meta.finish_reason
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
        self.aborted = 0  # requests the engine answered as aborted, over the bridge's life

    def __len__(self) -> int:
        return len(self._by_session)

    def record(self, session_id: str | None, meta: MetaInfo, *, prompt_len: int | None = None) -> None:
        """Fold one validated `/generate` output's `meta_info` in (nothing without a session);
        `prompt_len`: the request's prompt tokens, where this answer's output starts."""
        if session_id:
            self._by_session.touch(session_id, RolloutStats).add(meta, prompt_len=prompt_len)

    def record_abort(self, session_id: str | None) -> None:
        """The engine aborted this session's request (there is no valid output to fold in)."""
        self.aborted += 1
        if session_id:
            self._by_session.touch(session_id, RolloutStats).last_finish = "abort"

    def get(self, session_id: str) -> RolloutStats | None:
        return self._by_session.get(session_id)
