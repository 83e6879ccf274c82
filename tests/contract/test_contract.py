"""Contract checks run in every cell of the version matrix (tox envs `contract-*`), against
the real published verifiers/renderers installed there, plus one real episode group.

    uvx --with tox-uv tox -e contract-vf040      # one cell; `tox -l` lists them all
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import renderers.client

from adapter.bridge.serve import served
from adapter.config.settings import Settings
from adapter.engine.client import SGLangClient
from adapter.episodes.generations import installed
from adapter.errors import PromptTooLongError, UnsupportedRequestError
from adapter.rollout.job import prepare_orchestrator, run_lifetime
from adapter.versions.gate import installed_decision
from adapter.wire.translate import overlong_error_class, to_renderers_response
from conformance.engine import ScriptedEngine, asgi_app
from conformance.plugin import loaded_tokenizer
from conformance.policies import TextPolicy
from conformance.sglang_outputs import sglang_output

pytestmark = pytest.mark.contract

DECISION = installed_decision()


def env_config(name: str) -> str:
    return str(installed().bundled_config(name))


def test_the_installed_set_is_served() -> None:
    assert DECISION.supported, DECISION.describe()


def test_installed_renderers_accept_our_responses() -> None:
    validate = getattr(renderers.client, "_parse_completion_logprobs", None)
    if validate is None:
        pytest.skip("this renderers release (< 0.1.9) has no response validation; the episode test below "
                    "exercises its reading path")
    ids, logprobs = [40, 1079, 151645], [-0.5, -1.25, -0.0078125]  # float32-exact: 0.1.13 reads them as float32
    raw = json.dumps(to_renderers_response(sglang_output(ids, logprobs))).encode()
    choice = renderers.client.parse_generate_response(raw)["choices"][0]
    read = validate(choice, choice["token_ids"])  # a list (<= 0.1.12) or a float32 numpy array (0.1.13 on)
    assert (choice["token_ids"], list(map(float, read))) == (ids, logprobs)


def test_overlong_prompts_use_verifiers_own_type_where_the_release_has_one() -> None:
    import verifiers.v1.errors as vf_errors

    own = getattr(vf_errors, "OverlongPromptError", None)
    if own is None:
        assert overlong_error_class() is PromptTooLongError
    else:  # the in-process TrainClient recognises it by type: a clean truncation, not an error
        assert overlong_error_class() is own and issubclass(own, vf_errors.ProviderError)
    error = overlong_error_class()("Prompt length (9) exceeds maximum context length (4)", status_code=400)
    assert error.status_code == 400


async def test_a_bridge_refusal_stops_a_real_run_within_one_group_with_its_own_message(
    qwen3_tokenizer, monkeypatch
) -> None:
    """The bridge answers a typed refusal with 400; Verifiers records a provider error on the
    trace (both generations); the run stops with the bridge's own error object, at once."""
    refusal = UnsupportedRequestError("multimodal `features` are not supported: the adapter serves "
                                      "text-only renderers; use a text model")
    calls: list[Any] = []

    async def refuse(self: SGLangClient, request: Any, **_: Any) -> Any:
        calls.append(request)
        raise refusal

    monkeypatch.setattr(SGLangClient, "generate", refuse)
    started = time.monotonic()
    with pytest.raises(UnsupportedRequestError) as caught:
        await run_groups(qwen3_tokenizer, "arith-v1", lambda prompt: "7", over_sampling_batch_size=1)
    assert caught.value is refusal
    assert 1 <= len(calls) <= 2, "more than one group of n=2 reached the engine"
    assert time.monotonic() - started < 60


async def test_a_bug_planted_in_the_bridge_stops_a_real_run_at_its_first_group(qwen3_tokenizer, monkeypatch) -> None:
    """A bug in the bridge's own code is answered 500 (Verifiers fails the episode), recorded on the
    bridge's state, and raised by the train call at the first group that finishes, the bug chained as
    its cause: never a dropped group that is resampled while the bug hits one request in ten."""
    from adapter.bridge import handler
    from adapter.errors import InternalBridgeError

    real = handler.to_renderers_response
    answered = iter(range(1_000))

    def one_in_ten(*args: Any, **kwargs: Any) -> Any:
        if next(answered) % 10 == 0:
            raise ZeroDivisionError("a planted bug")
        return real(*args, **kwargs)

    monkeypatch.setattr(handler, "to_renderers_response", one_in_ten)
    started = time.monotonic()
    with pytest.raises(InternalBridgeError, match="ZeroDivisionError: a planted bug") as caught:
        await run_groups(qwen3_tokenizer, "arith-v1", lambda prompt: "7", rollout_batch_size=4,
                         over_sampling_batch_size=1)
    assert isinstance(caught.value.__cause__, ZeroDivisionError)
    assert caught.value.__cause__.__traceback__ is not None  # the original traceback travels
    assert next(answered) <= 2 * 2, "the run went on past the group the bug hit"
    assert time.monotonic() - started < 60


async def run_groups(qwen3_tokenizer: Path, env: str, reply: Any, **settings: Any) -> list[list[Any]]:
    """One train batch of `env` against a scripted engine, as `vf-sglang rollout` runs it: on a
    lifetime that is closed once the batch is back."""
    tokenizer = loaded_tokenizer(qwen3_tokenizer)
    engine = ScriptedEngine(default=TextPolicy(tokenizer, reply))
    async with served(asgi_app(engine)) as url:
        values = {"verifiers_config": env_config(env), "rollout_batch_size": 1, "n_samples_per_prompt": 2,
                  "hf_checkpoint": str(qwen3_tokenizer), "renderer_model_name": "Qwen/Qwen3-0.6B",
                  "rollout_max_response_len": 32, "rollout_max_context_len": 1024, "rollout_global_dataset": False,
                  **settings}
        async with run_lifetime(Settings(**values), url) as lifetime:
            result = await prepare_orchestrator(Settings(**values), lifetime=lifetime).train(rollout_id=0)
    assert engine.generate_requests(), "the engine was never called"
    return result.groups


async def test_one_real_episode_group_becomes_valid_samples(qwen3_tokenizer) -> None:
    (group,) = await run_groups(qwen3_tokenizer, "arith-v1", lambda prompt: "7")
    assert len(group) == 2
    for sample in group:
        assert len(sample.rollout_log_probs) == len(sample.loss_mask) == sample.response_length > 0
        assert sample.tokens[-1] == 151645
        assert set(sample.metadata["verifiers"]["rewards"]) == {"correct"}
        assert sample.reward == 1.0  # "What is 3 + 4?" is task 0


async def test_group_rewards_sum_to_their_constant(qwen3_tokenizer) -> None:
    import re

    replies = iter(range(100))

    def reply(prompt: str) -> str:
        word = re.search(r"Say the word '(\w+)'", prompt).group(1)
        return word if next(replies) % 2 else f"Sure: {word}!"

    (group,) = await run_groups(qwen3_tokenizer, "group-v1", reply, reward_key="shortest")
    assert sum(sample.reward["shortest"] for sample in group) == pytest.approx(0.5)


async def test_tool_reward_needs_the_tool_to_really_run(qwen3_tokenizer) -> None:
    """A real MCP tool server per rollout: 'apple' calls the stamp tool and repeats the stamp
    (reward 1.0, the tool reply in the sample at loss mask 0); 'river' fakes it (0.0)."""
    import re

    from conformance.policies import tool_call

    def reply(prompt: str) -> str:
        if "<tool_response>" in prompt:
            return re.findall(r"STAMP-[0-9]{26}", prompt)[-1]
        word = re.search(r"with the word '(\w+)'", prompt).group(1)
        return tool_call("echo_tools_stamp", {"word": word}) if word == "apple" else "STAMP-" + "0" * 26

    groups = await run_groups(qwen3_tokenizer, "echo-tool-v1", reply, rollout_batch_size=2, n_samples_per_prompt=1,
                              rollout_max_response_len=64, rollout_max_context_len=2048)
    by_task = {group[0].metadata["verifiers"]["task_index"]: group[0] for group in groups}
    called = by_task[0]
    assert (called.reward, by_task[1].reward) == (1.0, 0.0)
    # the tool's reply is in the sample, never trained on: mask 0 between the two sampled turns
    assert called.loss_mask[0] == 1 and called.loss_mask[-1] == 1 and 0 in called.loss_mask
    response = called.tokens[-called.response_length:]
    unmasked = loaded_tokenizer(qwen3_tokenizer).decode(
        [t for t, m in zip(response, called.loss_mask, strict=True) if not m])
    assert "<tool_response>" in unmasked and "STAMP-" in unmasked
