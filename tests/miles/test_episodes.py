"""Real verifiers 0.2.0 episodes (null harness, subprocess runtime) through the Miles entry
points, the bridge and a scripted engine answering real Qwen3 token ids (docs/contract.md §4–§6).

Slow-ish (each group starts harness subprocesses); the fast lane runs them all.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from adapter.errors import ConfigurationError, UnsupportedFeatureError
from adapter.miles.abi import RolloutFnConstructorInput, RolloutFnEvalInput, RolloutFnTrainInput
from adapter.miles.binding import VerifiersRolloutFn, generate_rollout
from adapter.samples.conversion import flatten
from conformance.plugin import loaded_tokenizer
from conformance.policies import TextPolicy, last_user_text, tool_call

ENVS = Path(__file__).resolve().parents[2] / "fixtures" / "envs"
QUESTION = re.compile(r"What is (\d+) ([-+*]) (\d+)\?")
OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


@pytest.fixture(scope="module")
def tokenizer(qwen3_tokenizer) -> Any:
    return loaded_tokenizer(qwen3_tokenizer)


def miles_args(qwen3_tokenizer: Path, sglang_mock: Any, env: str, **overrides: Any) -> argparse.Namespace:
    host, port = sglang_mock.url.removeprefix("http://").split(":")
    values = {
        "verifiers_config": str(ENVS / f"{env}.toml"), "hf_checkpoint": str(qwen3_tokenizer),
        "renderer_model_name": "Qwen/Qwen3-0.6B", "rollout_global_dataset": False,
        "rollout_batch_size": 2, "n_samples_per_prompt": 2, "rollout_max_response_len": 64,
        "rollout_max_context_len": 1024, "sglang_router_ip": host, "sglang_router_port": int(port),
        "rollout_temperature": 0.7, **overrides,
    }
    return argparse.Namespace(**values)


def arith_policy(tokenizer: Any) -> TextPolicy:
    """Alternates a right answer with an off-by-one one, so rewards vary inside groups."""
    turn = itertools.count()

    def reply(prompt: str) -> str:
        a, op, b = QUESTION.search(last_user_text(prompt)).groups()
        answer = OPS[op](int(a), int(b))
        return str(answer) if next(turn) % 2 == 0 else f"The answer is {answer + 1}."

    return TextPolicy(tokenizer, reply)


def all_samples(groups: list[list[Any]]) -> list[Any]:
    return [sample for group in groups for sample in flatten(group)]


async def test_train_returns_batch_of_full_valid_groups(qwen3_tokenizer, tokenizer, sglang_mock) -> None:
    """Also: Miles' --rollout-min-p (#1521) reaches SGLang on every turn."""
    sglang_mock.default = arith_policy(tokenizer)
    args = miles_args(qwen3_tokenizer, sglang_mock, "arith-v1", rollout_min_p=0.05)
    fn = VerifiersRolloutFn(RolloutFnConstructorInput(args, None))
    out = await fn(RolloutFnTrainInput(rollout_id=0))
    assert [len(group) for group in out.samples] == [2, 2]
    sampled = [r.body for r in sglang_mock.generate_requests()]
    assert {b["sampling_params"]["min_p"] for b in sampled} == {0.05}
    for sample in all_samples(out.samples):
        assert len(sample.rollout_log_probs) == len(sample.loss_mask) == sample.response_length > 0
        assert all(math.isfinite(lp) for lp in sample.rollout_log_probs)
        assert sample.status.value == "completed"
        assert set(sample.metadata["verifiers"]["rewards"]) == {"correct"}
        assert sample.metadata["verifiers"]["metrics"]["parsed"] == 1.0
        assert sample.tokens[: len(sample.tokens) - sample.response_length] in [b["input_ids"] for b in sampled]
        assert sample.tokens[-1] == 151645
    assert {s.reward for s in all_samples(out.samples)} <= {1.0, 0.5}
    assert out.metrics["verifiers/error_rate"] == 0.0


async def test_a_group_reward_reaches_miles_summing_to_its_constant_beside_every_component(
        qwen3_tokenizer, tokenizer, sglang_mock) -> None:
    """Through Miles' class: the reward key picks the group reward, the sample keeps every component
    (one group; the contract suite checks the sum on every supported release)."""
    verbose = itertools.count()
    sglang_mock.default = TextPolicy(tokenizer, lambda prompt: (
        re.search(r"Say the word '(\w+)'", prompt).group(1) if next(verbose) % 2 else "Sure, here it is!"))
    args = miles_args(qwen3_tokenizer, sglang_mock, "group-v1", reward_key="shortest", rollout_batch_size=1)
    out = await VerifiersRolloutFn(RolloutFnConstructorInput(args, None))(RolloutFnTrainInput(rollout_id=0))
    assert len(out.samples) == 1
    for group in out.samples:
        assert sum(sample.reward["shortest"] for sample in group) == pytest.approx(0.5)
        assert all(set(sample.reward) == {"says_word", "shortest", "reward"} for sample in group)


def test_group_reward_with_one_sample_is_refused_before_any_episode(qwen3_tokenizer, sglang_mock) -> None:
    args = miles_args(qwen3_tokenizer, sglang_mock, "group-v1", n_samples_per_prompt=1)
    with pytest.raises(ConfigurationError, match="--n-samples-per-prompt"):
        VerifiersRolloutFn(RolloutFnConstructorInput(args, None))
    assert sglang_mock.requests == []


def tool_policy(tokenizer: Any) -> TextPolicy:
    """Calls the stamp tool for 'apple' and echoes the stamp; answers 'river' without the tool."""

    def reply(prompt: str) -> str:
        if "<tool_response>" in prompt:
            return re.findall(r"STAMP-[0-9]{26}", prompt)[-1]
        word = re.search(r"with the word '(\w+)'", prompt).group(1)
        if word == "apple":
            return tool_call("echo_tools_stamp", {"word": word})
        return "STAMP-" + "0" * 26

    return TextPolicy(tokenizer, reply)


async def test_failing_episodes_are_dropped_by_reason_and_replaced(qwen3_tokenizer, tokenizer, sglang_mock) -> None:
    policy = arith_policy(tokenizer)

    def flaky(body: dict[str, Any]) -> Any:
        from conformance.engine import Fault

        prompt = tokenizer.decode(body["input_ids"])
        if "3 + 4" in prompt:  # task 0 always fails with an engine 400 (not retried)
            return Fault(status=400, body={"error": "scripted bad request"})
        return policy(body)

    sglang_mock.default = flaky
    args = miles_args(qwen3_tokenizer, sglang_mock, "arith-v1", rollout_batch_size=1, over_sampling_batch_size=1)
    out = await VerifiersRolloutFn(RolloutFnConstructorInput(args, None))(RolloutFnTrainInput(rollout_id=0))
    assert out.metrics["rollout/drop/trace_error"] == 1.0
    assert out.samples[0][0].metadata["verifiers"]["task_index"] == 1


async def test_a_configuration_error_stops_the_run(qwen3_tokenizer, tokenizer, sglang_mock) -> None:
    """Tools with a renderer that cannot parse them: a typed 400, so the run stops."""
    sglang_mock.default = tool_policy(tokenizer)
    args = miles_args(qwen3_tokenizer, sglang_mock, "echo-tool-v1", n_samples_per_prompt=1, rollout_batch_size=1,
                      renderer_model_name="my-org/unregistered-model")
    fn = VerifiersRolloutFn(RolloutFnConstructorInput(args, None))
    # the advice names the flag that can help (Miles' --renderer-model-name), never the checkpoint
    with pytest.raises(ConfigurationError, match="cannot parse tool calls: pass --renderer-model-name with a "
                                                 r"registered model id") as error:
        await fn(RolloutFnTrainInput(rollout_id=0))
    assert "--hf-checkpoint" not in str(error.value)
    assert sglang_mock.generate_requests() == []


async def test_an_unsupported_feature_stops_the_run_at_the_first_group(qwen3_tokenizer, tokenizer, sglang_mock,
                                                                      monkeypatch) -> None:
    """Miles' `test_train_client_reports_unsupported_dialect_as_configuration_error` and
    `test_unsupported_trace_error_is_not_resampled_forever` (tests/fast/examples/experimental/
    verifiers/test_verifiers_rollout.py): a `NotImplementedError` from Verifiers' TrainClient or
    Renderers ends the run at the first group. Here Renderers' generate raises it on every call
    (its own multimodal serialiser, which has no encoder for the Qwen3 renderer). Recognised by
    type: one 400 per rollout (not retried), the typed refusal names what is not implemented, no
    engine call, no resampling (before: a 502 retried 3 times per rollout, a harness error per
    trace, 32 dropped groups, 192 calls, then `RolloutStalledError`)."""
    import renderers.client

    calls: list[dict[str, Any]] = []

    async def unimplemented(**kwargs: Any) -> Any:
        calls.append(kwargs)
        return renderers.client._build_mm_features(kwargs["renderer"], None)  # raises: no encoder for Qwen3

    monkeypatch.setattr(renderers.client, "generate", unimplemented)
    sglang_mock.default = arith_policy(tokenizer)
    args = miles_args(qwen3_tokenizer, sglang_mock, "arith-v1", rollout_batch_size=1)
    fn = VerifiersRolloutFn(RolloutFnConstructorInput(args, None))
    with pytest.raises(UnsupportedFeatureError, match=r"does not implement \(renderers\.client\): NotImplementedError: "
                                                      "Multimodal serialization not implemented for Qwen3Renderer"):
        await fn(RolloutFnTrainInput(rollout_id=0))
    assert len(calls) == 2  # the first group's n = 2 rollouts, one call each: nothing retried or resampled
    assert sglang_mock.generate_requests() == []


async def test_local_tokenizer_uses_identity_inferred_from_checkpoint(qwen3_tokenizer, tokenizer, sglang_mock,
                                                                      tmp_path) -> None:
    """Miles' `test_uses_local_tokenizer_with_inferred_identity`: --sglang-tokenizer-path a local
    directory no registry knows, --hf-checkpoint an HF cache snapshot of a registered model. The
    tokenizer is loaded from the local directory, the renderer is the checkpoint's (Qwen3's, which
    parses the tool call: the tool taskset runs instead of being refused)."""
    sglang_mock.default = tool_policy(tokenizer)
    snapshot = tmp_path / "hub" / "models--Qwen--Qwen3-4B-Instruct-2507" / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
                                                      "transformers_version": "4.51.0", "vocab_size": 151936}))
    args = miles_args(qwen3_tokenizer, sglang_mock, "echo-tool-v1", n_samples_per_prompt=1, rollout_batch_size=1,
                      renderer_model_name=None, sglang_tokenizer_path=str(qwen3_tokenizer), hf_checkpoint=str(snapshot))
    fn = VerifiersRolloutFn(RolloutFnConstructorInput(args, None))
    assert "qwen3-tokenizer" in str(qwen3_tokenizer) and fn.orchestrator.tokenizer_path == str(qwen3_tokenizer)
    assert fn.orchestrator.renderer_model_name == "Qwen/Qwen3-4B-Instruct-2507"
    out = await fn(RolloutFnTrainInput(rollout_id=0))
    ((sample,),) = out.samples
    assert sample.metadata["verifiers"]["task_index"] == 0  # the task that calls the tool
    assert sample.reward == 1.0  # the call was parsed, the tool ran, its stamp came back


async def test_eval_lists_are_aligned_and_use_the_eval_reward_key(qwen3_tokenizer, tokenizer, sglang_mock) -> None:
    sglang_mock.default = TextPolicy(tokenizer, lambda prompt: re.search(r"Say the word '(\w+)'", prompt).group(1))
    # group-mini-v1: group-v1's first two prompts (an eval runs every prompt; each episode is a harness process)
    args = miles_args(qwen3_tokenizer, sglang_mock, "group-mini-v1", eval_interval=1, n_samples_per_eval_prompt=2,
                      eval_reward_key="says_word", rollout_min_new_tokens=3)
    out = await VerifiersRolloutFn(RolloutFnConstructorInput(args, None))(RolloutFnEvalInput(rollout_id=0))
    # eval clears training's minimum as Miles does (eval_min_new_tokens unset): none reaches SGLang
    assert all("min_new_tokens" not in r.body["sampling_params"] for r in sglang_mock.generate_requests())
    data = out.data["group-mini-v1"]
    assert len(data["rewards"]) == len(data["truncated"]) == len(data["samples"]) == 4
    assert data["rewards"] == [1.0] * 4  # numbers (Miles averages them), picked by the eval reward key
    assert all(sample.reward["says_word"] == 1.0 for sample in data["samples"])  # the full dict stays
    assert data["truncated"] == [False] * 4


def test_the_legacy_function_matches_the_class(qwen3_tokenizer, tokenizer, sglang_mock) -> None:
    """Miles calls the legacy function from a worker thread with no running loop."""
    sglang_mock.default = TextPolicy(tokenizer, lambda prompt: "42")
    # one group of 2 each way: what either ABI does to a group is the same for every group
    args = miles_args(qwen3_tokenizer, sglang_mock, "arith-v1", sglang_enable_deterministic_inference=True,
                      rollout_batch_size=1)
    legacy = generate_rollout(args, 0, None)
    klass = VerifiersRolloutFn(RolloutFnConstructorInput(
        miles_args(qwen3_tokenizer, sglang_mock, "arith-v1", sglang_enable_deterministic_inference=True,
                   rollout_batch_size=1), None))
    import asyncio

    modern = asyncio.run(klass(RolloutFnTrainInput(rollout_id=0)))

    def shape(samples: list[list[Any]]) -> list[Any]:
        return sorted((s.metadata["verifiers"]["task_index"], s.tokens, s.reward, s.loss_mask)
                      for s in all_samples(samples))

    assert shape(legacy.samples) == shape(modern.samples)
    seeds = sorted(r.body["sampling_params"]["sampling_seed"] for r in sglang_mock.generate_requests())
    assert seeds == sorted([42, 43] * 2)


def test_an_ambiguous_checkpoint_name_fails_before_any_episode(tmp_path, sglang_mock) -> None:
    checkpoint = tmp_path / "Qwen3-0.6B"  # registered twice in renderers (qwen3 and prime-qwen3)
    checkpoint.mkdir()
    args = miles_args(checkpoint, sglang_mock, "arith-v1", renderer_model_name=None)
    with pytest.raises(ConfigurationError, match=r"PrimeIntellect/Qwen3-0\.6B"):
        VerifiersRolloutFn(RolloutFnConstructorInput(args, None))
    assert sglang_mock.requests == []
