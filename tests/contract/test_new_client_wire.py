"""The new client's wire through the bridge (renderers 0.1.13 on: `contract-vf041dev`): a top-k head
asked as `logprobs=k` comes back k wide on every token, and every answer carries its weight-version
spans. Driven by Renderers' own `generate()` against the served bridge and a scripted engine that
answers `top_logprobs_num` as SGLang does. Skipped where the installed renderers predates them.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest
import renderers.client
from renderers.base import create_renderer, load_tokenizer

from adapter.bridge.handler import create_app
from adapter.bridge.serve import served
from adapter.config.settings import Settings
from adapter.engine.client import SGLangClient
from conformance.engine import Completion, Fault, ScriptedEngine, asgi_app
from conformance.policies import TextPolicy

pytestmark = [
    pytest.mark.contract,
    pytest.mark.skipif("completion_top_ids" not in inspect.getsource(renderers.client.generate),
                       reason="this renderers release's client reads no top-k head nor weight versions (< 0.1.13)"),
]


async def _generate(qwen3_tokenizer: Any, engine: ScriptedEngine, **sampling: Any) -> dict[str, Any]:
    from openai import AsyncOpenAI

    tokenizer = load_tokenizer(str(qwen3_tokenizer))
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
    engine = ScriptedEngine(default=TextPolicy(load_tokenizer(str(qwen3_tokenizer)), lambda prompt: "7"))
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
