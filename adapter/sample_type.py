"""The Miles-compatible `Sample`: Miles' own class when `miles` is importable, else ours.

Ours has Miles' field names, defaults, `Status` values, `get_reward_value(args)`,
`to_dict`/`from_dict` and `validate`, so downstream code cannot tell the two apart. Two fields
are the adapter's additions, set as attributes on Miles' class too: `rollout_id` (samples of
one trace share it, and with it their reward) and `routing_key` (the trace id used to route
generation; Miles' own `session_id` carries the same value).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar


class Status(enum.Enum):
    PENDING = "pending"
    COMPLETED = "completed"
    TRUNCATED = "truncated"
    ABORTED = "aborted"
    FAILED = "failed"


@dataclass
class SpecInfo:
    spec_accept_token_num: int = 0
    spec_draft_token_num: int = 0
    spec_verify_ct: int = 0
    completion_token_num: int = 0

    def to_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass
class PrefixCacheInfo:
    cached_tokens: int = 0
    total_prompt_tokens: int = 0

    def to_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


SampleStatus = Status  # the field's type, by a name the class attribute below cannot shadow


@dataclass
class Sample:
    """One training sample (one trace branch), field-compatible with `miles.utils.types.Sample`."""

    Status: ClassVar[type[Status]] = Status  # Miles spells it `Sample.Status.COMPLETED`

    group_index: int | None = None
    index: int | None = None
    prompt: str | list[dict[str, Any]] = ""
    tokens: list[int] = field(default_factory=list)
    multimodal_inputs: dict[str, Any] | None = None
    multimodal_train_inputs: dict[str, Any] | None = None
    response: str = ""
    response_length: int = 0
    label: str | None = None
    reward: float | dict[str, Any] | None = None
    loss_mask: list[int] | None = None
    weight_versions: list[str] = field(default_factory=list)
    rollout_log_probs: list[float] | None = None
    rollout_routed_experts: Any = None
    remove_sample: bool = False
    status: SampleStatus = SampleStatus.PENDING
    metadata: dict[str, Any] = field(default_factory=dict)
    generate_function_path: str | None = None
    train_metadata: dict[str, Any] | None = None
    session_id: str | None = None
    non_generation_time: float = 0.0
    spec_info: SpecInfo = field(default_factory=SpecInfo)
    prefix_cache_info: PrefixCacheInfo = field(default_factory=PrefixCacheInfo)
    # The adapter's additions (see the module docstring).
    rollout_id: str | None = None
    routing_key: str | None = None

    def to_dict(self) -> dict[str, Any]:
        value = dict(self.__dict__)
        value["status"] = self.status.value
        value["spec_info"] = self.spec_info.to_dict()
        value["prefix_cache_info"] = self.prefix_cache_info.to_dict()
        return value

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Sample:
        data = dict(data)
        data["status"] = Status(data.get("status", Status.PENDING.value))
        data["spec_info"] = SpecInfo(**data.get("spec_info", {}))
        data["prefix_cache_info"] = PrefixCacheInfo(**data.get("prefix_cache_info", {}))
        names = {f.name for f in fields(Sample)}
        sample = Sample(**{k: v for k, v in data.items() if k in names})
        for key, value in data.items():
            if key not in names:
                setattr(sample, key, value)
        return sample

    def get_reward_value(self, args: Any) -> Any:
        key = getattr(args, "reward_key", None)
        return self.reward if not key else self.reward[key]  # type: ignore[index]

    @property
    def effective_response_length(self) -> int:
        return sum(self.loss_mask) if self.loss_mask is not None else self.response_length

    def validate(self) -> None:
        """Miles' invariants, as `ValueError`s naming the lengths."""
        if self.response_length < 0:
            raise ValueError(f"response_length must be >= 0, got {self.response_length}")
        if len(self.tokens) < self.response_length:
            raise ValueError(
                f"tokens length ({len(self.tokens)}) must be >= response_length "
                f"({self.response_length})"
            )
        for name in ("loss_mask", "rollout_log_probs"):
            value = getattr(self, name)
            if value is not None and len(value) != self.response_length:
                raise ValueError(
                    f"{name} length ({len(value)}) != response_length ({self.response_length})"
                )


def sample_class() -> type[Sample]:
    """Miles' `Sample` when Miles is importable (the trainer's own type), else ours."""
    try:
        from miles.utils.types import Sample as MilesSample
    except ImportError:
        return Sample
    miles_sample: type[Sample] = MilesSample  # field-compatible with ours (the module docstring)
    return miles_sample
