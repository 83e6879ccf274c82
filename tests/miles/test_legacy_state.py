"""The legacy function ABI holds one rollout function: the run's (args, data_source) keep theirs
between calls (its task cursor goes on), and another run's objects replace it: nothing keyed by
id() piles up over a process's life."""

from __future__ import annotations

from argparse import Namespace

from adapter.miles import binding


def test_the_legacy_abi_keeps_one_function_per_run_and_replaces_it_for_another(monkeypatch) -> None:
    built: list[object] = []
    monkeypatch.setattr(binding, "build_orchestrator", lambda args, data_source=None: built.append(args) or object())
    legacy = binding._Legacy()
    run, source = Namespace(), object()
    first = legacy.for_call(run, source)
    assert legacy.for_call(run, source) is first and len(built) == 1  # the same run: the same function
    other = legacy.for_call(Namespace(), source)
    assert other is not first and len(built) == 2
    assert legacy.for_call(run, object()) is not other  # a new data source: a new function
    assert legacy.args is run and len(built) == 3  # only the latest run is held
