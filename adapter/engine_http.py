"""The engine leg's HTTP/1.1 client: asyncio protocol + httptools' C parser, keep-alive pool.

Why not httpx here: an httpx call costs ~350 µs of Python per request (request/headers models,
h11, anyio, the pool) against an engine that answers instantly; this client costs a small
fraction of that, which is most of what the bridge adds over a raw call. What it keeps:
  * every connection is plain HTTP/1.1 with keep-alive, reused LIFO (recently used stays warm),
    never more idle than `size` (callers bound concurrency; `SGLangClient`'s semaphore);
  * connect bounded by `connect_timeout`; the caller's deadline (`asyncio.timeout`) covers the
    rest, and a request that does not finish cleanly never returns its connection to the pool;
  * the body is capped at `max_body_bytes` (decoded size: gzip/deflate are decoded with the
    same cap, a bomb stops at the cap); redirects are answers (never followed); no proxies;
  * failures are raised as the httpx exceptions the caller already maps (`ConnectError`,
    `ConnectTimeout`, `ReadError`, `RemoteProtocolError`, `LocalProtocolError`,
    `DecodingError`), so error types and retry rules are the same on both clients.
`SGLangClient` uses it unless a custom httpx transport is given (cassette recording), or httpx's
transport layer is patched at call time (respx and other mocking or tracing tools patch it):
then the call goes through httpx, so whatever patched it sees the call.
"""

from __future__ import annotations

import asyncio
import math
import re
import ssl
import time
import zlib
from typing import Any
from urllib.parse import urlsplit

import httpcore
import httptools
import httpx

from adapter.errors import EngineBusyError, EngineError, EngineStatusError
from adapter.jsonio import JSONBodyError, loads

_ILLEGAL = re.compile(r"[\x00-\x1f\x7f]")
_DECODERS = {b"gzip": 16 + zlib.MAX_WBITS, b"x-gzip": 16 + zlib.MAX_WBITS, b"deflate": zlib.MAX_WBITS}
Target = tuple[str, int, bool]  # host, port, tls


_ORIGINAL = (httpcore.AsyncConnectionPool.handle_async_request, httpx.AsyncHTTPTransport.handle_async_request)


def httpx_patched() -> bool:
    """True while something (respx, a tracer) has replaced httpx's or httpcore's request method."""
    current = (httpcore.AsyncConnectionPool.handle_async_request, httpx.AsyncHTTPTransport.handle_async_request)
    return current != _ORIGINAL


class BodyTooLarge(EngineError):
    """The engine's body (decoded) is over the cap: an engine fault, 502, never retried."""


class _Connection(asyncio.Protocol):
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = time.monotonic()
        self.waiter: asyncio.Future[None] | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.headers: dict[bytes, bytes] = {}
        self.status, self.headers, self.body, self.headers_done, self.oversize = 0, {}, bytearray(), False, False

    def begin(self, waiter: asyncio.Future[None]) -> None:
        self.waiter = waiter
        self.status, self.headers, self.body, self.headers_done, self.oversize = 0, {}, bytearray(), False, False

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self.waiter is None or self.waiter.done():  # bytes nobody asked for: the connection is unusable
            self.close()
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(httpx.RemoteProtocolError(f"malformed HTTP response from the engine: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.waiter is None or self.waiter.done():
            return
        eof_delimited = self.headers_done and b"content-length" not in self.headers and (
            b"chunked" not in self.headers.get(b"transfer-encoding", b"").lower())
        if exc is None and eof_delimited:
            self.waiter.set_result(None)
        elif exc is not None:
            self._fail(httpx.ReadError(f"{type(exc).__name__}: {exc}"))
        else:
            self._fail(httpx.RemoteProtocolError("the engine closed the connection before a complete response"))

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.lower()] = value

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        self.headers_done = True

    def on_body(self, body: bytes) -> None:
        if not self.oversize:
            self.body += body
            self.oversize = len(self.body) > self.limit

    def on_message_complete(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def _fail(self, exc: Exception) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(exc)
        self.close()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class EngineHTTP:
    """`await request(method, url, content, headers)` → (status, lower-cased headers, body)."""

    def __init__(self, size: int, *, connect_timeout: float, max_body_bytes: int,
                 keepalive_expiry: float = 30.0) -> None:
        self.size = size
        self.connect_timeout = connect_timeout
        self.max_body_bytes = max_body_bytes
        self.keepalive_expiry = keepalive_expiry
        self._idle: dict[Target, list[_Connection]] = {}
        self._targets: dict[str, tuple[Target, bytes]] = {}
        self._tls: ssl.SSLContext | None = None

    def _target(self, url: str) -> tuple[Target, bytes]:
        found = self._targets.get(url)
        if found is None:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise httpx.UnsupportedProtocol(f"not an http(s) URL: {url!r}")
            tls = parts.scheme == "https"
            port = parts.port or (443 if tls else 80)
            path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            host = parts.hostname
            found = ((host, port, tls), f"{path} HTTP/1.1\r\nHost: {parts.netloc}\r\n".encode("ascii"))
            if len(self._targets) < 1024:
                self._targets[url] = found
        return found

    async def _connect(self, host: str, port: int, tls: bool) -> _Connection:
        loop = asyncio.get_running_loop()
        if tls and self._tls is None:
            self._tls = ssl.create_default_context()
        try:
            async with asyncio.timeout(self.connect_timeout):
                _, conn = await loop.create_connection(lambda: _Connection(self.max_body_bytes), host, port,
                                                       ssl=self._tls if tls else None)
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(f"connect to {host}:{port} took over {self.connect_timeout:g}s") from exc
        except OSError as exc:
            raise httpx.ConnectError(f"{type(exc).__name__}: {exc}") from exc
        return conn

    def _take(self, key: Target) -> _Connection | None:
        idle = self._idle.get(key)
        now = time.monotonic()
        while idle:
            conn = idle.pop()
            if not conn.closed and now - conn.idle_since < self.keepalive_expiry:
                return conn
            conn.close()
        return None

    async def request(self, method: str, url: str, content: bytes | None,
                      headers: dict[str, str]) -> tuple[int, dict[bytes, bytes], bytes]:
        key, line = self._target(url)
        head = method.encode("ascii") + b" " + line + _header_block(headers, content)
        host, port, tls = key
        conn = self._take(key) or await self._connect(host, port, tls)
        waiter = asyncio.get_running_loop().create_future()
        conn.begin(waiter)
        clean = False
        try:
            assert conn.transport is not None
            conn.transport.write(head + content if content else head)
            await waiter
            clean = not conn.oversize
            status, response_headers, body = conn.status, conn.headers, bytes(conn.body)
        finally:
            conn.waiter = None
            idle = self._idle.setdefault(key, [])
            if clean and not conn.closed and conn.parser.should_keep_alive() and len(idle) < self.size:
                conn.idle_since = time.monotonic()
                idle.append(conn)
            else:
                conn.close()
        if conn.oversize:
            raise BodyTooLarge(f"{method} {url}: the body exceeds {self.max_body_bytes:,} bytes", status_code=502)
        encoding = response_headers.get(b"content-encoding", b"").strip().lower()
        if encoding in _DECODERS:
            body = self._decode(method, url, body, encoding)
        return status, response_headers, body

    def _decode(self, method: str, url: str, body: bytes, encoding: bytes) -> bytes:
        try:
            decoder = zlib.decompressobj(_DECODERS[encoding])
            out = decoder.decompress(body, self.max_body_bytes + 1)
        except zlib.error:
            if encoding != b"deflate":
                raise httpx.DecodingError(f"the {encoding.decode()} body cannot be decoded") from None
            try:  # raw deflate, as httpx accepts too
                decoder = zlib.decompressobj(-zlib.MAX_WBITS)
                out = decoder.decompress(body, self.max_body_bytes + 1)
            except zlib.error as exc:
                raise httpx.DecodingError(f"the deflate body cannot be decoded: {exc}") from None
        if len(out) > self.max_body_bytes:
            raise BodyTooLarge(f"{method} {url}: the body exceeds {self.max_body_bytes:,} bytes", status_code=502)
        return out

    async def aclose(self) -> None:
        for conns in self._idle.values():
            for conn in conns:
                conn.close()
        self._idle.clear()


def _header_block(headers: dict[str, str], content: bytes | None) -> bytes:
    lines = [f"{name}: {value}\r\n" for name, value in headers.items()]
    if any(_ILLEGAL.search(line[:-2]) for line in lines):
        raise httpx.LocalProtocolError("a request header holds a control character")
    if content is not None:
        lines.append(f"Content-Length: {len(content)}\r\nContent-Type: application/json\r\n")
    lines.append("Accept-Encoding: gzip, deflate\r\n\r\n")
    try:
        return "".join(lines).encode("latin-1")
    except UnicodeEncodeError as exc:
        raise httpx.LocalProtocolError(f"a request header is not latin-1: {exc}") from None


def engine_result(method: str, url: str, status: int, retry_after: str | None, body: bytes, limit: int) -> Any:
    if status >= 300:
        text = body[:500].decode("utf-8", "replace")
        message = f"{method} {url}: HTTP {status}: {text}"
        if status == 429:
            raise EngineBusyError(message, retry_after=_parse_retry_after(retry_after))
        raise EngineStatusError(message, status_code=status)
    if not body:
        return None
    try:
        return loads(body, what="the body", limit=limit)
    except JSONBodyError as exc:
        raise EngineError(f"{method} {url}: {exc}", status_code=502) from exc


def _parse_retry_after(value: str | None) -> float | None:
    """`Retry-After` in seconds (the HTTP-date form is not used by SGLang or its router)."""
    try:
        seconds = float(value) if value is not None else math.nan
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None
