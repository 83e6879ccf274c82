"""Live conformance: `uv run pytest -m live --sglang-url http://127.0.0.1:30000` (or SGLANG_URL).

Skipped with "needs a live SGLang server" otherwise. The same checks run in the GPU E2E tier.
"""

from __future__ import annotations

import pytest

from adapter.sglang import SGLangClient
from conformance.live import check_generate

pytestmark = pytest.mark.live


@pytest.fixture
async def engine(sglang_url: str):
    client = SGLangClient(sglang_url)
    yield client
    await client.aclose()


async def test_live_server_is_healthy(engine) -> None:
    await engine.get("/health")


async def test_live_generate_passes_the_wire_contract(engine) -> None:
    response = await check_generate(engine)
    assert response["choices"][0]["finish_reason"] in {"stop", "length"}


async def test_live_length_budget_is_honoured(engine) -> None:
    response = await check_generate(engine, max_tokens=2, stop_token_ids=[])
    choice = response["choices"][0]
    assert len(choice["token_ids"]) <= 2


async def test_live_same_seed_same_tokens(engine) -> None:
    first = await check_generate(engine, temperature=0.8, seed=1234)
    second = await check_generate(engine, temperature=0.8, seed=1234)
    assert first["choices"][0]["token_ids"] == second["choices"][0]["token_ids"]


async def test_live_abort_all_is_accepted(engine) -> None:
    assert await engine.abort_all()
