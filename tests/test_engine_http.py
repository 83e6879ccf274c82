"""adapter.engine_http: keep-alive reuse, decoded-size cap, framing errors, httpx error types."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from adapter.engine_http import BodyTooLarge, EngineHTTP, httpx_patched


async def _serve(answer: Callable[[int], bytes], *, close_after: bool = False) -> tuple[asyncio.Server, list[int]]:
    connections: list[int] = []
    requests = [0]

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line[15:]) for line in head.split(b"\r\n")
                               if line[:15].lower() == b"content-length:"), 0)
                await reader.readexactly(length)
                requests[0] += 1
                writer.write(answer(requests[0]))
                await writer.drain()
                if close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0), connections


def _response(body: bytes, *extra: bytes, length: int | None = None) -> bytes:
    head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n" % (len(body) if length is None else length)
    return head + b"".join(h + b"\r\n" for h in extra) + b"\r\n" + body


@pytest.fixture
async def client() -> AsyncIterator[EngineHTTP]:
    http = EngineHTTP(4, connect_timeout=2, max_body_bytes=1000)
    yield http
    await http.aclose()


def _url(server: asyncio.Server) -> str:
    return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/generate"


async def test_keep_alive_connection_is_reused(client: EngineHTTP) -> None:
    server, connections = await _serve(lambda _: _response(b'{"a":1}'))
    async with server:
        for _ in range(5):
            status, headers, body = await client.request("POST", _url(server), b"{}", {"X-Session-ID": "s"})
            assert (status, body, headers[b"content-length"]) == (200, b'{"a":1}', b"7")
    assert len(connections) == 1


async def test_connection_close_is_honoured(client: EngineHTTP) -> None:
    server, connections = await _serve(lambda _: _response(b"{}", b"Connection: close"), close_after=True)
    async with server:
        for _ in range(3):
            assert (await client.request("POST", _url(server), b"{}", {}))[0] == 200
    assert len(connections) == 3


async def test_gzip_is_decoded_and_capped_at_the_decoded_size(client: EngineHTTP) -> None:
    small, bomb = gzip.compress(b"[1,2]"), gzip.compress(b" " * 5000)
    server, _ = await _serve(lambda n: _response(small if n == 1 else bomb, b"Content-Encoding: gzip"))
    async with server:
        assert (await client.request("GET", _url(server), None, {}))[2] == b"[1,2]"
        with pytest.raises(BodyTooLarge):
            await client.request("GET", _url(server), None, {})


async def test_bad_gzip_is_a_decoding_error(client: EngineHTTP) -> None:
    server, _ = await _serve(lambda _: _response(b"not gzip", b"Content-Encoding: gzip"))
    async with server:
        with pytest.raises(httpx.DecodingError):
            await client.request("GET", _url(server), None, {})


async def test_body_over_the_cap_and_truncated_body(client: EngineHTTP) -> None:
    server, _ = await _serve(lambda n: _response(b" " * 2000) if n == 1 else _response(b"{}", length=50),
                             close_after=True)  # the first connection is dropped (oversize), never reused
    async with server:
        with pytest.raises(BodyTooLarge):
            await client.request("GET", _url(server), None, {})
        with pytest.raises(httpx.RemoteProtocolError):
            await client.request("GET", _url(server), None, {})


async def test_garbage_and_refused_connections_are_transport_errors(client: EngineHTTP) -> None:
    server, _ = await _serve(lambda _: b"SPDY/9 what\r\n\r\n")
    async with server:
        with pytest.raises(httpx.RemoteProtocolError):
            await client.request("GET", _url(server), None, {})
    with pytest.raises(httpx.ConnectError):
        await client.request("GET", "http://127.0.0.1:9/generate", None, {})
    with pytest.raises(httpx.LocalProtocolError):
        await client.request("GET", "http://127.0.0.1:9/generate", None, {"X-Session-ID": "a\r\nInjected: 1"})


def test_respx_patching_is_detected() -> None:
    import respx

    assert not httpx_patched()
    with respx.mock():
        assert httpx_patched()
    assert not httpx_patched()
