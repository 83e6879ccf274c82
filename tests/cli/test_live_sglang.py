"""Live conformance: `uv run pytest -m live --sglang-url http://127.0.0.1:30000` (or SGLANG_URL).

Skipped with "needs a live SGLang server" otherwise. The checks are `adapter.cli.server_checks`'s, the
same implementation `vf-sglang check` runs; a check that does not apply to the server (the
seed check without --enable-deterministic-inference, the routing check without a router)
skips with its reason.
"""

from __future__ import annotations

import pytest

from adapter.cli.server_checks import CHECKS, read_facts, run_check
from adapter.engine.client import SGLangClient

pytestmark = pytest.mark.live


@pytest.fixture
async def engine(sglang_url: str):
    client = SGLangClient(sglang_url)
    yield client
    await client.aclose()


async def test_live_server_is_healthy(engine) -> None:
    await engine.get("/health")


@pytest.mark.parametrize("name", CHECKS)
async def test_live_check(engine, name: str) -> None:
    facts = await read_facts(engine)
    assert facts.speaks_sglang, f"GET /model_info answered {facts.model_info!r}: not an SGLang server"
    result = await run_check(name, engine, facts)
    if result.status == "skip":
        pytest.skip(result.detail)
    assert result.status == "pass", result.detail
