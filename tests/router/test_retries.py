"""The per-turn attempt budget end to end, counted at a worker that answers every /generate 503,
behind the real router: the bridge's 3 attempts per model turn are 3 worker calls when smg runs
with `--disable-retries` (what the adapter expects), and 15 with smg's default retries (5 calls
per attempt). A second try of the same turn from a layer above the bridge costs nothing more."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from adapter.bridge.handler import create_app, handle_generate
from adapter.cli.routing import SMG_DEFAULT_RETRIES
from adapter.config.limits import ENGINE_ATTEMPTS_PER_TURN
from adapter.config.settings import Settings
from adapter.engine.client import RetryPolicy, SGLangClient
from benchmarks.common import PROMPT, body
from e2e.router.smg import ADAPTER_FLAGS, smg_router, started, stub_engine

pytestmark = pytest.mark.router


async def _one_model_turn(router_url: str) -> list[int]:
    """One turn tried twice (as Verifiers' client would after a failure): the bridge's statuses."""
    engine = SGLangClient(router_url, retry=RetryPolicy(initial_backoff=0.05, max_backoff=0.1))
    state = create_app(Settings(sglang_router_policy="consistent_hashing"), engine, model="m").state.bridge
    try:
        return [(await handle_generate(state, body(PROMPT), "trace-1")).status for _ in range(2)]
    finally:
        await engine.aclose()


def _calls(stub_url: str) -> int:
    return int(httpx.get(f"{stub_url}/stats", timeout=5).json()["generate"])


@pytest.mark.parametrize(("extra", "calls"), [
    (ADAPTER_FLAGS, ENGINE_ATTEMPTS_PER_TURN),
    ((), ENGINE_ATTEMPTS_PER_TURN * SMG_DEFAULT_RETRIES),
], ids=["disable-retries", "smg-default-retries"])
def test_a_503_worker_costs_the_documented_calls_per_model_turn(smg, logs, extra, calls) -> None:
    with started(stub_engine(logs / "stub-503.log", status=503)) as failing, \
            started(smg_router([failing.url], logs / "smg-503.log", extra=extra)) as router:
        before = _calls(failing.url)
        statuses = asyncio.run(_one_model_turn(router.url))
        assert _calls(failing.url) - before == calls
    assert statuses == [502, 502]  # the turn failed, as an engine error, both times
