"""A scripted SGLang engine for tests: one pure handler that plays SGLang's HTTP API.

`ScriptedEngine.handle(request)` routes by path like a real server: `POST /generate` answers
the next scripted step in SGLang's exact output shape (`conformance.sglang_outputs`);
`GET /health`, `GET /model_info` (and `/get_model_info`), `POST /flush_cache`,
`POST /abort_request` answer as SGLang does. With `workers` set it also plays the SGLang router:
`GET /workers` lists them (a plain SGLang server answers 404 there), and with `route` each
`/generate` answer names the worker `route(request)` picked in `x-smg-routed-worker-id`, as smg
does (`by_key`, `round_robin`). Every request is recorded (path, JSON body, headers) for
assertions and snapshots. A step is a `Completion`, a function of the request
body returning one, or a `Fault` (an error status, a timeout, a reset, a malformed body).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from adapter.engine.topology import ROUTED_WORKER_HEADER
from conformance.sglang_outputs import sglang_output


@dataclass(frozen=True)
class Completion:
    ids: list[int]
    logprobs: list[float]
    finish: str = "stop"  # stop | length | abort | any other string (an unknown reason)


@dataclass(frozen=True)
class Fault:
    status: int | None = None  # answer this HTTP status with `body`
    body: Any = None  # a JSON body (or raw bytes) instead of a well-formed output
    timeout: bool = False  # raise httpx.ReadTimeout
    reset: bool = False  # raise httpx.ConnectError


Step = Completion | Fault | Callable[[dict[str, Any]], "Completion | Fault"]


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    body: Any
    headers: dict[str, str]


@dataclass
class ScriptedEngine:
    url: str = "http://sglang.test:30000"
    steps: list[Step] = field(default_factory=list)
    requests: list[Recorded] = field(default_factory=list)
    model_path: str = "Qwen/Qwen3-0.6B"
    default: Step | None = None  # answers /generate once the script is used up (None: HTTP 500)
    workers: list[str] | None = None  # a router's workers, listed on /workers (None: not a router)
    route: Callable[[Recorded], str] | None = None  # plays a router: the worker a /generate went to
    server_info: dict[str, Any] | None = None  # answered on /server_info (and the older name); None: 404

    def script(self, *steps: Step) -> ScriptedEngine:
        self.steps.extend(steps)
        return self

    def generate_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.path == "/generate"]

    def _record(self, request: httpx.Request) -> Recorded:
        body = json.loads(request.content) if request.content else None
        keep = {k.lower(): v for k, v in request.headers.items() if k.lower().startswith("x-")}
        recorded = Recorded(request.method, request.url.path, body, keep)
        self.requests.append(recorded)
        return recorded

    def _generate(self, body: dict[str, Any]) -> httpx.Response:
        if not self.steps and self.default is None:
            return httpx.Response(500, json={"error": "scripted engine: no step left for /generate"})
        step = self.steps.pop(0) if self.steps else self.default
        if callable(step) and not isinstance(step, (Completion, Fault)):
            step = step(body)
        if isinstance(step, Fault):
            if step.timeout:
                raise httpx.ReadTimeout("scripted read timeout")
            if step.reset:
                raise httpx.ConnectError("scripted connection reset")
            if isinstance(step.body, bytes):
                return httpx.Response(step.status or 200, content=step.body)
            return httpx.Response(step.status or 200, json=step.body)
        output = sglang_output(step.ids, step.logprobs, finish=step.finish,
                               request_id=f"sglang-{len(self.requests)}",
                               prompt_tokens=len(body.get("input_ids", [])),
                               top_logprobs_num=body.get("top_logprobs_num"))
        return httpx.Response(200, json=output)

    def handle(self, request: httpx.Request) -> httpx.Response:
        recorded = self._record(request)
        if recorded.path == "/generate" and request.method == "POST":
            response = self._generate(recorded.body or {})
            if self.route is not None:
                response.headers[ROUTED_WORKER_HEADER] = self.route(recorded)
            return response
        model_info = {"model_path": self.model_path, "is_generation": True}
        routes: dict[tuple[str, str], Any] = {
            ("GET", "/health"): {},
            ("GET", "/model_info"): model_info,
            ("GET", "/get_model_info"): model_info,  # SGLang's older name, still served
            ("POST", "/flush_cache"): {},
            ("POST", "/abort_request"): {},
        }
        if self.server_info is not None:
            routes[("GET", "/server_info")] = routes[("GET", "/get_server_info")] = self.server_info
        if self.workers is not None:
            routes[("GET", "/workers")] = {"workers": [{"url": url} for url in self.workers]}
        if (request.method, recorded.path) in routes:
            return httpx.Response(200, json=routes[(request.method, recorded.path)])
        return httpx.Response(404, json={"detail": "Not Found"})


async def _asgi_handle(engine: ScriptedEngine, request: Any) -> Any:
    from starlette.responses import Response

    outgoing = httpx.Request(request.method, str(request.url), headers=request.headers.raw,
                             content=await request.body())
    try:
        answer = engine.handle(outgoing)
    except httpx.TimeoutException:
        await asyncio.sleep(3600)  # over real HTTP a scripted timeout is a server that never answers
        raise
    except httpx.TransportError:
        return Response(status_code=503, content=b"scripted connection reset")
    extra = {k: v for k, v in answer.headers.items() if k.lower().startswith("x-")}
    return Response(content=answer.content, status_code=answer.status_code, headers=extra,
                    media_type=answer.headers.get("content-type"))


def asgi_app(engine: ScriptedEngine) -> Any:
    """The scripted engine as an ASGI app, to serve on a real port (`adapter.bridge.serve.served`)."""
    from starlette.applications import Starlette
    from starlette.routing import Route

    async def endpoint(request: Any) -> Any:
        return await _asgi_handle(engine, request)

    return Starlette(routes=[Route("/{path:path}", endpoint, methods=["GET", "POST"])])


def by_key(workers: list[str]) -> Callable[[Recorded], str]:
    """A scripted router that routes by `X-SMG-Routing-Key`, as consistent_hashing does: one key,
    one worker (no key: the first)."""
    import zlib

    def route(request: Recorded) -> str:
        key = request.headers.get("x-smg-routing-key", "")
        return workers[zlib.crc32(key.encode()) % len(workers)] if key else workers[0]

    return route


def round_robin(workers: list[str]) -> Callable[[Recorded], str]:
    """A scripted router that ignores the key and takes the workers in turn."""
    turns = iter(range(1 << 62))
    return lambda request: workers[next(turns) % len(workers)]
