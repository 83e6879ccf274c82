"""Cassettes: every SGLang exchange of a run, recorded as JSONL, for replay without an engine.

Consumes: the HTTP transport the `SGLangClient` builds (wrapped through its `wrap_transport`
hook) and, once per engine address, that engine's `/model_info` and `/server_info` (or their
older names, `adapter.engine.probe.MODEL_INFO_PATHS`).
Emits one file per run, `DIR/<UTC time>-<pid>.jsonl`:

    {"kind": "header", "format": 1, "recorded_at", "command", "engine_url",
     "sglang_version": server_info.version | null, "model": model_info.model_path | null,
     "model_digest": sha256 of the model's weights when `model` is a local directory | null,
     "model_info": {...} | null, "server_info": {...} | null}
    {"kind": "exchange", "started_at", "elapsed_s",
     "request": {"method", "path", "headers": {x-* headers}, "body": JSON | text | null},
     "response": {"status", "headers": {x-* headers}, "body": JSON | text | null},
     "adapter": {"token_ids", "logprobs", "finish_reason"} | {"error": <adapter error type>}}

`adapter` is the adapter's own reading of a `/generate` answer (`wire.translate.to_renderers_response`)
at record time; replaying (the test layer's cassette replay) reads the recorded response again and must
get the same reading, so a changed reading or an edited response fails. Only `x-*` headers are
kept: the routing key asked for, and the worker a router named (`x-smg-routed-worker-id`);
nothing else of the environment is written.

`model_digest` says which weights answered: a model trained locally from a seeded recipe (the
tiny model) gets different weights on CPUs with different numerics, so a replay that compares
numbers (not shapes) needs it.

A recorder is passed, never installed: a command given `--record DIR` makes one (`recorder_for`)
and hands it to its engine session (`adapter.engine.session.EngineSession(recorder=...)`) or
client (`SGLangClient(wrap_transport=recorder.wrap)`); nothing in the process records otherwise.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from adapter.engine.probe import MODEL_INFO_PATHS, SERVER_INFO_PATHS, first_served
from adapter.errors import VfSglangError

FORMAT = 1
WEIGHT_FILES = ("model.safetensors",)  # a single-file checkpoint (the tiny model); sharded ones: None


def weights_digest(model_path: str | None) -> str | None:
    """sha256 of a local single-file checkpoint's weights, else None (a hub id, a sharded model)."""
    if not model_path:
        return None
    for name in WEIGHT_FILES:
        path = Path(model_path) / name
        if path.is_file():
            digest = hashlib.sha256()
            with path.open("rb") as weights:
                for block in iter(lambda: weights.read(1 << 20), b""):
                    digest.update(block)
            return digest.hexdigest()
    return None


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


def decode_body(content: bytes) -> Any:
    if not content:
        return None
    try:
        return json.loads(content)
    except (ValueError, RecursionError):  # not JSON, or nested past the stack: kept as text
        return content.decode("utf-8", errors="replace")


def adapter_reading(path: str, status: int, body: Any) -> dict[str, Any] | None:
    """What the adapter makes of one `/generate` answer (None for other paths and errors)."""
    from adapter.wire.translate import to_renderers_response

    if path != "/generate" or status >= 400:
        return None
    try:
        choice = to_renderers_response(body)["choices"][0]
    except VfSglangError as exc:
        return {"error": type(exc).__name__}
    return {"token_ids": choice["token_ids"], "finish_reason": choice["finish_reason"],
            "logprobs": [item["logprob"] for item in choice["logprobs"]["content"]]}


def _x_headers(headers: httpx.Headers) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items() if k.lower().startswith("x-")}


class CassetteRecorder:
    """Writes one cassette; `wrap` is the `SGLangClient(wrap_transport=...)` hook."""

    def __init__(self, directory: str | Path, *, command: str | None = None) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")
        self.path = self.directory / f"{stamp}-{os.getpid()}.jsonl"
        self.command = command if command is not None else " ".join(["vf-sglang", *sys.argv[1:]])
        self._headers_written: set[str] = set()
        self._lock = asyncio.Lock()

    def wrap(self, transport: httpx.AsyncBaseTransport) -> httpx.AsyncBaseTransport:
        return RecordingTransport(transport, self)

    def _write(self, line: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(line, separators=(",", ":")) + "\n")

    async def _info(self, inner: httpx.AsyncBaseTransport, origin: str, paths: tuple[str, ...]) -> Any:
        async def fetch(path: str) -> tuple[int, bytes]:
            response = await inner.handle_async_request(httpx.Request("GET", origin + path))
            return response.status_code, await response.aread()

        try:
            _, (status, content) = await first_served(paths, fetch, lambda answer: answer[0] == 404)
        except httpx.HTTPError:
            return None
        body = decode_body(content)
        return body if status == 200 and isinstance(body, dict) else None

    async def header_once(self, inner: httpx.AsyncBaseTransport, origin: str) -> None:
        async with self._lock:
            if origin in self._headers_written:
                return
            self._headers_written.add(origin)
            model_info = await self._info(inner, origin, MODEL_INFO_PATHS)
            server_info = await self._info(inner, origin, SERVER_INFO_PATHS)
            # once per engine, off the event loop: a real checkpoint's weights are gigabytes
            digest = await asyncio.to_thread(weights_digest, (model_info or {}).get("model_path"))
            self._write({
                "kind": "header", "format": FORMAT, "recorded_at": _now(), "command": self.command,
                "engine_url": origin, "sglang_version": (server_info or {}).get("version"),
                "model": (model_info or {}).get("model_path"),
                "model_digest": digest,
                "model_info": model_info, "server_info": server_info,
            })  # fmt: skip

    def exchange(self, request: httpx.Request, response: httpx.Response, started: str, elapsed: float) -> None:
        path, status = request.url.path, response.status_code
        body = decode_body(response.content)
        self._write({
            "kind": "exchange", "started_at": started, "elapsed_s": round(elapsed, 6),
            "request": {"method": request.method, "path": path, "body": decode_body(request.content),
                        "headers": _x_headers(request.headers)},
            "response": {"status": status, "headers": _x_headers(response.headers), "body": body},
            "adapter": adapter_reading(path, status, body),
        })  # fmt: skip


class RecordingTransport(httpx.AsyncBaseTransport):
    """Passes every request to `inner` and records it; the body is read once and handed on."""

    def __init__(self, inner: httpx.AsyncBaseTransport, recorder: CassetteRecorder) -> None:
        self.inner = inner
        self.recorder = recorder

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        origin = f"{request.url.scheme}://{request.url.netloc.decode()}"
        await self.recorder.header_once(self.inner, origin)
        started, clock = _now(), time.perf_counter()
        response = await self.inner.handle_async_request(request)
        raw = b"".join([chunk async for chunk in response.aiter_raw()])
        await response.aclose()
        replayed = httpx.Response(response.status_code, headers=response.headers, content=raw,
                                  extensions=response.extensions)
        decoded = httpx.Response(response.status_code, headers=response.headers, content=raw)
        self.recorder.exchange(request, decoded, started, time.perf_counter() - clock)
        return replayed

    async def aclose(self) -> None:
        await self.inner.aclose()


def record_option(parser: Any) -> None:
    """`--record DIR` for a subcommand."""
    parser.add_argument(
        "--record", metavar="DIR", default=None,
        help="write every SGLang exchange as a cassette (JSONL) under DIR, to replay without an engine")


def recorder_for(args: Any) -> CassetteRecorder | None:
    """The recorder a command given `--record DIR` passes to its engine client(s); None without it."""
    directory = getattr(args, "record", None)
    if not directory:
        return None
    recorder = CassetteRecorder(directory)
    print(f"recording SGLang exchanges to {recorder.path}", file=sys.stderr)
    return recorder


Wrap = Callable[[httpx.AsyncBaseTransport], httpx.AsyncBaseTransport]


def wrap_of(recorder: CassetteRecorder | None) -> Wrap | None:
    """`SGLangClient(wrap_transport=...)` for `recorder` (None: no recording)."""
    return None if recorder is None else recorder.wrap
