"""The Miles-compatible `Sample`: Miles' own class when `miles` is importable, else ours.

Ours has exactly the fields, annotations, defaults and `Status` values of Miles' `Sample` at
the commit recorded in `fixtures/miles/sample-31f1ca961.json` (docs/contract.md §4) — e.g. no
`session_id`, which Miles renamed `routing_key` — plus the methods Miles calls on it
(`to_dict`, `from_dict`, `get_reward_value`, `validate`, `effective_response_length`, ...).
`tests/miles/test_sample_fidelity.py` fails when it drifts from that table. Where Miles asserts,
ours raises `ValueError` naming the lengths.

`sample_class()` decides once per process which class the adapter builds samples with;
`identity_fields(cls, ...)` fits the rollout identity to the fields that class has: Miles main's
`routing_key` (and `rollout_id`, set on the siblings of a multi-branch rollout only), or the
published miles-rl 0.0.2's `session_id` and no `rollout_id`
(fixtures/miles/sample-miles-rl-0.0.2.json). A rollout 0.0.2 cannot represent (several branches:
nothing would keep the siblings together) is refused with a typed error.
"""

from __future__ import annotations

import enum
import functools
import importlib
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from adapter.errors import TrainerSampleError
from adapter.samples.miles_or_ours import miles_or_ours

if TYPE_CHECKING:
    import numpy


@dataclass(frozen=True)
class AdapterRef:
    """Which LoRA adapter a sample is bound to (multi-LoRA); the adapter never sets it."""

    name: str
    slot: int


@dataclass(frozen=True)
class RewardSpec:
    """A per-sample reward override (multi-LoRA); the adapter never sets it."""

    rm_type: str | None = None
    custom_rm_path: str | None = None


@dataclass
class Sample:
    """One training sample (one trace branch), field-compatible with `miles.utils.types.Sample`."""

    class Status(enum.Enum):
        PENDING = "pending"
        COMPLETED = "completed"
        TRUNCATED = "truncated"
        ABORTED = "aborted"
        FAILED = "failed"

    @dataclass
    class SpecInfo:
        """Speculative-decoding counters summed over a rollout's engine calls."""

        spec_accept_token_num: int = 0
        spec_draft_token_num: int = 0
        spec_verify_ct: int = 0
        completion_token_num: int = 0

        def to_dict(self) -> dict[str, int]:
            return {f.name: getattr(self, f.name) for f in fields(self)}

        @staticmethod
        def from_dict(data: dict[str, Any]) -> Sample.SpecInfo:
            return Sample.SpecInfo(**{f.name: data.get(f.name, 0) for f in fields(Sample.SpecInfo)})

    @dataclass
    class PrefixCacheInfo:
        """Prompt tokens sent and prompt tokens served from SGLang's prefix cache."""

        cached_tokens: int = 0
        total_prompt_tokens: int = 0

        @property
        def prefix_cache_hit_rate(self) -> float:
            return self.cached_tokens / self.total_prompt_tokens if self.total_prompt_tokens > 0 else 0.0

        def to_dict(self) -> dict[str, int]:
            return {f.name: getattr(self, f.name) for f in fields(self)}

        @staticmethod
        def from_dict(data: dict[str, Any]) -> Sample.PrefixCacheInfo:
            return Sample.PrefixCacheInfo(**{f.name: data.get(f.name, 0) for f in fields(Sample.PrefixCacheInfo)})

    group_index: int | None = None
    index: int | None = None
    rollout_id: int | None = None
    prompt: str | list[dict[str, str]] = ""
    tokens: list[int] = field(default_factory=list)
    multimodal_inputs: dict[str, Any] = None  # type: ignore[assignment]  # Miles' own annotation
    multimodal_train_inputs: dict[str, Any] = None  # type: ignore[assignment]  # Miles' own annotation
    response: str = ""
    response_length: int = 0
    label: str | None = None
    reward: float | dict[str, Any] | None = None
    loss_mask: list[int] | None = None
    weight_versions: list[str] = field(default_factory=list)
    rollout_log_probs: list[float] | None = None
    rollout_routed_experts: numpy.ndarray | None = None
    rollout_indexer_topk: numpy.ndarray | None = None
    remove_sample: bool = False
    teacher_log_probs: list[float] | None = None
    opd_reverse_kl: list[float] | None = None
    status: Status = Status.PENDING
    metadata: dict = field(default_factory=dict)  # type: ignore[type-arg]  # Miles' own annotation
    generate_function_path: str | None = None
    train_metadata: dict | None = None  # type: ignore[type-arg]  # Miles' own annotation
    adapter: AdapterRef | None = None
    reward_spec: RewardSpec | None = None
    routing_key: str | None = None
    non_generation_time: float = 0.0
    spec_info: SpecInfo = field(default_factory=SpecInfo)
    prefix_cache_info: PrefixCacheInfo = field(default_factory=PrefixCacheInfo)

    def to_dict(self) -> dict[str, Any]:
        value = dict(self.__dict__)
        value["status"] = self.status.value
        value["spec_info"] = self.spec_info.to_dict()
        value["prefix_cache_info"] = self.prefix_cache_info.to_dict()
        return value

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Sample:
        """The inverse of `to_dict`; `"status"` is required; unknown keys become attributes."""
        data = dict(data)
        data["status"] = Sample.Status(data["status"])
        data["spec_info"] = Sample.SpecInfo.from_dict(data.get("spec_info", {}))
        data["prefix_cache_info"] = Sample.PrefixCacheInfo.from_dict(data.get("prefix_cache_info", {}))
        names = {f.name for f in fields(Sample)}
        sample = Sample(**{k: v for k, v in data.items() if k in names})
        for key, value in data.items():
            if key not in names:
                setattr(sample, key, value)
        return sample

    def get_reward_value(self, args: Any) -> Any:
        """The training reward: `reward[args.reward_key]` when a key is set (never the eval key)."""
        key = args.reward_key
        return self.reward if not key else self.reward[key]  # type: ignore[index]

    @property
    def effective_response_length(self) -> int:
        return sum(self.loss_mask) if self.loss_mask is not None else self.response_length

    @property
    def oldest_weight_version(self) -> int | None:
        numeric = [int(v) for v in self.weight_versions if str(v).isdigit()]
        return min(numeric) if numeric else None

    def validate(self) -> None:
        """Miles' per-token invariants, as `ValueError`s naming the lengths."""
        if self.response_length < 0:
            raise ValueError(f"response_length must be >= 0, got {self.response_length}")
        if len(self.tokens) < self.response_length:
            raise ValueError(f"tokens length ({len(self.tokens)}) must be >= response_length "
                             f"({self.response_length})")
        for name in ("loss_mask", "rollout_log_probs", "teacher_log_probs", "opd_reverse_kl"):
            value = getattr(self, name)
            if value is not None and len(value) != self.response_length:
                raise ValueError(f"{name} length ({len(value)}) != response_length ({self.response_length})")
        for name in ("rollout_routed_experts", "rollout_indexer_topk"):
            value = getattr(self, name)
            if value is not None and len(value) != len(self.tokens) - 1:
                raise ValueError(f"{name} length ({len(value)}) != len(tokens) - 1 ({len(self.tokens) - 1})")

    def strip_last_output_tokens(self, n: int, tokenizer: Any) -> None:
        """Drop the last `n` response tokens and their per-token data."""
        if n <= 0:
            return
        if n > self.response_length:
            raise ValueError(f"cannot strip {n} tokens: only {self.response_length} output tokens available")
        self.tokens = self.tokens[:-n]
        self.response_length -= n
        for name in ("rollout_log_probs", "teacher_log_probs", "opd_reverse_kl", "loss_mask",
                     "rollout_routed_experts", "rollout_indexer_topk"):
            value = getattr(self, name)
            if value is not None:
                setattr(self, name, value[:-n])
        self.response = tokenizer.decode(self.tokens[-self.response_length:]) if self.response_length > 0 else ""

    def reset_for_retry(self) -> None:
        """Forget the generated part (identity, prompt, label, metadata stay); status ABORTED."""
        keep = {"group_index", "index", "rollout_id", "prompt", "label", "multimodal_inputs", "metadata",
                "generate_function_path", "routing_key", "adapter", "reward_spec", "teacher_log_probs",
                "opd_reverse_kl"}
        for f in fields(self):
            if f.name not in keep:
                default = f.default_factory() if callable(f.default_factory) else f.default
                setattr(self, f.name, default)
        self.status = Sample.Status.ABORTED

    def update_from_meta_info(self, args: Any, meta_info: dict[str, Any]) -> None:
        """Fold one SGLang `meta_info` in: spec counters (only with a speculative algorithm),
        prefix-cache counters, the weight version, and the finish reason as a status."""
        if getattr(args, "sglang_speculative_algorithm", None):
            spec = self.spec_info
            spec.spec_accept_token_num += meta_info.get("spec_accept_token_num", 0)
            spec.spec_draft_token_num += meta_info.get("spec_draft_token_num", 0)
            spec.spec_verify_ct += meta_info.get("spec_verify_ct", 0)
            spec.completion_token_num += meta_info.get("completion_tokens", 0)
        self.prefix_cache_info.cached_tokens += meta_info.get("cached_tokens", 0)
        self.prefix_cache_info.total_prompt_tokens += meta_info.get("prompt_tokens", 0)
        if "weight_version" in meta_info:
            self.weight_versions.append(meta_info["weight_version"])
        status = FINISH_STATUS.get(meta_info["finish_reason"]["type"])
        if status is not None:
            self.status = Sample.Status(status)


# SGLang's finish_reason.type → the status Miles gives the sample (other types leave it).
FINISH_STATUS: dict[str, str] = {"length": "truncated", "abort": "aborted", "stop": "completed"}

Status = Sample.Status
SpecInfo = Sample.SpecInfo
PrefixCacheInfo = Sample.PrefixCacheInfo


@functools.cache
def sample_class() -> type[Sample]:
    """Miles' `Sample` when Miles is importable (the trainer's own type), else ours. Decided
    once per process (`sample_class.cache_clear()` re-decides, for tests)."""
    (resolved,) = miles_or_ours("miles.utils.types", {"Sample": Sample})
    sample: type[Sample] = resolved  # field-compatible (tests/miles/test_miles_standin.py)
    return sample


@functools.cache
def span_classes() -> tuple[type, type] | None:
    """`(WeightVersionsPerCall, WeightVersionSpan)` when the installed Miles' `Sample` holds weight
    versions as spans per engine call (Miles #1891 on), else None: `weight_versions` is then
    `list[str]`, one version per turn (Miles main at 31f1ca961, miles-rl 0.0.2, and ours).
    Decided by what `miles.utils.types` has, never by a version string."""
    try:
        types = importlib.import_module("miles.utils.types")
    except ImportError:
        return None
    per_call, span = getattr(types, "WeightVersionsPerCall", None), getattr(types, "WeightVersionSpan", None)
    return None if per_call is None or span is None else (per_call, span)


# The field that carries the routing key (the trace id): Miles from #1703 on, then miles-rl 0.0.2.
ROUTING_FIELDS = ("routing_key", "session_id")


@functools.cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in fields(cls))


def identity_fields(cls: type, *, trace_id: str, rollout_id: int, branches: int) -> dict[str, Any]:
    """The routing key under the name `cls` has; `rollout_id` only on the siblings of a
    multi-branch rollout (Miles' `validate_compact_rollout_ids` needs it there, and any sample
    carrying one makes Miles treat the whole batch as compact: never trimmed to a multiple of
    --global-batch-size, no dynamic batch size), left None on a plain sample as Miles' own example
    does. A multi-branch rollout with no `rollout_id` field (miles-rl 0.0.2) is a `TrainerSampleError`."""
    names = _field_names(cls)
    routing = [name for name in ROUTING_FIELDS if name in names][:1]
    identity: dict[str, Any] = {name: trace_id for name in routing}
    if branches < 2:
        return identity  # Miles treats a batch with any rollout_id as compact: only siblings carry one
    if "rollout_id" in names:
        identity["rollout_id"] = rollout_id
    else:
        raise TrainerSampleError(
            f"trace {trace_id!r} has {branches} branches (compaction or sub-agents), but the installed "
            f"{cls.__module__}.Sample has no rollout_id (miles-rl 0.0.2), so Miles cannot keep a rollout's "
            "samples together: install Miles main (rollout_id, #1927) or use a harness that keeps one branch"
        )
    return identity
