"""Miles' rollout-function ABI types: `miles.rollout.base_types` when Miles is importable,
field-compatible stand-ins otherwise (same names, fields and defaults as the table in
fixtures/miles/sample-31f1ca961.json, same `evaluation` property; checked by
tests/miles/test_sample_fidelity.py). `abi_types()` decides once per process.

`rollout_fn_base()`: the base class Miles requires of a class-based rollout function, where the
installed Miles has one (`BaseRolloutFn`, Miles #1845 on: its `load_rollout_function` refuses a
class that does not subclass it), else `object` (Miles main at 31f1ca961, miles-rl 0.0.2)."""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from typing import Any

from adapter.samples.miles_or_ours import miles_or_ours


@dataclass(frozen=True)
class RolloutFnConstructorInput:
    args: Any
    data_source: Any


@dataclass(frozen=True)
class RolloutFnTrainInput:
    rollout_id: int
    weight_version: int | None = None

    @property
    def evaluation(self) -> bool:
        return False


@dataclass(frozen=True)
class RolloutFnEvalInput:
    rollout_id: int
    generate_state: Any = None
    weight_version: str | None = None
    hf_dir: str | None = None

    @property
    def evaluation(self) -> bool:
        return True


@dataclass
class RolloutFnTrainOutput:
    samples: list[list[Any]]
    metrics: dict[str, Any] | None = None


@dataclass
class RolloutFnEvalOutput:
    data: dict[str, dict[str, Any]]
    metrics: dict[str, Any] | None = None


@functools.cache
def abi_types() -> tuple[type, type, type, type, type]:
    """(ConstructorInput, TrainInput, EvalInput, TrainOutput, EvalOutput): Miles' own or ours
    (`abi_types.cache_clear()` re-decides, for tests)."""
    return miles_or_ours("miles.rollout.base_types", {
        "RolloutFnConstructorInput": RolloutFnConstructorInput, "RolloutFnTrainInput": RolloutFnTrainInput,
        "RolloutFnEvalInput": RolloutFnEvalInput, "RolloutFnTrainOutput": RolloutFnTrainOutput,
        "RolloutFnEvalOutput": RolloutFnEvalOutput})


def rollout_fn_base() -> type:
    """Miles' `BaseRolloutFn` when the importable Miles has it, else `object`."""
    try:
        base_types = importlib.import_module("miles.rollout.base_types")
    except ImportError:
        return object
    base: type = getattr(base_types, "BaseRolloutFn", object)
    return base
