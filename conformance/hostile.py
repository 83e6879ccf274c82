"""A hostile fake SGLang on a real loopback socket: it chooses, per request, exactly which bytes
to write (or not to write), so the fault suite can play what respx cannot: resets, truncated
and trickling bodies, bad gzip, redirects, duplicate keys, NaN literals, 100k-deep nesting.

`HostileEngine` is an async context manager around `asyncio.start_server` (port 0). Its
`behaviour` answers every `POST /generate` (count them with `generate_calls`); other paths get
a small JSON 200. A behaviour is an async function `(writer, body) -> None` that writes a raw
HTTP/1.1 response; build them with `respond(...)`, `trickle(...)`, `reset()`, `silence()`.
Each connection serves one request and is closed (`Connection: close`).
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from conformance.sglang_outputs import sglang_output

Behaviour = Callable[[asyncio.StreamWriter, dict[str, Any]], Awaitable[None]]
IDS = [40, 1080, 151645]
LOGPROBS = [-0.25, -0.5, -0.01]


def _head(status: int, headers: dict[str, str], length: int | None) -> bytes:
    lines = [f"HTTP/1.1 {status} X", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def respond(status: int = 200, body: bytes | Any = None, *, headers: dict[str, str] | None = None,
            length: int | None = None, gzipped: bool = False) -> Behaviour:
    """Write one response. `body` bytes are sent as they are (anything else as JSON); `length`
    overrides Content-Length (a larger one truncates the body); `gzipped` compresses it."""
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    headers = {"Content-Type": "application/json", **(headers or {})}
    if gzipped:
        raw, headers = gzip.compress(raw), {**headers, "Content-Encoding": "gzip"}

    async def write(writer: asyncio.StreamWriter, _: dict[str, Any]) -> None:
        writer.write(_head(status, headers, len(raw) if length is None else length) + raw)
        await writer.drain()

    return write


def output(**changes: Any) -> dict[str, Any]:
    """A well-formed SGLang output with `meta_info` keys replaced (None deletes the key)."""
    out = sglang_output(IDS, LOGPROBS)
    for key, value in changes.items():
        if value is None:
            out["meta_info"].pop(key, None)
        else:
            out["meta_info"][key] = value
    return out


def ok() -> Behaviour:
    return respond(200, output())


def trickle(interval: float) -> Behaviour:
    """A 200 whose body arrives one byte every `interval` seconds."""
    raw = orjson.dumps(output())

    async def write(writer: asyncio.StreamWriter, _: dict[str, Any]) -> None:
        writer.write(_head(200, {"Content-Type": "application/json"}, len(raw)))
        for byte in raw:
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(interval)

    return write


def reset() -> Behaviour:
    """Read the request, then close the connection without a word."""

    async def write(writer: asyncio.StreamWriter, _: dict[str, Any]) -> None:
        transport = writer.transport
        with contextlib.suppress(Exception):
            transport.abort()  # RST where the platform sends one

    return write


def silence() -> Behaviour:
    """Never answer."""

    async def write(writer: asyncio.StreamWriter, _: dict[str, Any]) -> None:
        await asyncio.sleep(3600)

    return write


@dataclass
class HostileEngine:
    behaviour: Behaviour = field(default_factory=ok)
    generate_calls: int = 0
    url: str = ""
    _server: asyncio.Server | None = None
    _handlers: set[asyncio.Task[Any]] = field(default_factory=set)

    async def __aenter__(self) -> HostileEngine:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), timeout=2)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            request_line, *header_lines = head.decode("latin-1").split("\r\n")
            headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines if h)}
            raw = await reader.readexactly(int(headers.get("content-length", "0")))
            method, path = request_line.split()[:2]
            if method == "POST" and path == "/generate":
                self.generate_calls += 1
                await self.behaviour(writer, orjson.loads(raw) if raw else {})
            else:
                await respond(200, {})(writer, {})
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._handlers.discard(task)
            with contextlib.suppress(Exception):
                writer.close()
