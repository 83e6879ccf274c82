"""Train/eval orchestration (docs/contract.md §6) on a scripted backend with real traces."""

from __future__ import annotations

import asyncio

import pytest

from adapter.config.settings import Settings
from adapter.engine.session import EngineSession
from adapter.errors import RolloutFunctionClosedError, RolloutStalledError, UnsupportedRequestError
from adapter.rollout.lifetime import RunLifetime
from adapter.rollout.orchestrator import Orchestrator, RolloutHooks
from tests.fakes import FakeBackend


def orchestrator(behaviours, sglang_mock, **settings) -> tuple[Orchestrator, FakeBackend]:
    backend = FakeBackend(list(behaviours))
    base = {"rollout_batch_size": 2, "n_samples_per_prompt": 2, "over_sampling_batch_size": 2}
    orch = Orchestrator(settings=Settings(**{**base, **settings}), backend=backend,
                        lifetime=RunLifetime(EngineSession(sglang_mock.url)), model="m", env_id="arith-v1")
    return orch, backend


async def test_train_returns_exactly_the_batch_of_full_groups(sglang_mock) -> None:
    orch, _ = orchestrator(["ok"] * 6, sglang_mock, over_sampling_batch_size=3)
    out = await orch.train(rollout_id=0)
    assert [len(group) for group in out.groups] == [2, 2]
    indices = [s.index for group in out.groups for s in group]
    assert len(set(indices)) == len(indices)
    assert len({group[0].group_index for group in out.groups}) == 2
    for sample in (s for group in out.groups for s in group):
        assert len(sample.rollout_log_probs) == len(sample.loss_mask) == sample.response_length


@pytest.mark.parametrize(
    ("bad", "reason"),
    [("error", "trace_error"), ("empty", "empty_trace"), ("raise", "episode_error")],
)
async def test_dropped_groups_are_counted_by_reason_and_replaced(bad, reason, sglang_mock) -> None:
    orch, _backend = orchestrator([bad, "ok", "ok", "ok"], sglang_mock)
    out = await orch.train(rollout_id=0)
    assert len(out.groups) == 2
    assert out.metrics[f"rollout/drop/{reason}"] == 1.0
    assert all(s.metadata["verifiers"]["task_index"] != 0 for g in out.groups for s in g)


async def test_a_bridge_refusal_stops_the_run_with_the_bridges_own_error_object(sglang_mock) -> None:
    orch, backend = orchestrator(["config", "ok"], sglang_mock, rollout_batch_size=1, over_sampling_batch_size=1)
    with pytest.raises(UnsupportedRequestError, match="multimodal `features` are not supported") as caught:
        await orch.train(rollout_id=0)
    assert caught.value is backend.app.state.bridge.refusal  # the object itself, not a name or a text
    assert len(backend.calls) == 1  # stopped within one group


async def test_a_bridge_refusal_stops_eval_too(sglang_mock) -> None:
    orch, _ = orchestrator(["ok", "config"], sglang_mock)
    with pytest.raises(UnsupportedRequestError, match="multimodal"):
        await orch.evaluate()


async def test_a_bug_in_a_shim_propagates_at_once_instead_of_becoming_a_drop(sglang_mock) -> None:
    orch, backend = orchestrator(["bug", "ok"], sglang_mock, rollout_batch_size=1, over_sampling_batch_size=1)
    with pytest.raises(KeyError, match="a bug in the shim"):
        await orch.train(rollout_id=0)
    assert len(backend.calls) == 1


async def test_a_stall_names_the_last_underlying_error_of_each_drop_reason(sglang_mock) -> None:
    orch, _ = orchestrator(["error", "raise"], sglang_mock, rollout_batch_size=1)
    with pytest.raises(RolloutStalledError) as caught:
        await orch.train(rollout_id=0)
    message = str(caught.value)
    assert "trace_error" in message and "engine 502" in message
    assert "episode_error" in message and "sandbox exploded" in message


async def test_a_run_that_only_drops_stalls_with_counts(sglang_mock) -> None:
    orch, backend = orchestrator(["error"], sglang_mock, rollout_batch_size=1)
    with pytest.raises(RolloutStalledError, match="trace_error"):
        await orch.train(rollout_id=0)
    assert len(backend.calls) <= 40


async def test_pending_episodes_are_cancelled_and_the_engine_aborted_on_exit(sglang_mock) -> None:
    orch, backend = orchestrator(["ok", "hang", "ok", "hang"], sglang_mock, rollout_batch_size=1,
                                 over_sampling_batch_size=4)
    out = await orch.train(rollout_id=0)
    assert len(out.groups) == 1
    aborts = [r for r in sglang_mock.requests if r.path == "/abort_request"]
    assert [a.body for a in aborts] == [{"abort_all": True}]
    await orch.lifetime.aclose()  # what the calls held open (the bridge's client, the env's serving) closes here
    assert backend.clients and all(client.closed for client in backend.clients)
    assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []


async def test_no_abort_when_nothing_is_pending(sglang_mock) -> None:
    orch, _ = orchestrator(["ok"] * 2, sglang_mock)
    await orch.train(rollout_id=0)
    assert not [r for r in sglang_mock.requests if r.path == "/abort_request"]


async def test_task_cursor_resumes_from_rollout_id_times_batch(sglang_mock) -> None:
    orch, backend = orchestrator(["ok"] * 10, sglang_mock)
    await orch.train(rollout_id=3)  # first call: start at 3 × 2 = 6
    await orch.train(rollout_id=4)  # then continue where it left
    assert [task for task, _, _ in backend.calls] == [6, 7, 8, 9]


async def test_shuffle_is_seeded(sglang_mock) -> None:
    first, _ = orchestrator(["ok"] * 10, sglang_mock, rollout_shuffle=True, rollout_seed=7)
    second, _ = orchestrator(["ok"] * 10, sglang_mock, rollout_shuffle=True, rollout_seed=7)
    assert first.progress.order == second.progress.order != list(range(10))


async def test_deterministic_inference_gives_each_group_its_seed_base(sglang_mock) -> None:
    orch, backend = orchestrator(["ok"] * 4, sglang_mock, sglang_enable_deterministic_inference=True,
                                 rollout_seed=100)
    await orch.train(rollout_id=0)
    assert [(task, seed) for task, _, seed in backend.calls] == [(0, 100), (1, 102)]
    plain, plain_backend = orchestrator(["ok"] * 4, sglang_mock)
    await plain.train(rollout_id=0)
    assert {seed for _, _, seed in plain_backend.calls} == {None}


async def test_seeds_follow_the_global_task_cursor_so_a_repeated_task_gets_new_seeds(sglang_mock) -> None:
    """Miles' verifiers example, `_call_train` (no Miles test pins it; its E2E runs one step): seed =
    rollout_seed + cursor × n, the cursor being
    the global task index (resumed from rollout_id × rollout_batch_size), not the task's index in
    the dataset: 2 tasks drawn 4 times give seed bases 100, 102, 104, 106, never 100, 102, 100, 102."""
    orch, backend = orchestrator(["ok"] * 2, sglang_mock, sglang_enable_deterministic_inference=True,
                                 rollout_seed=100, rollout_batch_size=4, over_sampling_batch_size=4)
    await orch.train(rollout_id=0)
    await orch.train(rollout_id=1)
    assert [(task, seed) for task, _, seed in backend.calls] == [
        (0, 100), (1, 102), (0, 104), (1, 106), (0, 108), (1, 110), (0, 112), (1, 114)]
    pairs = [(task, seed) for task, _, seed in backend.calls]
    assert len(set(pairs)) == len(pairs)  # no (task, seed base) shared by two groups of the run
    resumed, resumed_backend = orchestrator(["ok"] * 2, sglang_mock, sglang_enable_deterministic_inference=True,
                                            rollout_seed=100, rollout_batch_size=4, over_sampling_batch_size=4)
    await resumed.train(rollout_id=1)  # a resumed run continues the cursor: the same seeds as step 1 above
    assert [seed for _, _, seed in resumed_backend.calls] == [108, 110, 112, 114]


async def test_eval_seeds_are_the_tasks_index_times_n_eval(sglang_mock) -> None:
    """Miles' example, eval: seed = rollout_seed + index × n_samples_per_eval_prompt."""
    orch, backend = orchestrator(["ok"] * 3, sglang_mock, sglang_enable_deterministic_inference=True,
                                 rollout_seed=100, n_samples_per_eval_prompt=3)
    await orch.evaluate()
    assert sorted((task, seed) for task, _, seed in backend.calls) == [(0, 100), (1, 103), (2, 106)]


async def test_reward_hook_overrides_and_wrong_counts_drop(sglang_mock) -> None:
    async def reward(samples):
        return [0.5] * len(samples)

    async def short(samples):
        return [0.5]

    orch, _ = orchestrator(["ok"] * 4, sglang_mock)
    orch.hooks = RolloutHooks(reward=reward)
    out = await orch.train(rollout_id=0)
    assert {s.reward for g in out.groups for s in g} == {0.5}
    orch, _ = orchestrator(["ok"] * 4, sglang_mock, rollout_batch_size=1)
    orch.hooks = RolloutHooks(reward=short)
    with pytest.raises(RolloutStalledError, match="reward_hook_count"):
        await orch.train(rollout_id=0)


async def test_dynamic_filter_drops_are_counted_under_miles_metric_name(sglang_mock) -> None:
    orch, _ = orchestrator(["ok"] * 6, sglang_mock)
    orch.hooks = RolloutHooks(keep=lambda samples: (samples[0].metadata["verifiers"]["task_index"] % 2 == 1,
                                                    "zero_std_0.0"))
    out = await orch.train(rollout_id=0)
    assert out.metrics["rollout/dynamic_filter/drop_zero_std_0.0"] >= 1
    assert not [name for name in out.metrics if name.startswith("rollout/drop/")]
    assert all(g[0].metadata["verifiers"]["task_index"] % 2 == 1 for g in out.groups)


async def test_metrics_cover_every_trace_seen(sglang_mock) -> None:
    orch, _ = orchestrator(["error", "ok", "truncated"], sglang_mock, over_sampling_batch_size=3)
    out = await orch.train(rollout_id=0)
    assert out.metrics["verifiers/traces"] == 6
    assert out.metrics["verifiers/error_rate"] == pytest.approx(1 / 6)
    assert out.metrics["verifiers/truncated_rate"] == pytest.approx(1 / 6)
    assert out.metrics["verifiers/num_turns_mean"] == 1.0


async def test_eval_lists_are_aligned_one_entry_per_trace(sglang_mock) -> None:
    orch, backend = orchestrator(["ok", "error", "empty", "truncated"], sglang_mock, n_samples_per_eval_prompt=3,
                                 eval_reward_key="correct")
    out = await orch.evaluate()
    data = out.data["arith-v1"]
    assert len(data["rewards"]) == len(data["truncated"]) == len(data["samples"]) == 12
    assert {n for _, n, _ in backend.calls} == {3}
    assert all(isinstance(r, float) for r in data["rewards"])
    assert all(isinstance(s.reward, dict) and "correct" in s.reward for s in data["samples"])
    statuses = [s.status.value for s in data["samples"]]
    assert statuses.count("failed") == 1 and statuses.count("truncated") == 2
    assert len({s.index for s in data["samples"]}) == 12


async def test_train_and_eval_counters_do_not_disturb_each_other(sglang_mock) -> None:
    orch, _ = orchestrator(["ok"] * 4, sglang_mock)
    first = await orch.train(rollout_id=0)
    await orch.evaluate()
    second = await orch.train(rollout_id=1)
    train_groups = [g[0].group_index for g in first.groups + second.groups]
    assert train_groups == [0, 1, 2, 3]


@pytest.mark.parametrize(("decided", "explicit", "expected"), [
    ("Qwen/Qwen3-4B-Instruct-2507", None, "Qwen/Qwen3-4B-Instruct-2507"),  # inferred by rollout.job
    (None, "Qwen/Qwen3-8B", "Qwen/Qwen3-8B"),  # built without the job: the option itself
    (None, None, None),
])
async def test_the_job_decided_renderer_identity_reaches_the_generation_client(sglang_mock, decided, explicit,
                                                                              expected) -> None:
    """Both generations take the identity through make_client (B turns it into a typed renderer
    config): the one rollout.job decided, not only the explicit option."""
    orch, backend = orchestrator(["ok"] * 2, sglang_mock, rollout_batch_size=1, over_sampling_batch_size=1,
                                 renderer_model_name=explicit)
    orch.renderer_model_name = decided
    await orch.train(rollout_id=0)
    assert [kwargs["renderer_model_name"] for kwargs in backend.client_kwargs] == [expected]


async def test_a_dropped_trace_never_trains_its_group_is_dropped_and_replaced(sglang_mock) -> None:
    orch, _ = orchestrator(["dropped", "ok", "ok", "ok"], sglang_mock)
    out = await orch.train(rollout_id=0)
    assert len(out.groups) == 2 and out.metrics["rollout/drop/trace_dropped"] == 1.0
    trained = [s for group in out.groups for s in group]
    assert all(s.metadata["verifiers"]["task_index"] != 0 for s in trained)
    assert all("dropped" not in s.metadata["verifiers"] for s in trained)
    assert out.drop_details["trace_dropped"].endswith("dropped by Verifiers: rubric: correct=unsure")
    assert out.metrics["verifiers/dropped_traces"] == 1.0


async def test_eval_reports_a_dropped_trace_beside_the_scored_ones_unscored(sglang_mock) -> None:
    orch, _ = orchestrator(["dropped", "ok"], sglang_mock, n_samples_per_eval_prompt=2, eval_reward_key="correct")
    out = await orch.evaluate()
    data = out.data["arith-v1"]
    dropped = [i for i, s in enumerate(data["samples"]) if "dropped" in s.metadata["verifiers"]]
    assert len(dropped) == 1 and data["rewards"][dropped[0]] is None
    assert sum(r is not None for r in data["rewards"]) == 3
    assert out.metrics["eval/verifiers/dropped_traces"] == 1.0


async def test_train_and_eval_calls_reuse_what_the_first_call_opened_until_aclose_which_is_final(sglang_mock) -> None:
    orch, backend = orchestrator(["ok", "ok"], sglang_mock, n_samples_per_eval_prompt=1)
    for rollout_id in range(3):
        await orch.train(rollout_id=rollout_id)
    await orch.evaluate()
    await orch.evaluate()
    assert len(backend.clients) == 2  # one bridge client for train, one for eval (its own settings)
    assert not any(client.closed for client in backend.clients)
    await orch.lifetime.aclose()
    assert all(client.closed for client in backend.clients)
    with pytest.raises(RolloutFunctionClosedError, match="closed"):  # closed stays closed
        await orch.train(rollout_id=3)
    assert len(backend.clients) == 2
    await orch.lifetime.aclose()  # a second close does nothing


def test_interpreter_exit_closes_a_rollout_function_whose_loop_still_runs(sglang_mock) -> None:
    """Miles runs the class' calls on its background loop, which outlives the main thread's work:
    at exit, `close_all` closes what each call held open, on that loop."""
    import threading

    from adapter.rollout.lifetime import close_all

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        orch, backend = orchestrator(["ok"], sglang_mock, rollout_batch_size=1)
        asyncio.run_coroutine_threadsafe(orch.train(rollout_id=0), loop).result(30)
        assert orch.lifetime.loop is loop and not backend.clients[0].closed
        close_all()
        assert backend.clients[0].closed and orch.lifetime.state == "closed"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
