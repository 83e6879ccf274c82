"""Teardown's `abort_all` through the real router reaches every live worker: the router does not
route `/abort_request` (smg answers 404), so the client lists the workers and posts to each; a
long generation on each worker comes back aborted."""

from __future__ import annotations

import asyncio

import pytest

from adapter.config.settings import Settings
from adapter.engine.client import RetryPolicy, SGLangClient
from adapter.errors import EngineAbortedError
from adapter.wire.translate import to_renderers_response, to_sglang_request
from benchmarks.common import PROMPT, body

pytestmark = pytest.mark.router
KEYED = Settings(sglang_router_policy="consistent_hashing")


def _request(key: str, max_tokens: int):
    payload = body(PROMPT, max_tokens=max_tokens)
    payload["sampling_params"]["ignore_eos"] = True
    return to_sglang_request(payload, settings=KEYED, session_id=key, first_turn=True)


async def _a_key_per_worker(engine: SGLangClient, count: int) -> dict[str, str]:
    """worker → a routing key the router sends there (probed with one-token requests)."""
    found: dict[str, str] = {}
    for index in range(64):
        worker = (await engine.generate_routed(_request(f"abort-probe-{index}", 1))).worker
        if worker is not None:
            found.setdefault(worker, f"abort-probe-{index}")
        if len(found) == count:
            break
    return found


async def _abort_both(router_url: str, workers: list[str]) -> tuple[list[str], list[BaseException | None]]:
    engine = SGLangClient(router_url, retry=RetryPolicy(max_attempts=1))
    try:
        keys = await _a_key_per_worker(engine, len(workers))
        assert sorted(keys) == sorted(workers)
        long = [asyncio.ensure_future(engine.generate(_request(key, 3000))) for key in keys.values()]
        await asyncio.sleep(1.5)  # both are decoding (one at a time per reference engine)
        accepted = await engine.abort_all()
        outcomes: list[BaseException | None] = []
        for task in long:
            try:
                to_renderers_response(await asyncio.wait_for(task, timeout=120))
                outcomes.append(None)
            except EngineAbortedError as exc:
                outcomes.append(exc)
        return accepted, outcomes
    finally:
        await engine.aclose()


def test_abort_all_reaches_every_worker_behind_the_router(router, workers) -> None:
    accepted, outcomes = asyncio.run(_abort_both(router.url, [w.url for w in workers]))
    assert sorted(accepted) == sorted(w.url for w in workers)
    assert all(isinstance(outcome, EngineAbortedError) for outcome in outcomes), outcomes
