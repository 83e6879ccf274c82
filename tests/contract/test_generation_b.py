"""Unit tests of the generation-B shim (verifiers 0.3.x/0.4.0), run in the B matrix cells:

    uvx --with tox-uv tox -e contract-vf040

Skipped where the installed Verifiers has no `verifiers.v1.utils.loaders` (generation A).
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("verifiers.v1.utils.loaders", reason="needs verifiers 0.3.x/0.4.0 (generation B)")


from adapter.bridge.serve import served
from adapter.config.settings import Settings
from adapter.episodes.generations.b import GenerationB, TraceView, renderer_for, sampling_config
from adapter.errors import UnsupportedFeatureError
from adapter.rollout.job import prepare_orchestrator
from conformance.engine import ScriptedEngine, asgi_app
from conformance.plugin import loaded_tokenizer
from conformance.policies import TextPolicy
from tests.contract.test_contract import env_config, run_groups

pytestmark = pytest.mark.contract
MINI_EVAL = Path(__file__).resolve().parents[2] / "fixtures" / "envs" / "b" / "arith-mini-v1.toml"


REPLIES = iter(range(10_000))


def word_reply(prompt: str) -> str:
    word = re.search(r"Say the word '(\w+)'", prompt).group(1)
    return word if next(REPLIES) % 2 else f"Sure: {word}!"


async def test_the_trainers_n_sizes_an_in_episode_group_without_mutating_the_env(qwen3_tokenizer) -> None:
    (group,) = await run_groups(qwen3_tokenizer, "group-v1", word_reply, reward_key="shortest",
                                n_samples_per_prompt=3)
    assert len(group) == 3
    assert sum(sample.reward["shortest"] for sample in group) == pytest.approx(0.5)
    import tomllib

    with open(env_config("group-v1"), "rb") as handle:
        data = tomllib.load(handle)
    backend = GenerationB(data)
    assert backend.has_group_reward and backend.in_episode_n == data["n"] == 2


def _process_lifetime_threads() -> list[threading.Thread]:
    """Threads that outlive a rollout function by design: the loop's default executor (ends with
    the loop: Verifiers' runtimes clean up through `asyncio.to_thread`) and this process' warm
    harness interpreters (adapter.episodes.prefork: one pool per process, ended at exit)."""
    return [thread for thread in threading.enumerate()
            if thread.name.startswith(("asyncio_", "vf-sglang zygote"))]


def test_renderer_for_keeps_the_registered_identity_of_a_local_tokenizer(qwen3_tokenizer) -> None:
    name, renderer = renderer_for(str(qwen3_tokenizer), "Qwen/Qwen3-0.6B")
    assert name == str(qwen3_tokenizer) and renderer is not None and renderer.name == "qwen3"
    assert renderer_for(str(qwen3_tokenizer), "my-org/unregistered") == (str(qwen3_tokenizer), None)
    assert renderer_for(None, "Qwen/Qwen3-0.6B") == ("Qwen/Qwen3-0.6B", None)


def test_sampling_config_carries_the_seed_and_template_kwargs() -> None:
    settings = Settings(rollout_temperature=0.5, rollout_max_response_len=7,
                        apply_chat_template_kwargs={"enable_thinking": False})
    config = sampling_config(settings, 11)
    assert (config.temperature, config.max_tokens, config.seed) == (0.5, 7, 11)
    assert getattr(sampling_config(settings, None), "seed", None) is None


def arith_settings(qwen3_tokenizer: Any) -> Settings:
    """One arith-v1 group of 2 with the real Qwen3 tokenizer, short turns."""
    return Settings(verifiers_config=env_config("arith-v1"), rollout_batch_size=1, n_samples_per_prompt=2,
                    hf_checkpoint=str(qwen3_tokenizer), renderer_model_name="Qwen/Qwen3-0.6B",
                    rollout_max_response_len=16, rollout_max_context_len=1024, rollout_global_dataset=False)


async def test_trace_view_reads_weighted_rewards_and_trainable_branches(qwen3_tokenizer, lifetimes) -> None:
    """Also: Miles' --rollout-min-p (#1521) reaches SGLang on every B turn."""
    tokenizer = loaded_tokenizer(qwen3_tokenizer)
    engine = ScriptedEngine(default=TextPolicy(tokenizer, lambda prompt: "7"))
    seen: list[TraceView] = []
    async with served(asgi_app(engine)) as url:
        settings = dataclasses.replace(arith_settings(qwen3_tokenizer), rollout_min_p=0.05)
        orchestrator = prepare_orchestrator(settings, lifetime=lifetimes(settings, url))
        run_group = orchestrator.backend.run_group

        async def spy(*args: Any, **kwargs: Any) -> list[Any]:
            traces = await run_group(*args, **kwargs)
            seen.extend(traces)
            return traces

        orchestrator.backend.run_group = spy  # type: ignore[method-assign]
        await orchestrator.train(rollout_id=0)
    assert len(seen) == 2
    for trace in seen:
        assert trace.rewards == {"correct": 1.0} and trace.reward == 1.0
        # `Branch.trainable` exists from verifiers 0.4.0 on; 0.3.x branches are all trainable.
        assert trace.error is None and trace.branches
        assert all(getattr(b, "trainable", True) for b in trace.branches)
    assert [r.body["sampling_params"]["min_p"] for r in engine.generate_requests()] == [0.05, 0.05]


async def test_eval_on_b_returns_aligned_lists_for_the_whole_taskset(qwen3_tokenizer, lifetimes) -> None:
    # arith-mini-v1: the eval runs 2 traces, not arith-v1's 12 (one harness process each, in every B cell)
    tokenizer = loaded_tokenizer(qwen3_tokenizer)
    engine = ScriptedEngine(default=TextPolicy(tokenizer, lambda prompt: "7"))
    async with served(asgi_app(engine)) as url:
        settings = Settings(verifiers_config=str(MINI_EVAL), hf_checkpoint=str(qwen3_tokenizer),
                            renderer_model_name="Qwen/Qwen3-0.6B", rollout_max_response_len=16,
                            rollout_max_context_len=1024, eval_interval=1, n_samples_per_eval_prompt=1,
                            rollout_global_dataset=False)
        result = await prepare_orchestrator(settings, lifetime=lifetimes(settings, url)).evaluate()
    (data,) = result.data.values()
    assert len(data["rewards"]) == len(data["truncated"]) == len(data["samples"]) == 2
    assert data["rewards"] == [1.0, 0.0]  # "What is 3 + 4?" is task 0, "What is 7 + 5?" task 1


async def test_an_unsupported_feature_stops_the_run_at_the_first_group_on_b(qwen3_tokenizer, monkeypatch,
                                                                           lifetimes) -> None:
    """Miles' `test_train_client_reports_unsupported_dialect_as_configuration_error` and
    `test_unsupported_trace_error_is_not_resampled_forever` (tests/fast/examples/experimental/
    verifiers/test_verifiers_rollout.py): a `NotImplementedError` from Verifiers' TrainClient or
    Renderers ends the run at the first group. On B that TrainClient is Verifiers' own: the error
    reaches the harness as a 502 (retried by its SDK) and comes back as the exception type the
    interception server recorded on each model call, which alone decides. No engine call, no
    resampling: the first group's calls only."""
    import renderers.client

    calls: list[dict[str, Any]] = []

    async def unimplemented(**kwargs: Any) -> Any:
        calls.append(kwargs)
        raise NotImplementedError("Video parts are not yet supported by Qwen3VLRenderer.")

    monkeypatch.setattr(renderers.client, "generate", unimplemented)
    tokenizer = loaded_tokenizer(qwen3_tokenizer)
    engine = ScriptedEngine(default=TextPolicy(tokenizer, lambda prompt: "7"))
    async with served(asgi_app(engine)) as url:
        settings = arith_settings(qwen3_tokenizer)
        orchestrator = prepare_orchestrator(settings, lifetime=lifetimes(settings, url))
        with pytest.raises(UnsupportedFeatureError, match=r"\(trace \w+, model call 0\): NotImplementedError: "
                                                          "Video parts are not yet supported by Qwen3VLRenderer"):
            await orchestrator.train(rollout_id=0)
    # the first group's 2 rollouts, each at most the harness SDK's 3 attempts at a 502
    assert 2 <= len(calls) <= 6
    assert engine.generate_requests() == []


async def test_a_group_reward_env_asked_for_another_n_is_served_and_closed_by_the_holder(
        qwen3_tokenizer, monkeypatch) -> None:
    """group-v1's TOML says n = 2; Miles asks for 3 over 3 train calls (each its own task, as
    Miles calls the class), then closes the rollout function. The env loaded again for n = 3 is
    loaded once, its serving entered and exited by the run's holder task (never an episode's:
    an anyio cancel scope must exit in the task that entered it), and nothing the calls opened
    outlives the close: servers, threads, processes, file descriptors (the 20-call long run
    checks that nothing grows between calls)."""
    import asyncio

    from adapter.episodes import reaper
    from adapter.episodes.generations import b
    from adapter.miles.abi import RolloutFnConstructorInput, RolloutFnTrainInput
    from adapter.miles.binding import VerifiersRolloutFn
    from tests.contract.test_long_run import FD_MARGIN, THREAD_MARGIN, resources
    from tests.miles.test_episodes import miles_args

    load_env = b._load_env
    sized: list[dict[str, Any]] = []  # each env loaded for another n: where its serving began and ended

    def recording(config_data: Any, held: list[type]) -> Any:
        env = load_env(config_data, held)
        if config_data.get("n") == 3:
            record: dict[str, Any] = {}
            sized.append(record)
            serving = env.serving

            @contextlib.asynccontextmanager
            async def watched() -> Any:
                record["entered"] = asyncio.current_task().get_name()
                async with serving():
                    yield
                record["exited"] = asyncio.current_task().get_name()

            env.serving = watched
        return env

    monkeypatch.setattr(b, "_load_env", recording)
    tokenizer = loaded_tokenizer(qwen3_tokenizer)
    engine = ScriptedEngine(default=TextPolicy(tokenizer, word_reply))
    async with served(asgi_app(engine)) as url:
        engine.url = url
        reaper.ensure()  # the process' one reaper (started at the first env load) is no call's leftover
        before = resources()
        args = miles_args(qwen3_tokenizer, engine, "group-v1", rollout_batch_size=1, n_samples_per_prompt=3,
                          reward_key="shortest", verifiers_config=str(env_config("group-v1")))
        function = VerifiersRolloutFn(RolloutFnConstructorInput(args, None))
        try:
            for rollout_id in range(3):
                out = await asyncio.create_task(function(RolloutFnTrainInput(rollout_id=rollout_id)))
                assert [len(group) for group in out.samples] == [3]
        finally:
            await function.aclose()
        closed = resources()
    assert len(sized) == 1, "the env for n = 3 is loaded once and held across calls"
    assert sized[0] == {"entered": "vf-sglang rollout function", "exited": "vf-sglang rollout function"}
    assert closed["python_threads"] <= before["python_threads"] + THREAD_MARGIN + len(_process_lifetime_threads()), (
        before, closed, [thread.name for thread in threading.enumerate()])
    assert closed["children"] <= before["children"], (before, closed)
    assert closed["fds"] <= before["fds"] + FD_MARGIN, (before, closed)
