"""The engine transport: httpx's API on aiohttp — a bounded, kept-alive pool, no ambient proxy,
and every wire failure surfacing as the httpx error the client's retry rules expect."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapter.engine.transport import EngineTransport, tls_context
from benchmarks.stub import Stub
from conformance.hostile import Behaviour, HostileEngine, reset, respond, silence


@pytest.fixture
async def keepalive_engine():
    stub, connections = Stub(delay=0.05, tokens=4), []

    async def serve(reader: Any, writer: Any) -> None:
        connections.append(writer)
        await stub.serve(reader, writer)

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", connections, stub
    server.close()


async def test_requests_share_at_most_size_kept_alive_connections(keepalive_engine) -> None:
    url, connections, stub = keepalive_engine
    async with httpx.AsyncClient(transport=EngineTransport(3)) as client:
        for _ in range(3):  # three waves of 3 concurrent requests
            responses = await asyncio.gather(*(client.post(f"{url}/generate", content=b"{}") for _ in range(3)))
            assert [r.status_code for r in responses] == [200] * 3
        single = [await client.post(f"{url}/generate", content=b"{}") for _ in range(4)]
        crowd = await asyncio.gather(*(client.post(f"{url}/generate", content=b"{}") for _ in range(9)))
    assert all(r.status_code == 200 for r in [*single, *crowd])
    assert stub.generate == 22 and stub.peak == 3 and len(connections) == 3


def raw(data: bytes) -> Behaviour:
    async def write(writer: asyncio.StreamWriter, _: dict[str, Any]) -> None:
        writer.write(data)
        await writer.drain()

    return write


FAILURES = [
    pytest.param(reset(), httpx.RemoteProtocolError, id="closed-before-answering"),
    pytest.param(raw(b"NOT HTTP AT ALL\r\n\r\n"), httpx.RemoteProtocolError, id="malformed-status-line"),
    pytest.param(raw(b"HTTP/1.1 200 OK\r\nX-Long: " + b"a" * 20_000 + b"\r\n\r\n"), httpx.RemoteProtocolError,
                 id="header-over-limit"),
    pytest.param(respond(200, b'{"text": "cut"}', length=100_000), httpx.ReadError, id="body-cut-short"),
]


@pytest.mark.parametrize(("behaviour", "expected"), FAILURES)
async def test_a_wire_failure_is_the_httpx_error_the_retry_rules_expect(behaviour: Behaviour,
                                                                        expected: type[Exception]) -> None:
    async with HostileEngine(behaviour=behaviour) as engine, httpx.AsyncClient(transport=EngineTransport(2)) as client:
        with pytest.raises(expected) as caught:
            response = await client.post(f"{engine.url}/generate", content=b"{}")
            await response.aread()
    assert not isinstance(caught.value, httpx.TimeoutException)  # a dead peer is not "no answer in time"


async def test_a_silent_engine_is_a_read_timeout() -> None:
    async with HostileEngine(behaviour=silence()) as engine, \
            httpx.AsyncClient(transport=EngineTransport(1), timeout=0.3) as client:
        with pytest.raises(httpx.ReadTimeout):
            await client.post(f"{engine.url}/generate", content=b"{}")


async def test_nothing_listening_is_a_connect_error() -> None:
    async with httpx.AsyncClient(transport=EngineTransport(1)) as client:
        for _ in range(3):  # a failed connect never holds a pool slot
            with pytest.raises(httpx.ConnectError):
                await client.get("http://127.0.0.1:9/")  # nothing listens on the discard port


async def test_status_headers_and_body_arrive_as_sent() -> None:
    answer = respond(429, {"error": "busy"}, headers={"Retry-After": "3"})
    async with HostileEngine(behaviour=answer) as engine, httpx.AsyncClient(transport=EngineTransport(1)) as client:
        response = await client.post(f"{engine.url}/generate", content=b"{}")
    assert (response.status_code, response.headers["retry-after"], response.json()) == (429, "3", {"error": "busy"})


async def test_an_ambient_proxy_is_never_used(monkeypatch: pytest.MonkeyPatch, keepalive_engine) -> None:
    url, _, stub = keepalive_engine
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # a proxy that is nowhere
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    async with httpx.AsyncClient(transport=EngineTransport(1), trust_env=False) as client:
        response = await client.post(f"{url}/generate", content=b"{}")
    assert response.status_code == 200 and stub.generate == 1


async def test_the_stub_counts_calls_per_prompt_until_reset(keepalive_engine) -> None:
    """What the miles lane reads at its failing worker: the calls each model turn got (its prompt
    and its sampling parameters: two seeded rollouts of one prompt are two turns)."""
    url, _, _ = keepalive_engine
    async with httpx.AsyncClient() as client:
        for ids, seed in (([1, 2], 7), ([1, 2], 7), ([3], 7), ([1, 2], 8), ([1, 2], 7)):
            await client.post(f"{url}/generate", json={"input_ids": ids, "rid": f"r{seed}",
                                                       "sampling_params": {"sampling_seed": seed}})
        await client.post(f"{url}/generate", json={"text": "hi"})
        assert (await client.get(f"{url}/stats")).json()["per_prompt"] == [3, 1, 1, 1]
        await client.post(f"{url}/reset")
        assert (await client.get(f"{url}/stats")).json()["per_prompt"] == []


@pytest.fixture
def fresh_tls_context():
    """The process' shared context forgotten before the test and after it (the test may build it
    under its own environment)."""
    tls_context.cache_clear()
    yield
    tls_context.cache_clear()


def test_every_engine_transport_shares_one_verified_tls_context(monkeypatch, fresh_tls_context) -> None:
    built: list[ssl.SSLContext] = []
    create = ssl.create_default_context

    def counted(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        built.append(create(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(ssl, "create_default_context", counted)  # httpx's certifi context is built here too
    transports = [EngineTransport(2) for _ in range(5)]
    assert len(built) == 1, "one TLS context for the whole process, not one (or two) per transport"
    (shared,) = built
    assert all(t.ssl_context is shared for t in transports)
    assert shared.verify_mode == ssl.CERT_REQUIRED and shared.check_hostname


def self_signed(directory: Path, name: str) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 signed by its own key: (cert, key)."""
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    return cert, key


@pytest.mark.parametrize("trusted", [True, False], ids=["trusted-by-the-system-store", "untrusted"])
async def test_an_https_engine_is_reached_only_when_its_certificate_is_trusted(
    trusted: bool, tmp_path: Path, monkeypatch, fresh_tls_context
) -> None:
    """The shared context verifies: an engine behind a certificate the system store (here
    SSL_CERT_FILE, which `ssl.create_default_context()` reads) trusts answers; any other is refused."""
    cert, key = self_signed(tmp_path, "engine")
    other, _ = self_signed(tmp_path, "someone-else")
    monkeypatch.setenv("SSL_CERT_FILE", str(cert if trusted else other))
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)
    stub = Stub(delay=0, tokens=2)
    server = await asyncio.start_server(stub.serve, "127.0.0.1", 0, ssl=served)
    url = f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        async with httpx.AsyncClient(transport=EngineTransport(1)) as client:
            if trusted:
                response = await client.post(f"{url}/generate", content=b"{}")
                assert response.status_code == 200 and stub.generate == 1
            else:
                with pytest.raises(httpx.ConnectError, match=r"(?i)certificate"):
                    await client.post(f"{url}/generate", content=b"{}")
                assert stub.generate == 0
    finally:
        server.close()
