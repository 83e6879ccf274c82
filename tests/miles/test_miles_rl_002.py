"""The published miles-rl 0.0.2's `Sample` (fixtures/miles/sample-miles-rl-0.0.2.json, a stand-in
generated from it): no `rollout_id`, `session_id` instead of `routing_key`. The adapter builds it
with the fields it has, and refuses what it cannot represent before Miles would see it."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType, SimpleNamespace

import pytest

from adapter.errors import TrainerSampleError
from adapter.miles.abi import abi_types
from adapter.samples.sample_type import sample_class
from conformance.miles_checks import assert_eval_ok, assert_train_ok
from conformance.miles_table import SAMPLE_TABLE_002, load_table
from tests.miles.test_miles_standin import installed_standin, orchestrator


@pytest.fixture
def miles002(tmp_path, monkeypatch) -> Iterator[ModuleType]:
    yield from installed_standin(tmp_path, monkeypatch, load_table(SAMPLE_TABLE_002))


def test_the_002_sample_has_session_id_and_no_rollout_id(miles002) -> None:
    assert sample_class() is miles002.Sample
    with pytest.raises(TypeError, match="rollout_id"):  # what crashed the first group under 0.0.2
        miles002.Sample(rollout_id=0)


async def test_single_branch_groups_build_002_samples_routed_by_session_id(miles002, sglang_mock) -> None:
    out = await orchestrator(["ok", "truncated"], sglang_mock).train(rollout_id=0)
    samples = [s for group in out.groups for s in group]
    assert len(samples) == 4 and all(type(s) is miles002.Sample for s in samples)
    assert all(s.session_id and not hasattr(s, "rollout_id") and not hasattr(s, "routing_key") for s in samples)
    assert len({s.session_id for s in samples}) == 4  # one trace id per rollout
    assert_train_ok(abi_types()[3](samples=out.groups, metrics=out.metrics), SimpleNamespace(reward_key=None),
                    miles002.Sample)


async def test_a_multi_branch_rollout_stops_the_run_naming_rollout_id(miles002, sglang_mock) -> None:
    with pytest.raises(TrainerSampleError, match=r"3 branches.*no rollout_id \(miles-rl 0.0.2\).*Miles main"):
        await orchestrator(["branches", "ok"], sglang_mock, rollout_batch_size=1).train(rollout_id=0)


async def test_eval_builds_002_samples(miles002, sglang_mock) -> None:
    out = await orchestrator(["ok", "truncated"], sglang_mock).evaluate()
    assert_eval_ok(abi_types()[4](data=out.data, metrics=out.metrics), miles002.Sample)


async def test_the_class_abi_takes_002s_inputs_without_weight_version(miles002, sglang_mock, monkeypatch) -> None:
    from adapter.miles import binding

    orch = orchestrator(["ok", "ok"], sglang_mock)
    monkeypatch.setattr(binding, "build_orchestrator", lambda args, data_source, **_: orch)
    constructor, train_input, _, train_output, _ = abi_types()
    fn = binding.VerifiersRolloutFn(constructor(args=SimpleNamespace(), data_source=None))
    trained = await fn(train_input(rollout_id=0))
    assert isinstance(trained, train_output) and len(trained.samples) == 2
