"""Miles' reward and filter hooks (docs/contract.md §8.2) as trainer-neutral `RolloutHooks`.

Consumes the Miles namespace (the hooks are called with it, as Miles calls them), `Settings`
and the trainer's data source. Emits `RolloutHooks` for the orchestrator:

  * reward — `--rm-type` / `--custom-rm-path` (train and eval): through Miles' own
    `rm_hub.async_rm` (per sample) or `batched_async_rm` (`--group-rm`) when Miles is
    importable, so built-in types, `reward_spec` and `metadata["rm_type"]` resolve as in Miles;
    without Miles only `--custom-rm-path` works (`await fn(args, sample)`, or
    `fn(args, samples)` with `--group-rm`), and a built-in `--rm-type` is refused here.
    The hook scores each rollout's main sample; nested siblings get the same reward.
  * keep — `--dynamic-sampling-filter-path` `fn(args, group)` → `DynamicFilterOutput` or bool;
    drops are counted as `rollout/dynamic_filter/drop_<reason>` (Miles' name).
  * sample_filter — `--rollout-sample-filter-path` `fn(args, data)` on the kept groups
    (it sets `remove_sample`); all_samples — `--rollout-all-samples-process-path`
    `fn(args, all_groups, data_source)` on every converted group, filtered ones included.

`score(reward, entries)` applies the reward hook to a group's entries (train) or to eval samples.

Start-up refusals (`ConfigurationError` naming the flag): a built-in `--rm-type` without Miles;
multi-LoRA (`--multi-lora-n-adapters`), whose per-adapter routing (`adapter`, `reward_spec`)
Verifiers episodes cannot carry.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from adapter.config.settings import Settings
from adapter.errors import ConfigurationError
from adapter.samples.conversion import flatten, main_sample

RewardHook = Callable[[list[Any]], Awaitable[Sequence[Any]]]
FilterHook = Callable[[list[Any]], tuple[bool, str | None]]
GroupsHook = Callable[[list[list[Any]]], None]


@dataclass(frozen=True)
class RolloutHooks:
    """Trainer hooks (built from Miles' flags by adapter.rollout.hooks): `reward` returns one reward
    per given sample (each rollout's main sample; overrides the Verifiers reward, train and
    eval); `keep` is the dynamic filter on a group's entries, returning (keep, reason);
    `sample_filter` sees the kept groups, `all_samples` every converted group (filtered too)."""

    reward: RewardHook | None = None
    keep: FilterHook | None = None
    sample_filter: GroupsHook | None = None
    all_samples: GroupsHook | None = None
    # an observer: called with each group the train loop keeps, as it is kept (CLI progress)
    on_group: Callable[[list[Any]], None] | None = None


async def score(reward: RewardHook | None, entries: list[Any]) -> str | None:
    """Apply the reward hook to each rollout's main sample; nested siblings get the same
    reward (Miles requires one reward per rollout). A message when the count is wrong."""
    if reward is None:
        return None
    mains = [main_sample(entry) for entry in entries]
    rewards = list(await reward(mains))
    if len(rewards) != len(mains):
        return f"reward hook returned {len(rewards)} rewards for {len(mains)} rollouts"
    for entry, value in zip(entries, rewards, strict=True):
        for sample in flatten([entry]):
            sample.reward = value
    return None


def load_function(path: str) -> Any:
    """`pkg.module.attr` or `pkg.module:attr` → the object."""
    module_name, _, attr = path.replace(":", ".").rpartition(".")
    if not module_name:
        raise ConfigurationError(f"function path {path!r} must be `module.attr`")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(f"cannot load {path!r}: {exc}") from exc


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def miles_rm_hub() -> Any | None:
    """Miles' `rm_hub` module, or None when Miles is not importable."""
    try:
        return importlib.import_module("miles.rollout.rm_hub")
    except ImportError:
        return None


def check_hook_flags(settings: Settings, *, rm_hub: Any | None) -> None:
    """The refusals that depend on hooks (see the module docstring)."""
    if settings.multi_lora_n_adapters > 0:
        raise ConfigurationError(
            f"--multi-lora-n-adapters {settings.multi_lora_n_adapters} turns on multi-LoRA: Miles then "
            "routes each sample by its `adapter` and scores it by its `reward_spec`, which Verifiers "
            "episodes do not carry; remove --multi-lora-n-adapters (single-adapter LoRA works)")
    if settings.rm_type and rm_hub is None:
        raise ConfigurationError(
            f"--rm-type {settings.rm_type!r} needs Miles' reward hub (miles.rollout.rm_hub), which is "
            "not importable here: run inside Miles, or use --custom-rm-path module.fn instead "
            "(or drop --rm-type: the Verifiers taskset scores every trace)")


def _reward_hook(args: Any, settings: Settings, rm_hub: Any | None) -> Any:
    if not (settings.rm_type or settings.custom_rm_path):
        return None
    if rm_hub is not None:
        async def miles_reward(samples: list[Any]) -> Sequence[Any]:
            if settings.group_rm:
                return list(await rm_hub.batched_async_rm(args, samples))
            return [await rm_hub.async_rm(args, sample) for sample in samples]

        return miles_reward
    rm = load_function(str(settings.custom_rm_path))

    async def reward(samples: list[Any]) -> Sequence[Any]:
        if settings.group_rm:
            return list(await _maybe_await(rm(args, samples)))
        return [await _maybe_await(rm(args, sample)) for sample in samples]

    return reward


def _keep_hook(args: Any, settings: Settings) -> Any:
    if not settings.dynamic_sampling_filter_path:
        return None
    dynamic_filter = load_function(settings.dynamic_sampling_filter_path)

    def keep(group: list[Any]) -> tuple[bool, str | None]:
        verdict = dynamic_filter(args, group)
        if isinstance(verdict, bool):
            return verdict, None
        return bool(verdict.keep), getattr(verdict, "reason", None)

    return keep


def miles_hooks(args: Any, settings: Settings, *, data_source: Any = None) -> RolloutHooks:
    """The trainer's hooks, every function loaded (and every refusal raised) now."""
    rm_hub = miles_rm_hub() if settings.rm_type or settings.custom_rm_path else None
    check_hook_flags(settings, rm_hub=rm_hub)
    sample_filter = all_samples = None
    if settings.rollout_sample_filter_path:
        filter_fn = load_function(settings.rollout_sample_filter_path)

        def sample_filter(data: list[list[Any]]) -> None:
            filter_fn(args, data)

    if settings.rollout_all_samples_process_path:
        process_fn = load_function(settings.rollout_all_samples_process_path)

        def all_samples(groups: list[list[Any]]) -> None:
            process_fn(args, groups, data_source)

    return RolloutHooks(reward=_reward_hook(args, settings, rm_hub), keep=_keep_hook(args, settings),
                        sample_filter=sample_filter, all_samples=all_samples)
