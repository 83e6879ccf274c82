"""The new client's wire through the bridge (renderers 0.1.13 on: `contract-vf041dev`): a top-k head
asked as `logprobs=k` comes back k wide on every token, and every answer carries its weight-version
spans. Driven by Renderers' own `generate()` against the served bridge and a scripted engine that
answers `top_logprobs_num` as SGLang does. Skipped where the installed renderers predates them.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import pytest
import renderers.client
from renderers.base import create_renderer

from adapter.bridge.handler import create_app
from adapter.bridge.serve import served
from adapter.config.settings import Settings
from adapter.engine.client import SGLangClient
from conformance.engine import Completion, Fault, ScriptedEngine, asgi_app
from conformance.plugin import loaded_tokenizer
from conformance.policies import TextPolicy

pytestmark = [
    pytest.mark.contract,
    pytest.mark.skipif("completion_top_ids" not in inspect.getsource(renderers.client.generate),
                       reason="this renderers release's client reads no top-k head nor weight versions (< 0.1.13)"),
]


async def _generate(qwen3_tokenizer: Any, engine: ScriptedEngine, **sampling: Any) -> dict[str, Any]:
    from openai import AsyncOpenAI

    tokenizer = loaded_tokenizer(qwen3_tokenizer)
    settings = Settings(hf_checkpoint=str(qwen3_tokenizer), rollout_max_context_len=1024)
    async with served(asgi_app(engine)) as engine_url:
        sglang = SGLangClient(engine_url)
        try:
            async with served(create_app(settings, sglang, model="m")) as bridge_url, \
                    AsyncOpenAI(base_url=f"{bridge_url}/v1", api_key="local", max_retries=0) as client:
                return await renderers.client.generate(
                    client=client, renderer=create_renderer(tokenizer), model="m",
                    messages=[{"role": "user", "content": "Say 7"}], sampling_params={"max_tokens": 8, **sampling})
        finally:
            await sglang.aclose()


async def test_the_new_client_gets_a_k_wide_head_and_weight_versions_through_the_bridge(qwen3_tokenizer) -> None:
    engine = ScriptedEngine(default=TextPolicy(loaded_tokenizer(qwen3_tokenizer), lambda prompt: "7"))
    out = await _generate(qwen3_tokenizer, engine, logprobs=2)
    ids = out["completion_ids"]
    assert [len(row) for row in out["completion_top_ids"]] == [2] * len(ids) > []
    assert [row[0] for row in out["completion_top_ids"]] == ids  # the sampled token heads each row
    assert out["weight_versions"] == [{"version": "default", "start": 0, "end": len(ids)}]
    (request,) = engine.generate_requests()
    assert request.body["top_logprobs_num"] == 4  # the client asks k+2 candidates
    assert "extra_args" not in request.body["sampling_params"]  # prl_compact_logprobs: understood, not sent on


async def test_a_head_the_engine_does_not_send_is_refused_not_answered_without_it(qwen3_tokenizer) -> None:
    def without_head(body: dict[str, Any]) -> Completion | Fault:
        from conformance.sglang_outputs import sglang_output

        return Fault(status=200, body=sglang_output([7, 151645], [-0.1, -0.2]))  # no output_top_logprobs

    engine = ScriptedEngine(default=without_head)
    with pytest.raises(Exception, match="output_top_logprobs") as caught:
        await _generate(qwen3_tokenizer, engine, logprobs=2)
    assert getattr(caught.value, "status_code", None) == 502


@dataclass(frozen=True)
class WeightVersionSpan:
    """The fields of Miles #1891's `WeightVersionSpan` (its own class judges the same spans in the
    e2e lane, tests/miles/test_miles_next.py: it imports torch, which no contract cell has)."""

    version: str
    abs_start: int
    abs_end: int


@dataclass(frozen=True)
class WeightVersionsPerCall:
    spans: list[WeightVersionSpan]


# What the engine reports per answer: the first under weights "3" alone (`weight_version`), the
# second with SGLang 0.5.23's per-token spans, the weights changing after its first token.
ANSWER_VERSIONS: tuple[list[tuple[str, int, int | None]], ...] = ([("3", 0, None)], [("3", 0, 1), ("4", 1, None)])


def _versioned(policy: TextPolicy) -> Any:
    calls = iter(range(1_000))

    def answer(body: dict[str, Any]) -> Fault:
        from conformance.sglang_outputs import sglang_output

        completion = policy(body)
        spans = ANSWER_VERSIONS[min(next(calls), len(ANSWER_VERSIONS) - 1)]
        output = sglang_output(completion.ids, completion.logprobs, weight_version=spans[-1][0])
        if len(spans) > 1:
            output["meta_info"]["weight_versions"] = [{"version": v, "start": a, "end": b} for v, a, b in spans]
        return Fault(status=200, body=output)

    return answer


def _trace_spans(branch: Any) -> list[list[tuple[str, int, int]]]:
    """The trace's own record: each assistant node's `weight_versions` (completion indexes) moved
    to absolute offsets in the branch's tokens."""
    out, offset = [], 0
    for node in branch.nodes:
        mask = [bool(flag) for flag in node.mask]
        if node.weight_versions is not None:
            begin = offset + mask.index(True)
            out.append([(span.version, begin + span.start, begin + span.end) for span in node.weight_versions])
        offset += len(mask)
    return out


async def test_the_samples_1891_spans_agree_with_the_traces_own_weight_versions(qwen3_tokenizer, monkeypatch,
                                                                                 lifetimes) -> None:
    """A real two-turn tool episode: the trace records per turn the weight versions the bridge
    answered with, and the sample carries the same spans, turn by turn, at the same offsets."""
    import re

    from adapter.rollout.job import prepare_orchestrator
    from adapter.samples import conversion
    from conformance.policies import tool_call
    from tests.contract.test_contract import env_config

    def reply(prompt: str) -> str:
        if "<tool_response>" in prompt:
            return re.findall(r"STAMP-[0-9]{26}", prompt)[-1]
        return tool_call("echo_tools_stamp", {"word": re.search(r"with the word '(\w+)'", prompt).group(1)})

    converted: list[tuple[Any, list[Any]]] = []

    def recording(trace: Any, **kwargs: Any) -> list[Any]:
        samples = real(trace, **kwargs)
        converted.append((trace, samples))
        return samples

    real = conversion.trace_to_samples
    monkeypatch.setattr(conversion, "trace_to_samples", recording)
    monkeypatch.setattr(conversion, "span_classes", lambda: (WeightVersionsPerCall, WeightVersionSpan))
    engine = ScriptedEngine(default=_versioned(TextPolicy(loaded_tokenizer(qwen3_tokenizer), reply)))
    async with served(asgi_app(engine)) as url:
        settings = Settings(verifiers_config=env_config("echo-tool-v1"), rollout_batch_size=1, n_samples_per_prompt=1,
                            hf_checkpoint=str(qwen3_tokenizer), renderer_model_name="Qwen/Qwen3-0.6B",
                            rollout_max_response_len=64, rollout_max_context_len=2048, rollout_global_dataset=False)
        await prepare_orchestrator(settings, lifetime=lifetimes(settings, url)).train(rollout_id=0)
    ((trace, (sample,)),) = converted
    (branch,) = trace.branches
    recorded = _trace_spans(branch)
    assert len(recorded) == 2 and recorded[1][0][0] == "3" and recorded[1][1][0] == "4"  # both turns, both versions
    assert [[(s.version, s.abs_start, s.abs_end) for s in call.spans] for call in sample.weight_versions] == recorded
