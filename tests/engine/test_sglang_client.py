"""The SGLang HTTP client: retry policy, typed failures, lazy router address, abort_all."""

from __future__ import annotations

import asyncio
import time
from argparse import Namespace

import httpx
import pytest
import respx

from adapter.engine.client import RetryPolicy, SGLangClient, Timeouts, router_url
from adapter.errors import (
    ConfigurationError,
    EngineError,
    EngineStatusError,
    EngineTimeoutError,
    EngineUnavailableError,
)
from adapter.wire.translate import SGLangRequest
from conformance.engine import Completion, Fault, by_key
from conformance.mocking import ENGINE_MOCKER

FAST_RETRY = RetryPolicy(max_attempts=3, initial_backoff=0.0, max_backoff=0.0)
REQUEST = SGLangRequest(payload={"input_ids": [1, 2], "sampling_params": {}, "return_logprob": True},
                        headers={"X-SMG-Routing-Key": "trace-1"})


@pytest.fixture
async def client(sglang_mock):
    engine = SGLangClient(sglang_mock.url, retry=FAST_RETRY)
    yield engine
    await engine.aclose()


async def test_generate_posts_payload_and_headers(client, sglang_mock) -> None:
    sglang_mock.script(Completion([5, 6], [-0.1, -0.2]))
    output = await client.generate(REQUEST)
    assert output.output_ids == [5, 6]
    (call,) = sglang_mock.generate_requests()
    assert call.body == REQUEST.payload
    assert call.headers["x-smg-routing-key"] == "trace-1"


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
async def test_retryable_status_is_retried_then_succeeds(status, client, sglang_mock) -> None:
    sglang_mock.script(Fault(status=status, body={"error": "busy"}), Completion([5], [-0.1]))
    assert (await client.generate(REQUEST)).output_ids == [5]
    assert len(sglang_mock.generate_requests()) == 2


@pytest.mark.parametrize("status", [400, 401, 404, 413, 422])
async def test_a_4xx_is_never_retried(status, client, sglang_mock) -> None:
    sglang_mock.script(Fault(status=status, body={"error": "bad"}), Completion([5], [-0.1]))
    with pytest.raises(EngineStatusError) as caught:
        await client.generate(REQUEST)
    assert caught.value.status_code == status
    assert len(sglang_mock.generate_requests()) == 1


@pytest.mark.parametrize(
    ("fault", "error"),
    [(Fault(status=503, body={}), EngineStatusError), (Fault(timeout=True), EngineTimeoutError),
     (Fault(reset=True), EngineUnavailableError)],
    ids=["5xx", "timeout", "reset"],
)
async def test_attempts_are_bounded_and_the_final_error_is_typed(fault, error, client, sglang_mock) -> None:
    sglang_mock.script(fault, fault, fault, Completion([5], [-0.1]))
    with pytest.raises(error):
        await client.generate(REQUEST)
    assert len(sglang_mock.generate_requests()) == FAST_RETRY.max_attempts


async def test_non_json_body_is_a_typed_error(client, sglang_mock) -> None:
    sglang_mock.script(Fault(status=200, body=b"<html>"))
    with pytest.raises(EngineError, match="not valid JSON"):
        await client.generate(REQUEST)


async def test_read_timeout_is_bounded_by_the_configured_time() -> None:
    """A real TCP peer that accepts and never answers: the timeout fires, attempts stop."""

    peers: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peers.append(writer)  # accept, read, never answer

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    engine = SGLangClient(f"http://127.0.0.1:{port}", timeouts=Timeouts(read=0.3),
                          retry=RetryPolicy(max_attempts=2, initial_backoff=0.0, max_backoff=0.0))
    started = time.monotonic()
    try:
        with pytest.raises(EngineTimeoutError):
            await engine.generate(REQUEST)
    finally:
        elapsed = time.monotonic() - started
        await engine.aclose()
        for peer in peers:
            peer.close()
            await peer.wait_closed()
        server.close()
        await server.wait_closed()
    assert 0.5 <= elapsed < 5.0


def test_router_url_prefers_the_default_model_router() -> None:
    args = Namespace(sglang_model_routers={"default": ("10.0.0.2", 31000)},
                     sglang_router_ip="10.0.0.1", sglang_router_port=30000)
    assert router_url(args) == "http://10.0.0.2:31000"
    assert router_url(Namespace(sglang_router_ip="::1", sglang_router_port=30000)) == "http://[::1]:30000"


def test_unset_router_address_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="--sglang-router-ip"):
        router_url(Namespace())


async def test_router_address_is_read_at_call_time(sglang_mock) -> None:
    args = Namespace(sglang_router_ip=None, sglang_router_port=None)
    engine = SGLangClient(lambda: router_url(args), retry=FAST_RETRY)  # built before the trainer fills it
    args.sglang_router_ip, args.sglang_router_port = "sglang.test", 30000
    sglang_mock.script(Completion([5], [-0.1]))
    assert (await engine.generate(REQUEST)).output_ids == [5]
    await engine.aclose()


async def test_abort_all_posts_to_every_worker_listed_by_the_router() -> None:
    router = "http://router.test:30000"
    workers = ["http://w1.test:30001", "http://w2.test:30002"]
    with respx.mock(using=ENGINE_MOCKER, assert_all_called=True) as mock:
        mock.get(f"{router}/workers").respond(json={"workers": [{"url": w} for w in workers]})
        aborts = [mock.post(f"{w}/abort_request").respond(json={}) for w in workers]
        engine = SGLangClient(router)
        assert await engine.abort_all() == workers
        await engine.aclose()
    assert all(route.calls.last.request.content == b'{"abort_all":true}' for route in aborts)


async def test_abort_all_falls_back_to_list_workers_then_to_the_address() -> None:
    router = "http://router.test:30000"
    with respx.mock(using=ENGINE_MOCKER, assert_all_called=True) as mock:
        mock.get(f"{router}/workers").respond(404)
        mock.get(f"{router}/list_workers").respond(json={"urls": ["http://w1.test:1"]})
        mock.post("http://w1.test:1/abort_request").respond(200)
        engine = SGLangClient(router)
        assert await engine.abort_all() == ["http://w1.test:1"]
        await engine.aclose()
    with respx.mock(using=ENGINE_MOCKER, assert_all_called=True) as mock:
        mock.get(f"{router}/workers").respond(404)
        mock.get(f"{router}/list_workers").respond(404)
        mock.post(f"{router}/abort_request").respond(200)
        engine = SGLangClient(router)
        assert await engine.abort_all() == [router]
        await engine.aclose()


async def test_abort_all_never_raises() -> None:
    with respx.mock(using=ENGINE_MOCKER) as mock:
        mock.get("http://router.test:1/workers").respond(json={"workers": [{"url": "http://w.test:2"}]})
        mock.post("http://w.test:2/abort_request").mock(side_effect=httpx.ConnectError("down"))
        engine = SGLangClient("http://router.test:1")
        assert await engine.abort_all() == []
        await engine.aclose()
    unset = SGLangClient(lambda: router_url(Namespace()))
    assert await unset.abort_all() == []
    await unset.aclose()


async def test_generate_routed_names_the_worker_the_router_picked(sglang_mock) -> None:
    sglang_mock.route = by_key(["http://w1.test:1", "http://w2.test:2"])
    engine = SGLangClient(sglang_mock.url, retry=FAST_RETRY)
    sglang_mock.script(Completion([5], [-0.1]), Completion([5], [-0.1]))
    first, second = (await engine.generate_routed(REQUEST)), (await engine.generate_routed(REQUEST))
    await engine.aclose()
    assert first.worker == second.worker in {"http://w1.test:1", "http://w2.test:2"}
    assert first.output.output_ids == [5]


async def test_a_single_server_names_no_worker(client, sglang_mock) -> None:
    sglang_mock.script(Completion([5], [-0.1]))
    assert (await client.generate_routed(REQUEST)).worker is None


async def test_discovery_tells_a_router_from_a_server_and_remembers_it() -> None:
    router = "http://router.test:30000"
    with respx.mock(using=ENGINE_MOCKER, assert_all_called=True) as mock:
        listing = mock.get(f"{router}/workers").respond(json={"workers": [{"url": "http://w1.test:1/"}]})
        engine = SGLangClient(router)
        topology = await engine.topology()
        assert (topology.is_router, topology.workers, topology.fact_source) == (True, ("http://w1.test:1",),
                                                                                "http://w1.test:1")
        assert await engine.topology() is topology and listing.call_count == 1  # asked once
        await engine.aclose()
    with respx.mock(using=ENGINE_MOCKER, assert_all_called=True) as mock:
        mock.get(f"{router}/workers").respond(404)
        mock.get(f"{router}/list_workers").respond(404)
        engine = SGLangClient(router)
        assert not (await engine.topology()).is_router
        assert (await engine.topology()).engine_urls == (router,)
        await engine.aclose()


async def test_an_unreachable_address_is_not_remembered_as_a_single_server() -> None:
    router = "http://router.test:30000"
    with respx.mock(using=ENGINE_MOCKER) as mock:
        listing = mock.get(f"{router}/workers")
        listing.side_effect = [httpx.ConnectError("down"), httpx.Response(200, json={"urls": ["http://w.test:1"]})]
        mock.get(f"{router}/list_workers").mock(side_effect=httpx.ConnectError("down"))
        engine = SGLangClient(router)
        assert not (await engine.topology()).is_router  # nothing answered: no verdict kept
        assert (await engine.topology()).workers == ("http://w.test:1",)
        await engine.aclose()


async def test_miles_router_is_asked_only_its_own_listing() -> None:
    router = "http://router.test:30000"
    with respx.mock(using=ENGINE_MOCKER, assert_all_called=True) as mock:
        mock.get(f"{router}/list_workers").respond(json={"urls": ["http://w.test:1"]})
        engine = SGLangClient(router, use_miles_router=True)
        assert (await engine.discover()).listed_by == "/list_workers"
        await engine.aclose()
