"""The new client's wire from real SGLang (the sglang-cpu lane's `new-client-wire` step runs this in a
venv with the pre-release pair verifiers 0.4.1.dev86 + renderers 0.1.13.dev17): Renderers' own
`generate()` through the bridge asks a top-k head and gets it k wide on every token, with the
weight-version spans SGLang reported. Skipped where the installed renderers' client reads neither.
"""

from __future__ import annotations

import inspect

import httpx
import pytest
import renderers.client

from adapter.bridge.handler import create_app
from adapter.bridge.serve import served
from adapter.config.settings import Settings
from adapter.engine.client import SGLangClient

pytestmark = [
    pytest.mark.sglang_cpu,
    pytest.mark.skipif("completion_top_ids" not in inspect.getsource(renderers.client.generate),
                       reason="this renderers release's client reads no top-k head nor weight versions (< 0.1.13)"),
]


async def test_the_new_client_gets_a_top_k_head_and_weight_versions_from_real_sglang(real_sglang) -> None:
    from openai import AsyncOpenAI
    from renderers.base import create_renderer, load_tokenizer

    async with httpx.AsyncClient(trust_env=False, timeout=30) as http:
        version = (await http.get(f"{real_sglang.url}/model_info")).json().get("weight_version", "default")
    tokenizer = load_tokenizer(str(real_sglang.model_dir))
    settings = Settings(hf_checkpoint=str(real_sglang.model_dir), rollout_max_context_len=512)
    engine = SGLangClient(real_sglang.url)
    try:
        async with served(create_app(settings, engine, model="m")) as bridge_url, \
                AsyncOpenAI(base_url=f"{bridge_url}/v1", api_key="local", max_retries=0) as client:
            out = await renderers.client.generate(
                client=client, renderer=create_renderer(tokenizer), model="m",
                messages=[{"role": "user", "content": "Say hello"}],
                sampling_params={"max_tokens": 6, "temperature": 1.0, "seed": 7, "logprobs": 3})
    finally:
        await engine.aclose()
    ids = out["completion_ids"]
    assert ids and len(out["completion_top_ids"]) == len(out["completion_top_logprobs"]) == len(ids)
    assert all(1 <= len(row) <= 3 for row in out["completion_top_ids"])  # ties at the boundary shorten a row
    assert sum(len(row) == 3 for row in out["completion_top_ids"]) >= len(ids) // 2
    assert all(lp <= 1e-6 for row in out["completion_top_logprobs"] for lp in row)
    assert out["weight_versions"] == [{"version": str(version), "start": 0, "end": len(ids)}]
