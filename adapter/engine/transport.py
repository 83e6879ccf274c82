"""The engine leg's httpx transport: httpx's API on aiohttp's connection pool and C HTTP parser.

`SGLangClient` speaks httpx (`httpx.AsyncClient`, `httpx.Request`/`Response`, the transport
API that `respx`, the cassette recorder and the fault suite plug into); underneath, this
transport hands each request to aiohttp through `httpx_aiohttp.AiohttpTransport` (the transport
the OpenAI SDK ships as `openai[aiohttp]`). Why (benchmarks/overhead.py, instant stub, same
machine, one run): httpx's default transport (httpcore + h11, pure Python) costs about 420 µs
per `/generate`, the same call on this transport about 270 µs; at Miles' concurrency
httpcore's pool also scans every connection for every queued request, which aiohttp's per-host
deque does not.

Pool: one `aiohttp.TCPConnector` of `size` connections (the client's in-flight bound; its
semaphore keeps requests from ever queueing here), kept alive `keepalive_expiry` seconds, no
proxy from the environment, no automatic decompression (httpx decodes), built on first use
inside the running event loop.

TLS: every transport of a process shares one verified context (`tls_context`: the system's CA
store, as `ssl.create_default_context()` loads it), built on the first transport. A context holds
settings and trust roots, no connection state, so sharing it changes nothing a connection sees;
building one reads and parses the whole CA store (measured on 2 cores: 35-40 ms each), and each
transport used to build two (its connector's, and httpx-aiohttp's own from certifi, which a
transport with its own session never uses) although engines are almost always plain HTTP.

Errors: httpx-aiohttp maps aiohttp's exceptions onto httpx's, but coarsely (a refused connect
and a server that hangs up before answering both come out as `httpx.ConnectTimeout`, and a
malformed status line escapes as an aiohttp type), so `_MAPPING` re-maps every aiohttp failure
by its own class: refused → `ConnectError`, hung up or malformed → `RemoteProtocolError`, reset
or cut short → `ReadError`, aiohttp's own timeouts → `ConnectTimeout`/`ReadTimeout`. Everything
leaving this module is an httpx exception.
"""

from __future__ import annotations

import contextlib
import functools
import ssl
from collections.abc import AsyncIterator, Iterator

import aiohttp
import httpx
from httpx_aiohttp import AiohttpTransport

# aiohttp's own parser limits on a response's status line and each header (bytes); an engine
# output travels in the body, which the client bounds itself.
MAX_LINE = 8190


# aiohttp's failures as httpx's, most specific first (a timeout is also a connection error).
_MAPPING: tuple[tuple[type[aiohttp.ClientError], type[httpx.TransportError]], ...] = (
    (aiohttp.ConnectionTimeoutError, httpx.ConnectTimeout),
    (aiohttp.ServerTimeoutError, httpx.ReadTimeout),
    (aiohttp.ClientConnectorError, httpx.ConnectError),
    (aiohttp.ServerDisconnectedError, httpx.RemoteProtocolError),
    (aiohttp.ClientResponseError, httpx.RemoteProtocolError),
    (aiohttp.ClientConnectionError, httpx.ReadError),
    (aiohttp.ClientPayloadError, httpx.ReadError),
    (aiohttp.ClientError, httpx.RemoteProtocolError),
)


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The verified TLS context every engine transport of this process shares (built once)."""
    return ssl.create_default_context()


def _narrowed(exc: BaseException) -> httpx.TransportError | None:
    """The httpx error for an aiohttp failure (raised by aiohttp, or already mapped by
    httpx-aiohttp, whose mapping is coarser); None when the failure is not aiohttp's."""
    cause = exc if isinstance(exc, aiohttp.ClientError) else exc.__cause__
    if not isinstance(cause, aiohttp.ClientError):
        return None
    kind = next(target for source, target in _MAPPING if isinstance(cause, source))
    return kind(f"{type(cause).__name__}: {cause}")


@contextlib.contextmanager
def _narrowing() -> Iterator[None]:
    try:
        yield
    except (httpx.TransportError, aiohttp.ClientError) as exc:
        narrowed = _narrowed(exc)
        if narrowed is None:
            raise
        raise narrowed from exc


class _Stream(httpx.AsyncByteStream):
    """The response body, with aiohttp failures mid-body narrowed the same way."""

    def __init__(self, inner: httpx.AsyncByteStream) -> None:
        self._inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _narrowing():
            async for chunk in self._inner:
                yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class EngineTransport(AiohttpTransport):
    """At most `size` kept-alive connections to the engine, aiohttp underneath, httpx on top."""

    def __init__(self, size: int, *, keepalive_expiry: float = 30.0) -> None:
        self.size = size
        self._keepalive = keepalive_expiry
        # httpx-aiohttp builds its own context from `verify` (certifi's, unless handed one): the shared one
        super().__init__(verify=tls_context(), trust_env=False, client=self._session)

    def _session(self) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(limit=self.size, limit_per_host=0, keepalive_timeout=self._keepalive,
                                         ssl=tls_context())
        return aiohttp.ClientSession(connector=connector, trust_env=False, auto_decompress=False,
                                     max_line_size=MAX_LINE, max_field_size=MAX_LINE)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        with _narrowing():
            response = await super().handle_async_request(request)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        response.stream = _Stream(response.stream)
        return response
