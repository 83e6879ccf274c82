"""The slot transport: at most `size` connections, each kept alive and reused, a slot returned
when its response closes or its request fails."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from adapter.slots import SlotTransport
from benchmarks.stub import Stub


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
    transport = SlotTransport(3)
    async with httpx.AsyncClient(transport=transport) as client:
        for _ in range(3):  # three waves of 3 concurrent requests
            responses = await asyncio.gather(*(client.post(f"{url}/generate", content=b"{}") for _ in range(3)))
            assert [r.status_code for r in responses] == [200] * 3
        single = [await client.post(f"{url}/generate", content=b"{}") for _ in range(4)]
    assert all(r.status_code == 200 for r in single)
    assert stub.generate == 13 and len(connections) == 3 == len(transport._all)


async def test_a_failed_request_gives_its_slot_back() -> None:
    transport = SlotTransport(1)
    async with httpx.AsyncClient(transport=transport) as client:
        for _ in range(3):
            with pytest.raises(httpx.ConnectError):
                await client.get("http://127.0.0.1:9/")  # nothing listens on the discard port
    assert transport._free.qsize() == 1 and len(transport._all) == 1
