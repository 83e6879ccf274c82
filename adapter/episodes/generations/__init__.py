"""One typed seam per Verifiers API generation, chosen once by the version gate.

    A  verifiers 0.2.x                       adapter.episodes.generations.a.GenerationA
    B  verifiers 0.3.x, 0.4.0, 0.4.1.dev86   adapter.episodes.generations.b.GenerationB

`GenerationSpec` holds what is known without importing Verifiers: the config shape, the
bundled fixtures and where the episode runner lives. `EpisodeBackend` is the Protocol every
runner implements (tasks, group rewards, serving, the bridge client, a group of n rollouts).
`installed()` picks the spec from `adapter.versions.gate.require_supported()`; `harness_runtime`
says which harness runtime its episodes run with (adapter.episodes.prefork).
`unsupported_feature` is the one refusal both shims raise when Verifiers' TrainClient or
Renderers raised `NotImplementedError` (A catches it in process, B reads the type Verifiers
recorded on the model call): the run stops at the first group instead of resampling.
Everything outside this package is generation-neutral: it never compares generation names.
Import a runner module only through `GenerationSpec.load`: each imports its Verifiers release.
"""

from __future__ import annotations

import importlib
import importlib.metadata as metadata
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from adapter.episodes import bundled, harness_pins, prefork, reaper
from adapter.errors import EnvConfigError, UnsupportedFeatureError
from adapter.versions.gate import PREFORK_PROVEN, Generation, require_supported

if TYPE_CHECKING:
    import asyncio

    from adapter.config.env_config import EnvConfigFile
    from adapter.config.settings import Settings


class EpisodeBackend(Protocol):
    """A generation's episode runner over one loaded environment."""

    @property
    def tasks(self) -> Sequence[Any]: ...

    @property
    def has_group_reward(self) -> bool: ...

    def serving(self) -> AbstractAsyncContextManager[Any]:
        """The environment's own resources (interception pool, shared tool servers), for the run."""
        ...

    def sized_serving(self, n: int) -> AbstractAsyncContextManager[Any] | None:
        """What groups of n need served beside `serving()` (generation B: a group-reward env
        loaded again with the in-episode n when the TOML's differs), or None: nothing. Entered,
        like `serving()`, by whoever holds the run's resources, once per n."""
        ...

    def release(self) -> None:
        """Undo what loading changed for the whole process (the harness programs it held), once the
        rollout function is done: its `RunLifetime` calls this as it closes."""
        ...

    def connect(self, app: Any, *, tokenizer_path: str | None = None, renderer_model_name: str | None = None,
                pool_size: int = 1) -> AbstractAsyncContextManager[Any]:
        """The client episodes call the bridge `app` through (A: in process; B: served on loopback),
        open until the context exits."""
        ...

    async def run_group(self, task_index: int, *, n: int, client: Any, model: str, settings: Settings,
                        seed_base: int | None, semaphore: asyncio.Semaphore) -> list[Any]:
        """The n traces of one task; raises `EpisodeError` for a failed episode (data)."""
        ...


@dataclass(frozen=True)
class GenerationSpec:
    name: Generation
    releases: str  # the verifiers releases of this generation, for messages
    role_table: str  # the top-level table that marks this generation's config shape
    shape: str  # that shape, in words
    bundle: str  # the root under adapter/episodes/bundled
    runner: str  # "module:Class" of the EpisodeBackend

    def load(self, config_data: Mapping[str, Any]) -> EpisodeBackend:
        reaper.ensure()  # what the episodes start does not outlive this process (adapter.episodes.reaper)
        module, _, cls = self.runner.partition(":")
        backend: EpisodeBackend = getattr(importlib.import_module(module), cls)(config_data)
        return backend

    def bundled_tasksets(self) -> Path:
        return bundled.root(self.bundle) / "tasksets"

    def bundled_envs(self) -> Path:
        return bundled.root(self.bundle) / "envs"

    def bundled_config(self, taskset: str) -> Path:
        return bundled.config_path(self.bundle, taskset)

    def check_config(self, config: EnvConfigFile) -> None:
        """Refuse a config written in another generation's shape, naming both shapes."""
        written_for = shape_of(config.data)
        if written_for is not None and written_for is not self:
            raise EnvConfigError(
                f"{config.path} is written for {written_for.releases} ({written_for.shape}), but the installed "
                f"verifiers is API generation {self.name}: rewrite it for {self.releases} ({self.shape}), or "
                "install the matching verifiers")


SPECS: dict[Generation, GenerationSpec] = {
    "A": GenerationSpec("A", "verifiers 0.2.x", "harness", "a top-level [harness] table", "a",
                        "adapter.episodes.generations.a:GenerationA"),
    "B": GenerationSpec("B", "verifiers 0.3.x/0.4.0", "agent",
                        "roles under [agent]: [agent.harness], [agent.runtime]", "b",
                        "adapter.episodes.generations.b:GenerationB"),
}
# Shape detection order: roles under [agent] win (a B config may not have a top-level harness).
_SHAPE_ORDER: tuple[Generation, ...] = ("B", "A")


def shape_of(data: Mapping[str, Any]) -> GenerationSpec | None:
    """The generation a config's shape is written for, or None when the shape does not tell."""
    for name in _SHAPE_ORDER:
        if isinstance(data.get(SPECS[name].role_table), Mapping):
            return SPECS[name]
    return None


def unsupported_feature(detail: str, *, origin: str | None = None) -> UnsupportedFeatureError:
    """The refusal for a `NotImplementedError` from Verifiers' TrainClient or Renderers: `detail`
    is its message (what is not implemented), `origin` where it was raised (A: the module) or
    recorded (B: the trace and model call), when known. Only the text uses the message."""
    where = f" ({origin})" if origin else ""
    what = detail.strip().rstrip(".") or "(no message)"
    return UnsupportedFeatureError(
        f"the episode asked for something Verifiers' TrainClient or Renderers does not implement{where}: "
        f"NotImplementedError: {what}. Every episode would fail alike, so the run stops: use a taskset, "
        "harness or renderer that does not need it")


def release_process_holds(held_programs: list[type], forked: bool, unplug: Callable[[], None]) -> None:
    """What a loaded environment's `release()` undoes for the whole process: each harness program it
    held (`harness_pins.release`), then its hold of the zygote pool; the last hold ends the zygotes
    and `unplug` takes its generation's runtime plug out (`prefork.release`)."""
    for harness_cls in held_programs:
        harness_pins.release(harness_cls)
    if forked and prefork.release():
        unplug()


def harness_runtime(asked: str, verifiers: str | None = None) -> tuple[str, str]:
    """(the harness runtime episodes run with, a line that says which and why) for `asked`
    (`adapter.episodes.prefork.chosen()`) on `verifiers` (the installed release by default): the
    pre-forked runtime only on a release whose matrix cell proves its samples identical to
    Verifiers' own (`adapter.versions.gate.PREFORK_PROVEN`); any other release it serves (one run
    untested) runs Verifiers' own and says why."""
    if asked == "subprocess":
        return "subprocess", (f"harness runtime: subprocess (Verifiers' own: one fresh interpreter per harness "
                              f"program; {prefork.RUNTIME_VAR}=subprocess or --harness-runtime subprocess)")
    release = verifiers if verifiers is not None else metadata.version("verifiers")
    if release not in PREFORK_PROVEN:
        return "subprocess", (f"harness runtime: subprocess (Verifiers' own: the pre-forked runtime's samples are "
                              f"proven identical to it only on verifiers {', '.join(PREFORK_PROVEN)}, not {release})")
    return "prefork", ("harness runtime: prefork (each harness program and tool server forked from a warm "
                       "interpreter; --harness-runtime subprocess for Verifiers' own)")


def installed() -> GenerationSpec:
    """The installed generation's spec, or `UnsupportedVersionError` with the reason and fix."""
    return SPECS[require_supported()]
