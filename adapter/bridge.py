"""The bridge: an ASGI app serving Renderers' token-in/token-out API on top of SGLang.

    POST /inference/v1/generate   Renderers body → `wire` → SGLang `/generate` → `wire` → response
    GET  /v1/models               `{"data": [{"id", "max_model_len"}]}` when the context length
                                  is known, so Renderers' own pre-flight check refuses overlong
                                  prompts before any engine call; `{"data": []}` otherwise
    GET  /health                  200 when the app is up (it does not probe the engine)

Errors become statuses Verifiers understands. Every error body is
`{"error": {"type", "message"}}`; `type` is machine-readable, so clients branch on it:
  * `configuration_error` → 400 (unsupported request or setting; never retried);
  * `overlong_prompt` → 400, worded so Verifiers' TrainClient ends the rollout as a clean
    context-length truncation (its overlong-prompt mapping);
  * `engine_error` → the engine's own 4xx, or 502 (5xx / malformed output), 503 (unreachable
    or aborted), 504 (timed out), with the engine's message.
In-process the app sits behind `httpx.ASGITransport`; `serve` puts it on a loopback port.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from adapter.engine_stats import SessionStats
from adapter.errors import (
    ConfigurationError,
    EngineAbortedError,
    EngineError,
    EngineStatusError,
    EngineTimeoutError,
    EngineUnavailableError,
    WireFormatError,
)
from adapter.sessions import SessionLRU
from adapter.settings import Settings
from adapter.sglang import SGLangClient
from adapter.wire import SESSION_ID_HEADER, overlong_error_class, to_renderers_response, to_sglang_request

logger = logging.getLogger(__name__)

CONFIGURATION_ERROR = "configuration_error"
OVERLONG_PROMPT = "overlong_prompt"
ENGINE_ERROR = "engine_error"


@dataclass
class BridgeState:
    settings: Settings
    engine: SGLangClient
    model: str | None
    sessions: SessionLRU
    # The last typed configuration error this bridge answered (400 `configuration_error`), or
    # one a client in front of it refused with (generation A's TrainClient). The orchestrator
    # re-raises this object as soon as a group finishes: the type travels, never its name.
    refusal: ConfigurationError | None = None
    stats: SessionStats = field(default_factory=SessionStats)  # per-session meta_info (adapter.engine_stats)


def _error(status: int, kind: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"type": kind, "message": message, "code": status}}, status_code=status)


def engine_status(exc: EngineError) -> int:
    """The HTTP status the bridge answers for an engine failure."""
    if isinstance(exc, EngineStatusError) and exc.status_code is not None and 400 <= exc.status_code < 500:
        return exc.status_code
    if isinstance(exc, EngineTimeoutError):
        return 504
    if isinstance(exc, EngineUnavailableError):
        return 503
    return 502


async def _generate(state: BridgeState, body: Any, session_id: str | None) -> JSONResponse:
    if not isinstance(body, dict):
        raise ConfigurationError("the generate body must be a JSON object")
    request = to_sglang_request(
        body,
        settings=state.settings,
        session_id=session_id,
        first_turn=state.sessions.is_first_turn(session_id),
    )
    state.sessions.remember(session_id)
    output = await state.engine.generate(request)
    state.stats.record(session_id, output)
    return JSONResponse(to_renderers_response(output))


async def generate(request: Request) -> JSONResponse:
    state: BridgeState = request.app.state.bridge
    session_id = request.headers.get(SESSION_ID_HEADER) or None
    try:
        body = await request.json()
    except ValueError:
        return _error(400, CONFIGURATION_ERROR, "the generate body is not valid JSON")
    try:
        return await _generate(state, body, session_id)
    except overlong_error_class() as exc:
        return _error(400, OVERLONG_PROMPT, str(exc))
    except ConfigurationError as exc:
        state.refusal = exc
        return _error(400, CONFIGURATION_ERROR, str(exc))
    except EngineAbortedError as exc:
        return _error(503, ENGINE_ERROR, str(exc))
    except WireFormatError as exc:
        return _error(502, ENGINE_ERROR, f"malformed engine output: {exc}")
    except EngineError as exc:
        return _error(engine_status(exc), ENGINE_ERROR, str(exc))


async def models(request: Request) -> JSONResponse:
    state: BridgeState = request.app.state.bridge
    context = state.settings.rollout_max_context_len
    if state.model is None or context is None:
        return JSONResponse({"object": "list", "data": []})
    card = {"id": state.model, "object": "model", "owned_by": "sglang", "max_model_len": context}
    return JSONResponse({"object": "list", "data": [card]})


async def health(request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


def create_app(
    settings: Settings, engine: SGLangClient, *, model: str | None = None
) -> Starlette:
    """The bridge for one engine. `model` is the id episodes use (Renderers matches the
    `/v1/models` card by it); `settings.rollout_max_context_len` is the advertised length."""
    overlong_error_class()  # imports verifiers (seconds): pay once here, not on the first request
    app = Starlette(
        routes=[
            Route("/inference/v1/generate", generate, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/health", health, methods=["GET"]),
        ]
    )
    app.state.bridge = BridgeState(
        settings=settings, engine=engine, model=model, sessions=SessionLRU(settings.session_lru_size)
    )
    return app
