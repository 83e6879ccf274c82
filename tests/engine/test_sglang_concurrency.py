"""The SGLang client's own bounds: in-flight cap (semaphore + pool of the same size), one deadline
per attempt, validated timeouts, no ambient proxy, the transport hook, Retry-After."""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

import httpx
import pytest

from adapter.cli.entry import main
from adapter.engine.client import AttemptBudget, RetryPolicy, SGLangClient, Timeouts
from adapter.engine.transport import EngineTransport
from adapter.errors import ConfigurationError, EngineBusyError, EngineStatusError, EngineTimeoutError
from adapter.wire.translate import SGLangRequest
from conformance.hostile import HostileEngine, ok, respond

REQUEST = SGLangRequest(payload={"input_ids": [1, 2], "sampling_params": {}, "return_logprob": True}, headers={})
NO_BACKOFF = RetryPolicy(initial_backoff=0, max_backoff=0)


class Gauge:
    """An engine behaviour that answers after `seconds`, recording the peak concurrency."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.now, self.peak = seconds, 0, 0

    async def __call__(self, writer: asyncio.StreamWriter, body: dict[str, Any]) -> None:
        self.now += 1
        self.peak = max(self.peak, self.now)
        try:
            await asyncio.sleep(self.seconds)
            await ok()(writer, body)
        finally:
            self.now -= 1


async def test_the_engine_sees_exactly_the_in_flight_bound_and_queued_calls_never_time_out() -> None:
    gauge = Gauge(0.3)
    async with HostileEngine(behaviour=gauge) as engine:
        # 12 calls, 4 at a time, 0.3 s each: the last ones wait ~0.9 s, longer than the 0.5 s
        # deadline. Waiting for a slot is not part of the deadline, so none of them fails.
        client = SGLangClient(engine.url, max_in_flight=4, timeouts=Timeouts(read=0.5), retry=NO_BACKOFF)
        try:
            results = await asyncio.gather(*(client.generate(REQUEST) for _ in range(12)))
        finally:
            await client.aclose()
    assert len(results) == 12 and engine.generate_calls == 12
    assert gauge.peak == client.peak_in_flight == 4


async def test_the_deadline_covers_the_whole_attempt() -> None:
    async with HostileEngine(behaviour=Gauge(2.0)) as engine:
        client = SGLangClient(engine.url, timeouts=Timeouts(read=0.3), retry=RetryPolicy(max_attempts=1))
        started = time.perf_counter()
        with pytest.raises(EngineTimeoutError, match=r"within 0\.3s"):
            await client.generate(REQUEST)
        await client.aclose()
    assert time.perf_counter() - started < 1.5


@pytest.mark.parametrize("value", [math.nan, math.inf, 0, -1, -math.inf], ids=["nan", "inf", "zero", "neg", "-inf"])
@pytest.mark.parametrize("name", ["connect", "read", "write"])
def test_timeouts_must_be_finite_and_positive(name: str, value: float) -> None:
    with pytest.raises(ConfigurationError, match=f"Timeouts.{name} must be a finite number"):
        Timeouts(**{name: value})


@pytest.mark.parametrize("value", ["nan", "inf", "0", "-1"])
def test_serve_bridge_refuses_a_bad_read_timeout_at_start_up_naming_the_flag(value: str, capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["serve-bridge", "--sglang-url", "http://127.0.0.1:9", "--read-timeout", value])
    assert exited.value.code == 2
    assert "argument --read-timeout: must be a finite number of seconds above 0" in capsys.readouterr().err


@pytest.mark.parametrize("bound", [0, -3, True, 2.5])
def test_the_in_flight_bound_is_a_positive_int(bound: Any) -> None:
    with pytest.raises(ConfigurationError, match="max_in_flight"):
        SGLangClient("http://x", max_in_flight=bound)


async def test_an_ambient_proxy_is_never_used(monkeypatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("ALL_PROXY", "http://127.0.0.1:9")
    async with HostileEngine() as engine:
        client = SGLangClient(engine.url, retry=RetryPolicy(max_attempts=1))
        await client.generate(REQUEST)
        await client.aclose()
    assert engine.generate_calls == 1


async def test_wrap_transport_wraps_the_transport_the_client_builds() -> None:
    seen: list[str] = []

    class Recording(httpx.AsyncBaseTransport):
        def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
            self.inner = inner

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            seen.append(request.url.path)
            return await self.inner.handle_async_request(request)

        async def aclose(self) -> None:
            await self.inner.aclose()

    wrapped: list[httpx.AsyncBaseTransport] = []
    async with HostileEngine() as engine:
        client = SGLangClient(engine.url, wrap_transport=lambda t: wrapped.append(t) or Recording(t))
        await client.generate(REQUEST)
        await client.aclose()
    assert seen == ["/generate"]
    assert isinstance(wrapped[0], EngineTransport)


async def test_a_429_waits_as_long_as_retry_after_says() -> None:
    async with HostileEngine(behaviour=respond(429, {}, headers={"Retry-After": "0.3"})) as engine:
        client = SGLangClient(engine.url, retry=RetryPolicy(max_attempts=3, initial_backoff=0, max_backoff=0))
        started = time.perf_counter()
        with pytest.raises(EngineBusyError) as caught:
            await client.generate(REQUEST)
        await client.aclose()
    assert engine.generate_calls == 3 and caught.value.retry_after == 0.3
    assert time.perf_counter() - started >= 0.6


async def test_a_spent_budget_answers_the_last_failure_without_an_engine_call() -> None:
    budget = AttemptBudget(2)
    async with HostileEngine(behaviour=respond(503, {})) as engine:
        client = SGLangClient(engine.url, retry=NO_BACKOFF)
        for _ in range(3):
            with pytest.raises(EngineStatusError, match="HTTP 503"):
                await client.generate(REQUEST, budget=budget)
        await client.aclose()
    assert engine.generate_calls == 2 and budget.remaining == 0
