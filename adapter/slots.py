"""An httpx transport of `size` single-connection slots, handed out in O(1).

Why not one httpx pool of `size` connections: httpcore assigns each request by scanning every
connection for every queued request (`AsyncConnectionPool._assign_requests_to_connections`),
so at Miles' 512 in flight the bridge spent most of its CPU in `is_idle` (46 M calls for
1,024 requests; wall 21 s for 512 × 10 s generations). Here each slot is its own
`httpx.AsyncHTTPTransport` limited to one keep-alive connection; a request takes a free slot
from a LIFO stack (recently used connections stay warm), and gives it back when its response
is closed (or when sending fails). Slots are built on first use, up to `size`, sharing one TLS
context. Callers bound concurrency themselves (`SGLangClient`'s semaphore of the same size), so
a request never waits here; if one does, it waits its turn in order.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Callable

import httpx


class _ReleasingStream(httpx.AsyncByteStream):
    """The slot's response body; closing it returns the slot (exactly once)."""

    def __init__(self, inner: httpx.AsyncByteStream, release: Callable[[], None]) -> None:
        self._inner = inner
        self._release: Callable[[], None] | None = release

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            yield chunk

    async def aclose(self) -> None:
        try:
            await self._inner.aclose()
        finally:
            release, self._release = self._release, None
            if release is not None:
                release()


class SlotTransport(httpx.AsyncBaseTransport):
    def __init__(self, size: int, *, keepalive_expiry: float = 30.0) -> None:
        self.size = size
        self._keepalive = keepalive_expiry
        self._tls = ssl.create_default_context()
        self._all: list[httpx.AsyncHTTPTransport] = []
        self._free: asyncio.LifoQueue[httpx.AsyncHTTPTransport] = asyncio.LifoQueue()

    def _build(self) -> httpx.AsyncHTTPTransport:
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1, keepalive_expiry=self._keepalive)
        slot = httpx.AsyncHTTPTransport(verify=self._tls, trust_env=False, limits=limits)
        self._all.append(slot)
        return slot

    async def _take(self) -> httpx.AsyncHTTPTransport:
        if not self._free.empty():
            return self._free.get_nowait()
        if len(self._all) < self.size:
            return self._build()
        return await self._free.get()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        slot = await self._take()
        try:
            response = await slot.handle_async_request(request)
        except BaseException:
            self._free.put_nowait(slot)
            raise
        assert isinstance(response.stream, httpx.AsyncByteStream)
        response.stream = _ReleasingStream(response.stream, lambda: self._free.put_nowait(slot))
        return response

    async def aclose(self) -> None:
        for slot in self._all:
            await slot.aclose()
