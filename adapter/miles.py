"""The Miles binding: the rollout-function class ABI and the legacy function ABI.

    --rollout-function-path adapter.miles.VerifiersRolloutFn     (default)
    --rollout-function-path adapter.miles.generate_rollout       (MILES_USE_LEGACY_ROLLOUT_V1=1)

Both run the same `Orchestrator`; `adapter.launcher` picks one from a single merged
environment that the Ray workers also receive. Everything is checked when the function is
built, before any episode: versions, trainer options, the EnvConfig, the taskset.
The EnvConfig comes from `--verifiers-config` or `VERIFIERS_CONFIG`.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
from collections.abc import Sequence
from typing import Any

from adapter.errors import ConfigurationError
from adapter.jobs import prepare_orchestrator
from adapter.miles_types import abi_types
from adapter.rollout import Orchestrator, RolloutHooks
from adapter.settings import Settings
from adapter.sglang import router_url


def load_function(path: str) -> Any:
    """`pkg.module.attr` or `pkg.module:attr` → the object (Miles' own loader when present)."""
    module_name, _, attr = path.replace(":", ".").rpartition(".")
    if not module_name:
        raise ConfigurationError(f"function path {path!r} must be `module.attr`")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(f"cannot load {path!r}: {exc}") from exc


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def miles_hooks(args: Any, settings: Settings) -> RolloutHooks:
    """The trainer's reward override (--custom-rm-path, --group-rm) and dynamic filter
    (--dynamic-sampling-filter-path) as trainer-neutral hooks."""
    reward = None
    if settings.custom_rm_path:
        rm = load_function(settings.custom_rm_path)

        async def reward(samples: list[Any]) -> Sequence[Any]:
            if settings.group_rm:
                return list(await _maybe_await(rm(args, samples)))
            return [await _maybe_await(rm(args, sample)) for sample in samples]

    keep = None
    if settings.dynamic_sampling_filter_path:
        dynamic_filter = load_function(settings.dynamic_sampling_filter_path)

        def keep(samples: list[Any]) -> tuple[bool, str | None]:
            verdict = dynamic_filter(args, samples)
            if isinstance(verdict, bool):
                return verdict, None
            return bool(verdict.keep), getattr(verdict, "reason", None)

    return RolloutHooks(reward=reward, keep=keep)


def build_orchestrator(args: Any) -> Orchestrator:
    """Everything the rollout function needs, checked before any episode runs. The router
    address is read from `args` at call time (Miles fills it in after building us)."""
    settings = Settings.from_args(args)
    return prepare_orchestrator(settings, engine_url=lambda: router_url(args), hooks=miles_hooks(args, settings))


class VerifiersRolloutFn:
    """Miles' class ABI: constructed once with `RolloutFnConstructorInput(args, data_source)`,
    then awaited with a train input (rollout_id) or an eval input."""

    def __init__(self, constructor_input: Any) -> None:
        self.constructor_input = constructor_input
        self.args = constructor_input.args
        self.orchestrator = build_orchestrator(self.args)

    @classmethod
    def add_arguments(cls, parser: Any) -> None:
        """Miles calls this with its argument parser when it loads the class."""
        parser.add_argument("--verifiers-config", default=None,
                            help="Verifiers V1 EnvConfig TOML (or set VERIFIERS_CONFIG)")
        parser.add_argument("--renderer-model-name", default=None,
                            help="registered model id whose renderer formats prompts (default: from --hf-checkpoint)")

    async def __call__(self, rollout_input: Any) -> Any:
        _, _, _, train_output, eval_output = abi_types()
        if rollout_input.evaluation:
            result = await self.orchestrator.evaluate()
            return eval_output(data=result.data, metrics=result.metrics)
        train = await self.orchestrator.train(rollout_input.rollout_id)
        return train_output(samples=train.groups, metrics=train.metrics)

    def save(self, *args: Any) -> None:
        """Nothing to save: the task cursor restarts from `rollout_id × batch` on resume."""

    def load(self, *args: Any) -> None:
        """Nothing to load (see `save`)."""


_LEGACY: dict[tuple[int, int], VerifiersRolloutFn] = {}


def generate_rollout(args: Any, rollout_id: int, data_source: Any, evaluation: bool = False) -> Any:
    """Miles' legacy function ABI. Miles calls it from a worker thread (no running loop); one
    `VerifiersRolloutFn` per (args, data_source) keeps the task cursor between calls."""
    constructor, train_input, eval_input, _, _ = abi_types()
    key = (id(args), id(data_source))
    if key not in _LEGACY:
        _LEGACY[key] = VerifiersRolloutFn(constructor(args=args, data_source=data_source))
    rollout_input = eval_input(rollout_id=rollout_id) if evaluation else train_input(rollout_id=rollout_id)
    return asyncio.run(_LEGACY[key](rollout_input))
