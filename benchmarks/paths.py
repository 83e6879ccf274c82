"""The call paths the overhead benchmark times, each one model turn ending with its reply parsed.

  floor          the SGLang payload handed to the adapter's own engine transport
                 (`EngineTransport`, aiohttp underneath), reply parsed by orjson: the same request
                 on the same transport with no bridge. Every goal is stated against it.
  miles          the same payload POSTed with `httpx.AsyncClient` on httpx's default transport:
                 what Miles' own rollout pays per `/generate` (`miles.utils.http_utils.post`), the
                 peer row
  handler        `handle_generate(state, body)`: the bridge alone, no door
  gen-A door     generation A's real door: `DirectBridgeClient.post` called exactly as
                 `renderers.client.generate` calls its client, then Renderers' own response
                 parsing (`parse_generate_response`, the completion logprobs)
  gen-B          generation B's real path: the client Verifiers 0.4.0's TrainClient builds
                 (`generation_b_client`) POSTing to the bridge served by uvicorn inside this
                 same event loop (`adapter.bridge.serve.served`, as `adapter.episodes.generations.b`
                 serves it), then Renderers' parsing
  serve-bridge   the same client and parsing against `vf-sglang serve-bridge` in its own process
                 (its own core: what an operator running the bridge apart pays)
  gen-B client   that client straight to the engine's `/generate`: what Verifiers' own client
                 costs on any served endpoint, bridge or not (the part of gen-B the adapter does
                 not choose: verifiers 0.3.x/0.4.0 build it themselves, docs/performance.md)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
from openai import AsyncOpenAI

from adapter.bridge.direct import DirectBridgeClient
from adapter.bridge.handler import BridgeState, handle_generate
from adapter.engine.transport import EngineTransport
from benchmarks.common import body

Path = Callable[[list[int]], Awaitable[Any]]
SESSION = {"X-Session-ID": "bench"}
JSON = {"content-type": "application/json"}


def sglang_body(tokens: list[int], max_new_tokens: int = 16) -> dict[str, Any]:
    """The SGLang `/generate` body the bridge sends for `benchmarks.common.body(tokens)`."""
    return {"input_ids": tokens, "return_logprob": True, "sampling_params": {
        "max_new_tokens": max_new_tokens, "temperature": 0.0, "stop_token_ids": [151645],
        "skip_special_tokens": False, "no_stop_trim": True, "n": 1}}


def sglang_payload(tokens: list[int]) -> bytes:
    return orjson.dumps(sglang_body(tokens))


def generation_b_client(base_url: str) -> AsyncOpenAI:
    """The client verifiers 0.4.0's TrainClient builds for itself (`v1/clients/base.py`
    `build_async_openai` / `build_async_httpx`, lines 24–37 of the wheel): `AsyncOpenAI` with
    `max_retries=0` on an `httpx.AsyncClient` with its default transport, connect timeout 30 s,
    no read timeout, 1,000 connections / 100 keep-alive."""
    http = httpx.AsyncClient(timeout=httpx.Timeout(None, connect=30.0), trust_env=False,
                             limits=httpx.Limits(max_connections=1000, max_keepalive_connections=100))
    return AsyncOpenAI(base_url=f"{base_url}/v1", api_key="EMPTY", max_retries=0, http_client=http)


def renderers_parse(content: bytes) -> list[int]:
    """What `renderers.client.generate` does with the bridge's reply bytes; the sampled ids."""
    from renderers.client import _parse_completion_logprobs, parse_generate_response

    choice = parse_generate_response(content)["choices"][0]
    ids: list[int] = choice.get("token_ids") or []
    _parse_completion_logprobs(choice, ids)
    return ids


async def renderers_post(client: Any, tokens: list[int], sampling: dict[str, Any] | None = None) -> list[int]:
    """One turn as `renderers.client.generate` sends it: `client.post(<root>/inference/v1/generate,
    cast_to=httpx.Response, body=..., options={"headers": X-Session-ID})`, reply parsed as
    Renderers parses it; the sampled ids. `sampling` replaces `benchmarks.common.body`'s."""
    root = str(client.base_url).rstrip("/").removesuffix("/v1")
    request = body(tokens) if sampling is None else {"model": "m", "token_ids": tokens, "sampling_params": sampling}
    response = await client.post(f"{root}/inference/v1/generate", cast_to=httpx.Response, body=request,
                                 options={"headers": SESSION})
    return renderers_parse(response.content)


@dataclass
class Ends:
    """What the paths talk to: the engine, the two served bridges, and the clients to them."""

    engine_url: str
    state: BridgeState  # the in-process bridge (handler, gen-A door; gen-B serves an app on it)
    in_loop: AsyncOpenAI  # generation B's client → the bridge served in this loop
    process: AsyncOpenAI  # generation B's client → the serve-bridge process
    direct: AsyncOpenAI  # generation B's client → the engine itself
    miles: httpx.AsyncClient
    transport: EngineTransport


def make_paths(ends: Ends) -> dict[str, Path]:
    door = DirectBridgeClient(ends.state, base_url="http://in-process/v1")
    generate = f"{ends.engine_url}/generate"

    async def floor(tokens: list[int]) -> Any:
        request = httpx.Request("POST", generate, content=sglang_payload(tokens), headers=JSON)
        response = await ends.transport.handle_async_request(request)
        return orjson.loads(await response.aread())

    async def miles(tokens: list[int]) -> Any:
        response = await ends.miles.post(generate, content=sglang_payload(tokens), headers=JSON)
        return orjson.loads(response.content)

    async def handler(tokens: list[int]) -> Any:
        reply = await handle_generate(ends.state, body(tokens), "bench")
        assert reply.ok, reply.body
        return orjson.loads(reply.body)

    async def gen_b_client(tokens: list[int]) -> Any:
        response = await ends.direct.post(generate, cast_to=httpx.Response, body=sglang_body(tokens))
        return orjson.loads(response.content)

    return {
        "floor": floor, "miles": miles, "handler": handler,
        "gen-A door": lambda tokens: renderers_post(door, tokens),
        "gen-B": lambda tokens: renderers_post(ends.in_loop, tokens),
        "serve-bridge": lambda tokens: renderers_post(ends.process, tokens),
        "gen-B client": gen_b_client,
    }
