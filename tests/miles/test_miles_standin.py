"""The "Miles is importable" path, in the fast lane: a stand-in `miles` package generated from
the field table (conformance.miles_table) is put on a tmp path, so every sample the adapter
builds is constructed through Miles' class (a field Miles lacks, like `session_id`, is a
TypeError there), and the train and eval outputs pass the checks Miles applies at HEAD
(conformance.miles_checks, docs/contract.md §8.5).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from types import ModuleType, SimpleNamespace

import pytest

from adapter.config.settings import Settings
from adapter.engine.session import EngineSession
from adapter.errors import RewardKeyError
from adapter.miles.abi import abi_types
from adapter.rollout.lifetime import RunLifetime
from adapter.rollout.orchestrator import Orchestrator
from adapter.samples.sample_type import sample_class
from conformance.miles_checks import assert_eval_ok, assert_train_ok, eval_problems, train_problems
from conformance.miles_table import write_standin
from conformance.plugin import loaded_tokenizer
from tests.fakes import FakeBackend


def _forget_miles() -> None:
    for name in [m for m in sys.modules if m == "miles" or m.startswith("miles.")]:
        del sys.modules[name]
    sample_class.cache_clear()
    abi_types.cache_clear()


def installed_standin(tmp_path, monkeypatch, table: dict | None = None) -> Iterator[ModuleType]:
    """`miles.utils.types` generated from `table` (default: Miles main's), importable until the
    generator resumes; the adapter re-decides its Miles classes on both sides."""
    write_standin(tmp_path, table)
    monkeypatch.syspath_prepend(str(tmp_path))
    _forget_miles()
    yield importlib.import_module("miles.utils.types")
    _forget_miles()


@pytest.fixture
def miles(tmp_path, monkeypatch) -> Iterator[ModuleType]:
    """`miles.utils.types` generated from the table, importable for this test only."""
    yield from installed_standin(tmp_path, monkeypatch)


def orchestrator(behaviours, sglang_mock, *, meta=None, engine=None, **settings) -> Orchestrator:
    base = {"rollout_batch_size": 2, "n_samples_per_prompt": 2, "over_sampling_batch_size": 2,
            "n_samples_per_eval_prompt": 2}
    backend = FakeBackend(list(behaviours), engine_meta=meta)
    return Orchestrator(settings=Settings(**{**base, **settings}), backend=backend,
                        lifetime=RunLifetime(engine or EngineSession(sglang_mock.url)), model="m", env_id="arith-v1")


def test_the_adapter_resolves_the_importable_miles_classes(miles) -> None:
    assert sample_class() is miles.Sample
    assert abi_types()[1].__module__ == "miles.rollout.base_types"
    with pytest.raises(TypeError, match="session_id"):  # what crashed the seed inside Miles (#1703)
        miles.Sample(session_id="trace-1")


TRAIN_CASES = [
    # (id, behaviours per task, settings): each output must pass Miles' checks
    ("single_branch", ["ok", "ok"], {}),
    ("multi_branch", ["branches", "ok"], {}),
    ("errored_groups_replaced", ["error", "ok", "ok"], {}),
    ("truncated", ["truncated", "ok"], {}),
    ("reward_key", ["ok", "branches"], {"reward_key": "correct"}),
]


@pytest.mark.parametrize(("behaviours", "settings"), [c[1:] for c in TRAIN_CASES], ids=[c[0] for c in TRAIN_CASES])
async def test_train_output_passes_miles_checks(miles, sglang_mock, behaviours, settings) -> None:
    orch = orchestrator(behaviours, sglang_mock, **settings)
    out = await orch.train(rollout_id=0)
    output = abi_types()[3](samples=out.groups, metrics=out.metrics)
    assert_train_ok(output, SimpleNamespace(reward_key=settings.get("reward_key")), miles.Sample)
    for group in out.groups:
        for entry in group:
            for sample in entry if isinstance(entry, list) else [entry]:
                sample.validate()


async def test_multi_branch_rollout_is_one_nested_entry_sharing_an_int_rollout_id(miles, sglang_mock) -> None:
    out = await orchestrator(["branches", "branches"], sglang_mock, rollout_batch_size=1).train(rollout_id=0)
    (group,) = out.groups
    # one depth for the whole batch: the single-branch rollout is a list of one beside the nested one
    assert all(isinstance(entry, list) for entry in group)
    nested = [entry for entry in group if len(entry) > 1]
    assert len(group) == 2 and len(nested) == 1 and len(nested[0]) == 3
    assert len({s.rollout_id for s in nested[0]}) == 1 and isinstance(nested[0][0].rollout_id, int)


async def test_rollout_ids_mark_siblings_only_and_are_unique_ints_across_calls(miles, sglang_mock) -> None:
    """Miles main's `postprocess_rollout_data` treats a batch with any rollout_id as compact; its
    verifiers example (`_convert_group`) never sets one: only the siblings of a nested rollout carry
    one here, unique across train calls of the run."""
    orch = orchestrator(["ok", "branches", "ok", "ok"], sglang_mock)
    first, second = await orch.train(rollout_id=0), await orch.train(rollout_id=1)
    entries = [e for o in (first, second) for g in o.groups for e in g]
    nested = [e for e in entries if isinstance(e, list) and len(e) > 1]
    plain = [s for e in entries if e not in nested for s in (e if isinstance(e, list) else [e])]
    assert plain and all(s.rollout_id is None for s in plain)
    ids = [{s.rollout_id for s in e} for e in nested]
    assert nested and all(len(i) == 1 for i in ids)
    flat_ids = [next(iter(i)) for i in ids]
    assert all(type(i) is int for i in flat_ids) and len(set(flat_ids)) == len(flat_ids)


async def test_a_multi_branch_rollout_with_dynamic_batch_size_stops_the_run_naming_both(miles, sglang_mock) -> None:
    """Miles main: `convert_samples_to_train_data` asserts `use_dynamic_global_batch_size ==
    (dynamic_global_batch_size is not None)`, and compact data gets none computed."""
    from adapter.errors import TrainerSampleError

    orch = orchestrator(["branches", "ok"], sglang_mock, rollout_batch_size=1, use_dynamic_global_batch_size=True)
    with pytest.raises(TrainerSampleError, match=r"multi-branch.*--use-dynamic-global-batch-size"):
        await orch.train(rollout_id=0)
    plain = orchestrator(["ok", "ok"], sglang_mock, use_dynamic_global_batch_size=True)
    assert len((await plain.train(rollout_id=0)).groups) == 2  # plain samples are not compact: allowed


EVAL_CASES = [
    # (id, settings, expected reward of the healthy ok-task traces): numbers, None for errored traces
    ("scalar", {}, 0.0),
    ("eval_reward_key", {"eval_reward_key": "correct", "reward_key": "other"}, 0.0),
    ("reward_key_only", {"reward_key": "correct"}, 0.0),
]


@pytest.mark.parametrize(("settings", "ok_reward"), [c[1:] for c in EVAL_CASES], ids=[c[0] for c in EVAL_CASES])
async def test_eval_output_passes_miles_checks_with_numeric_rewards(miles, sglang_mock, settings, ok_reward) -> None:
    orch = orchestrator(["ok", "error", "empty", "truncated", "branches"], sglang_mock, **settings)
    out = await orch.evaluate()
    output = abi_types()[4](data=out.data, metrics=out.metrics)
    assert_eval_ok(output, miles.Sample)
    data = out.data["arith-v1"]
    assert data["rewards"][:2] == [ok_reward, ok_reward]
    # ok, error, empty (context_length: truncated), truncated, branches; two traces each
    assert data["truncated"] == [False, False, False, False, False, True, False, True, False, False]
    if "reward_key" in settings or "eval_reward_key" in settings:
        assert all(isinstance(s.reward, dict) for s in data["samples"])  # the sample keeps the full dict


async def test_eval_errored_trace_without_the_key_gives_none(miles, sglang_mock) -> None:
    orch = orchestrator(["error_nokey"], sglang_mock, eval_reward_key="correct")
    out = await orch.evaluate()
    assert out.data["arith-v1"]["rewards"] == [0.0, None]
    assert_eval_ok(abi_types()[4](data=out.data), miles.Sample)


async def test_eval_healthy_trace_without_the_key_is_a_clear_error(miles, sglang_mock) -> None:
    orch = orchestrator(["nokey"], sglang_mock, eval_reward_key="correct")
    with pytest.raises(RewardKeyError, match=r"\['other', 'reward'\] have no 'correct'.*--eval-reward-key"):
        await orch.evaluate()


async def test_engine_stats_reach_the_samples_and_the_metrics(miles, sglang_mock) -> None:
    meta = {"cached_tokens": 6, "weight_version": "3"}
    out = await orchestrator(["branches", "branches"], sglang_mock, rollout_batch_size=1, meta=meta).train(rollout_id=0)
    (group,) = out.groups
    nested = next(e for e in group if len(e) > 1)  # every entry is a list in a batch with branches
    assert [s.weight_versions for s in nested] == [["3"]] * 3
    infos = [(s.prefix_cache_info.cached_tokens, s.prefix_cache_info.total_prompt_tokens) for s in nested]
    assert infos == [(0, 0), (0, 0), (6, 10)]  # the main (last) branch carries the rollout's counters
    assert out.metrics["verifiers/prefix_cache_hit_rate"] == pytest.approx(0.6)


def _sample(miles, **fields):
    base = {"group_index": 0, "index": 0, "rollout_id": 0, "tokens": [1, 2], "response_length": 1,
            "loss_mask": [1], "rollout_log_probs": [-0.1], "reward": 1.0}
    return miles.Sample(**{**base, **fields})


BROKEN_TRAIN = [
    # (id, groups builder, fragment of the problem Miles would raise)
    ("string_rollout_id", lambda m: [[_sample(m, rollout_id="trace-1")]], "int64"),
    ("unshared_rollout_id", lambda m: [[[_sample(m, rollout_id=1), _sample(m, rollout_id=2, index=1)]]],
     "share one non-None rollout_id"),
    ("unequal_sibling_rewards", lambda m: [[[_sample(m), _sample(m, index=1, reward=0.0)]]], "share one reward"),
    ("loss_mask_length", lambda m: [[_sample(m, loss_mask=[1, 1])]], "loss mask length"),
    ("dict_reward_without_key", lambda m: [[_sample(m, reward={"a": 1.0})]], "finite number"),
    ("foreign_sample_type", lambda m: [[SimpleNamespace(rollout_id=0)]], "not miles.utils.types.Sample"),
]


@pytest.mark.parametrize(("build", "fragment"), [c[1:] for c in BROKEN_TRAIN], ids=[c[0] for c in BROKEN_TRAIN])
def test_miles_checks_reject_what_miles_rejects(miles, build, fragment) -> None:
    output = SimpleNamespace(samples=build(miles))
    assert any(fragment in p for p in train_problems(output, SimpleNamespace(reward_key=None), miles.Sample))


@pytest.mark.parametrize(
    ("data", "fragment"),
    [({"rewards": [{"correct": 1.0}], "truncated": [False]}, "number or None"),
     ({"rewards": [1.0, None], "truncated": [False]}, "not aligned")],
    ids=["dict_reward", "misaligned"],
)
def test_miles_eval_checks_reject_dict_rewards_and_misaligned_lists(miles, data, fragment) -> None:
    samples = [_sample(miles)] * len(data["rewards"])
    output = SimpleNamespace(data={"env": {**data, "samples": samples}})
    assert any(fragment in p for p in eval_problems(output, miles.Sample))


async def test_class_abi_takes_weight_version_eval_extras_and_reads_routers_lazily(miles, sglang_mock,
                                                                                   monkeypatch) -> None:
    from adapter.miles import binding

    args = SimpleNamespace()  # Miles fills the router address after building the rollout function
    orch = orchestrator(["ok", "branches"], sglang_mock, engine=EngineSession(lambda: binding.router_url(args)))
    monkeypatch.setattr(binding, "build_orchestrator", lambda args, data_source, **_: orch)
    constructor, train_input, eval_input, train_output, eval_output = abi_types()
    fn = binding.VerifiersRolloutFn(constructor(args=args, data_source=None))
    args.sglang_router_ip, args.sglang_router_port = "10.0.0.1", 30000
    trained = await fn(train_input(rollout_id=0, weight_version=3))
    assert isinstance(trained, train_output) and orch.backend.app.state.bridge.engine.base_url == "http://10.0.0.1:30000"
    assert_train_ok(trained, SimpleNamespace(reward_key=None), miles.Sample)
    snapshot = SimpleNamespace(args=SimpleNamespace(sglang_router_ip="10.0.0.2", sglang_router_port=31000))
    evaluated = await fn(eval_input(rollout_id=0, generate_state=snapshot, weight_version="3", hf_dir="/ckpt/hf"))
    assert isinstance(evaluated, eval_output) and orch.backend.app.state.bridge.engine.base_url == "http://10.0.0.2:31000"
    assert_eval_ok(evaluated, miles.Sample)


async def test_real_episodes_inside_miles_pass_miles_checks(miles, qwen3_tokenizer, sglang_mock) -> None:
    """The whole pipeline (EnvConfig → Verifiers episodes → TrainClient → bridge → scripted
    SGLang → traces → samples) with Miles importable: Miles' classes, Miles' checks."""

    from adapter.miles.binding import VerifiersRolloutFn
    from tests.miles.test_episodes import arith_policy, miles_args

    sglang_mock.default = arith_policy(loaded_tokenizer(qwen3_tokenizer))
    # arith-mini-v1: arith-v1's first two tasks (the eval runs each; arith-v1's 12 cost ~20 s of harness CPU)
    # one train group (the eval runs both tasks)
    args = miles_args(qwen3_tokenizer, sglang_mock, "arith-mini-v1", eval_interval=1, reward_key=None,
                      eval_reward_key="correct", rollout_batch_size=1)
    constructor, train_input, eval_input, train_output, eval_output = abi_types()
    fn = VerifiersRolloutFn(constructor(args=args, data_source=None))
    trained = await fn(train_input(rollout_id=0, weight_version=1))
    assert isinstance(trained, train_output)
    assert_train_ok(trained, args, miles.Sample)
    samples = [s for group in trained.samples for s in group]
    assert all(s.weight_versions == ["default"] and s.prefix_cache_info.total_prompt_tokens > 0 for s in samples)
    assert trained.metrics["verifiers/prefix_cache_hit_rate"] == 0.0  # the scripted engine caches nothing
    evaluated = await fn(eval_input(rollout_id=0))
    assert isinstance(evaluated, eval_output)
    assert_eval_ok(evaluated, miles.Sample)
    assert set(evaluated.data["arith-mini-v1"]["rewards"]) <= {0.0, 0.5, 1.0}  # `correct`: right, off by one, wrong
