"""Miles' reward and filter hooks (adapter.rollout.hooks, docs/contract.md §8.2): loaded at start-up,
refused up front naming the flag, applied in train and eval with Miles' call shapes."""

from __future__ import annotations

import sys
import textwrap
from types import SimpleNamespace

import pytest

from adapter.config.settings import Settings
from adapter.engine.session import EngineSession
from adapter.errors import ConfigurationError
from adapter.rollout.hooks import miles_hooks
from adapter.rollout.lifetime import RunLifetime
from adapter.rollout.orchestrator import Orchestrator
from adapter.samples.conversion import flatten
from tests.fakes import FakeBackend

USER_HOOKS = '''
CALLS = []

async def rm(args, sample):
    CALLS.append(("rm", sample.index))
    return 0.25

def group_rm(args, samples):
    CALLS.append(("group_rm", len(samples)))
    return [float(i) for i in range(len(samples))]

def dict_rm(args, sample):
    return {"score": 0.75, "other": 1.0}

def keep_odd(args, group):
    return group[0].metadata["verifiers"]["task_index"] % 2 == 1

def remove_first(args, data):
    CALLS.append(("sample_filter", len(data)))
    data[0][0].remove_sample = True

def see_all(args, groups, data_source):
    CALLS.append(("all_samples", len(groups), data_source))
'''

RM_HUB = '''
CALLS = []

async def async_rm(args, sample):
    CALLS.append(("async_rm", args.rm_type))
    return 1.0 if sample.response == sample.label else 0.0

async def batched_async_rm(args, samples):
    CALLS.append(("batched_async_rm", len(samples)))
    return [0.5] * len(samples)
'''


@pytest.fixture
def user_hooks(tmp_path, monkeypatch):
    (tmp_path / "user_hooks.py").write_text(USER_HOOKS)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("user_hooks", None)
    import user_hooks

    yield user_hooks
    sys.modules.pop("user_hooks", None)


@pytest.fixture
def rm_hub(tmp_path, monkeypatch):
    """A stand-in `miles.rollout.rm_hub` (Miles' reward hub) that records its calls."""
    hub = tmp_path / "hub" / "miles" / "rollout" / "rm_hub"
    hub.mkdir(parents=True)
    for init in (hub.parent.parent, hub.parent):
        (init / "__init__.py").write_text("")
    (hub / "__init__.py").write_text(textwrap.dedent(RM_HUB))
    monkeypatch.syspath_prepend(str(tmp_path / "hub"))
    yield
    for name in [m for m in sys.modules if m == "miles" or m.startswith("miles.")]:
        del sys.modules[name]


def build(behaviours, sglang_mock, data_source=None, **flags) -> Orchestrator:
    base = {"rollout_batch_size": 2, "n_samples_per_prompt": 2, "over_sampling_batch_size": 2}
    args = SimpleNamespace(**{**base, **flags})
    settings = Settings.from_args(args)
    return Orchestrator(settings=settings, backend=FakeBackend(list(behaviours)),
                        lifetime=RunLifetime(EngineSession(sglang_mock.url)), model="m", env_id="arith-v1",
                        hooks=miles_hooks(args, settings, data_source=data_source))


@pytest.mark.parametrize(
    ("flags", "flag"),
    [({"rm_type": "math"}, "--rm-type"), ({"multi_lora_n_adapters": 2}, "--multi-lora-n-adapters"),
     ({"custom_rm_path": "no_such_module.rm"}, "no_such_module.rm")],
    ids=["builtin_rm_without_miles", "multi_lora", "unloadable_custom_rm"],
)
def test_unsupported_hooks_are_refused_at_start_up_naming_the_flag(flags, flag, sglang_mock) -> None:
    with pytest.raises(ConfigurationError, match=flag):
        build(["ok"], sglang_mock, **flags)


async def test_custom_rm_scores_every_rollout_in_train_and_eval(user_hooks, sglang_mock) -> None:
    orch = build(["ok"] * 4, sglang_mock, custom_rm_path="user_hooks.rm")
    out = await orch.train(rollout_id=0)
    assert {s.reward for g in out.groups for s in flatten(g)} == {0.25}
    evaluated = await orch.evaluate()
    assert evaluated.data["arith-v1"]["rewards"] == [0.25] * 4


async def test_group_rm_gets_the_whole_group_and_nested_siblings_share_the_main_reward(user_hooks, sglang_mock) -> None:
    orch = build(["branches"], sglang_mock, custom_rm_path="user_hooks.group_rm", group_rm=True, rollout_batch_size=1)
    (group,) = (await orch.train(rollout_id=0)).groups
    assert ("group_rm", 2) in user_hooks.CALLS
    (single,), nested = group  # one depth per batch: the single-branch rollout is a list of one
    assert single.reward == 0.0 and [s.reward for s in nested] == [1.0, 1.0, 1.0]


async def test_eval_picks_the_eval_reward_key_from_a_hook_dict(user_hooks, sglang_mock) -> None:
    orch = build(["ok"], sglang_mock, custom_rm_path="user_hooks.dict_rm", eval_reward_key="score")
    data = (await orch.evaluate()).data["arith-v1"]
    assert data["rewards"] == [0.75] and data["samples"][0].reward == {"score": 0.75, "other": 1.0}


async def test_builtin_rm_type_goes_through_miles_reward_hub(rm_hub, sglang_mock) -> None:
    orch = build(["ok"] * 2, sglang_mock, rm_type="math")  # task 0's taskset reward is 0.0
    out = await orch.train(rollout_id=0)
    import miles.rollout.rm_hub as hub

    assert hub.CALLS == [("async_rm", "math")] * 4
    assert {s.reward for g in out.groups for s in flatten(g)} == {1.0}  # the hub's verdict, not the taskset's
    grouped = build(["ok"], sglang_mock, rm_type="math", group_rm=True, rollout_batch_size=1)
    await grouped.train(rollout_id=0)
    assert hub.CALLS[-1] == ("batched_async_rm", 2)


async def test_sample_filter_sees_kept_groups_and_all_samples_sees_filtered_ones(user_hooks, sglang_mock) -> None:
    source = object()
    orch = build(["ok"] * 6, sglang_mock, data_source=source, dynamic_sampling_filter_path="user_hooks.keep_odd",
                 rollout_sample_filter_path="user_hooks.remove_first",
                 rollout_all_samples_process_path="user_hooks.see_all")
    out = await orch.train(rollout_id=0)
    assert ("sample_filter", 2) in user_hooks.CALLS
    (seen,) = [c for c in user_hooks.CALLS if c[0] == "all_samples"]
    assert seen[1] > len(out.groups) and seen[2] is source
    assert out.groups[0][0].remove_sample and not out.groups[1][0].remove_sample
    assert all(g[0].metadata["verifiers"]["task_index"] % 2 == 1 for g in out.groups)
    assert not [k for k in out.metrics if k.startswith("rollout/dynamic_filter/")]  # a bool verdict has no reason
