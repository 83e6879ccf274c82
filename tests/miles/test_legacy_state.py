"""The legacy function ABI holds one rollout function: the run's (args, data_source) keep theirs
between calls (its task cursor goes on, and what it holds open stays open: every call runs on the
ABI's one loop), and another run's objects close and replace it: nothing keyed by id() piles up
over a process's life."""

from __future__ import annotations

import asyncio
from argparse import Namespace

from adapter.miles import binding


class Lifetime:
    """A stand-in lifetime: counts its closes."""

    def __init__(self) -> None:
        self.closed = 0

    async def aclose(self) -> None:
        self.closed += 1


class Built:
    """A stand-in orchestrator: its lifetime, and the loop each train call ran on."""

    def __init__(self) -> None:
        self.lifetime = Lifetime()
        self.loops: list[asyncio.AbstractEventLoop] = []

    async def train(self, rollout_id: int, *, weight_version: object = None) -> Namespace:
        self.loops.append(asyncio.get_running_loop())
        return Namespace(groups=[], metrics={})


def test_the_legacy_abi_keeps_one_function_per_run_and_replaces_it_for_another(monkeypatch) -> None:
    built: list[Built] = []
    monkeypatch.setattr(binding, "build_orchestrator", lambda args, data_source=None, **_: built.append(Built())
                        or built[-1])
    legacy = binding._Legacy()
    run, source = Namespace(), object()
    first = legacy.for_call(run, source)
    assert legacy.for_call(run, source) is first and len(built) == 1  # the same run: the same function
    other = legacy.for_call(Namespace(), source)
    assert other is not first and len(built) == 2
    assert built[0].lifetime.closed == 1  # the replaced run's function was closed, on the ABI's loop
    assert legacy.for_call(run, object()) is not other  # a new data source: a new function
    assert legacy.args is run and len(built) == 3  # only the latest run is held
    assert [b.lifetime.closed for b in built] == [1, 1, 0]


def test_every_legacy_call_of_a_run_runs_on_one_event_loop(monkeypatch) -> None:
    """What a call opens (generation B's served bridge, the engine's connections) belongs to the
    loop it was opened on: a new `asyncio.run` per call would strand it."""
    built: list[Built] = []
    monkeypatch.setattr(binding, "build_orchestrator", lambda args, data_source=None, **_: built.append(Built())
                        or built[-1])
    monkeypatch.setattr(binding, "_LEGACY", binding._Legacy())
    args, source = Namespace(), object()
    for rollout_id in range(3):
        binding.generate_rollout(args, rollout_id, source)
    (orchestrator,) = built
    assert len(orchestrator.loops) == 3 and len(set(map(id, orchestrator.loops))) == 1
    assert orchestrator.loops[0].is_running()  # alive between calls, in the ABI's own thread
