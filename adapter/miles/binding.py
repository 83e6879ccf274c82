"""The Miles binding: the rollout-function class ABI and the legacy function ABI.

    --rollout-function-path adapter.miles.VerifiersRolloutFn     (default)
    --rollout-function-path adapter.miles.generate_rollout       (MILES_USE_LEGACY_ROLLOUT_V1=1)

Both run the same `Orchestrator`; `adapter.miles.launcher` picks one from a single merged
environment that the Ray workers also receive. Everything is checked when the function is
built, before any episode: versions, trainer options, the EnvConfig, the taskset.
The EnvConfig comes from `--verifiers-config` or `VERIFIERS_CONFIG`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from adapter.config.settings import Settings
from adapter.engine.client import router_url
from adapter.engine.recording import CassetteRecorder
from adapter.miles import checkpoint
from adapter.miles.abi import abi_types, rollout_fn_base
from adapter.rollout.hooks import miles_hooks
from adapter.rollout.job import prepare_orchestrator, run_lifetime
from adapter.rollout.orchestrator import Orchestrator
from adapter.samples.conversion import flatten

T = TypeVar("T")


def build_orchestrator(args: Any, data_source: Any = None, *,
                       recorder: CassetteRecorder | None = None) -> Orchestrator:
    """Everything the rollout function needs, checked before any episode runs, on its own
    `RunLifetime` (its one engine session; `orchestrator.lifetime`, closed by the rollout function's
    `aclose`). The router address is read from `args` at call time (Miles fills it in after
    building us)."""
    settings = Settings.from_args(args)
    hooks = miles_hooks(args, settings, data_source=data_source)
    lifetime = run_lifetime(settings, lambda: router_url(args), recorder=recorder)  # nothing opened before a call
    return prepare_orchestrator(settings, lifetime=lifetime, hooks=hooks)


def _eval_engine(rollout_input: Any) -> Any:
    """A snapshot eval's own router (`generate_state.args`), read at call time; else None."""
    state_args = getattr(getattr(rollout_input, "generate_state", None), "args", None)
    return None if state_args is None else (lambda: router_url(state_args))


def _stamp_trainer_model_id(groups: list[list[Any]], model_id: str | None) -> None:
    """Miles #2637 (multi-policy runs): every sample carries the policy its train input named."""
    if model_id is not None:
        for group in groups:
            for sample in flatten(group):
                sample.trainer_model_id = model_id


# Decided when Miles imports this module by path: `BaseRolloutFn` where the installed Miles has it.
_ROLLOUT_FN_BASE: Any = rollout_fn_base()


class VerifiersRolloutFn(_ROLLOUT_FN_BASE):  # type: ignore[misc]  # Miles' BaseRolloutFn, or object
    """Miles' class ABI: constructed once with `RolloutFnConstructorInput(args, data_source)`,
    then awaited with a train input (rollout_id) or an eval input. It subclasses Miles'
    `BaseRolloutFn` where the installed Miles has one (#1845), which Miles then requires."""

    def __init__(self, constructor_input: Any, *, recorder: CassetteRecorder | None = None) -> None:
        self.constructor_input = constructor_input  # what BaseRolloutFn.__init__ stores
        self.args = constructor_input.args
        self.orchestrator = build_orchestrator(self.args, constructor_input.data_source, recorder=recorder)

    async def aclose(self) -> None:
        """Close the rollout function's lifetime: the bridges, the env's serving and the engine
        session the calls held open (at interpreter exit too, while Miles' loop runs:
        `adapter.rollout.lifetime.close_all`). A closed rollout function stays closed."""
        await self.orchestrator.lifetime.aclose()

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
            result = await self.orchestrator.evaluate(engine_url=_eval_engine(rollout_input))
            return eval_output(data=result.data, metrics=result.metrics)
        train = await self.orchestrator.train(rollout_input.rollout_id,
                                              weight_version=getattr(rollout_input, "weight_version", None))
        _stamp_trainer_model_id(train.groups, getattr(rollout_input, "trainer_model_id", None))
        return train_output(samples=train.groups, metrics=train.metrics)

    def save(self, rollout_id: int) -> None:
        """Keep what a resumed run needs (task cursor, rollout-id and group counters) in Miles' save
        directory (adapter.miles.checkpoint)."""
        checkpoint.save(self.orchestrator, self.args, rollout_id)

    def load(self, rollout_id: int | None) -> None:
        """Miles calls this on every start with `start_rollout_id - 1` (#1845): continue from the
        state `--load` holds for `rollout_id`. None, a negative id or no `--load` is a fresh start;
        a missing state file a fresh start with a warning; a corrupt or foreign state a
        `ResumeStateError` naming the file (adapter.miles.checkpoint)."""
        checkpoint.load(self.orchestrator, self.args, rollout_id)


@dataclass
class _Legacy:
    """The legacy ABI's one function: for the run whose (args, data_source) Miles passes. A call
    with other objects (another run in this process) closes and replaces it, so nothing
    accumulates, and the objects themselves are held, so an id() is never mistaken for a new
    object's. Every call runs on one event loop of its own, in a thread that lives as long as the
    process (as Miles runs a class's calls on its background loop): what the function holds open
    between calls (its bridge, the env's serving, the engine's connections) stays usable."""

    args: Any = None
    data_source: Any = None
    function: VerifiersRolloutFn | None = None
    loop: asyncio.AbstractEventLoop | None = None

    def run(self, call: Coroutine[Any, Any, T]) -> T:
        if self.loop is None:
            self.loop = asyncio.new_event_loop()
            threading.Thread(target=self.loop.run_forever, name="vf-sglang legacy rollout loop", daemon=True).start()
        return asyncio.run_coroutine_threadsafe(call, self.loop).result()

    def for_call(self, args: Any, data_source: Any) -> VerifiersRolloutFn:
        if self.function is None or self.args is not args or self.data_source is not data_source:
            if self.function is not None:
                self.run(self.function.aclose())
            constructor = abi_types()[0]
            self.args, self.data_source = args, data_source
            self.function = VerifiersRolloutFn(constructor(args=args, data_source=data_source))
        return self.function


_LEGACY = _Legacy()


def generate_rollout(args: Any, rollout_id: int, data_source: Any, evaluation: bool = False) -> Any:
    """Miles' legacy function ABI. Miles calls it from a worker thread (no running loop); one
    `VerifiersRolloutFn` per (args, data_source) keeps the task cursor, and what it holds open,
    between calls, all of them run on the legacy ABI's own loop (`_Legacy.run`)."""
    _, train_input, eval_input, _, _ = abi_types()
    rollout_input = eval_input(rollout_id=rollout_id) if evaluation else train_input(rollout_id=rollout_id)
    function = _LEGACY.for_call(args, data_source)
    return _LEGACY.run(function(rollout_input))
