"""The bridge: Renderers' token-in/token-out API on top of SGLang, one typed handler, two doors.

    handle_generate(state, body, session_id) -> Reply     the one implementation
    POST /inference/v1/generate   the ASGI route over it (generation B, `serve-bridge`)
    adapter.episodes.generations.a         calls it directly in-process (generation A): no HTTP client
    GET  /v1/models               `{"data": [{"id", "max_model_len"}]}` when the context length
                                  is known, so Renderers' own pre-flight check refuses overlong
                                  prompts before any engine call; `{"data": []}` otherwise
    GET  /health                  200 when the app is up (it does not probe the engine)

Every answer is JSON; every error body is `{"error": {"type", "message", "code"}}`, `type`
machine-readable so clients branch on it:
  * `configuration_error` → 400: the client's fault (a body that is not strict JSON or breaks
    `adapter.wire.types.GenerateBody`, an over-long session id, an unsupported request); never retried;
  * `overlong_prompt` → 400, worded so Verifiers' TrainClient ends the rollout as a clean
    context-length truncation (its overlong-prompt mapping);
  * `engine_error` → the engine's fault: its own 4xx, or 502 (5xx, 3xx, malformed output),
    503 (unreachable), 504 (no complete answer by the deadline); `engine_aborted` → 410 (an engine
    abort: a status no client SDK retries, so an `abort_all` stands);
  * `internal_error` → 500: a bug in the adapter (logged with its traceback), also recorded on
    `BridgeState.internal_error`, which the orchestrator raises at the next group: a bug stops the
    run. The fault suite (the test layer's fault table) proves no fault reaches it.
Engine attempts are budgeted per model turn (`adapter.bridge.sessions.TurnBudgets`): once a turn's
budget is spent, retries from upper layers get the turn's last failure without an engine call.
Behind the SGLang router that budget holds end to end only when the router does not retry too
(smg `--disable-retries`; docs/router.md). A request carrying a sampling key the router would drop
(`adapter.wire.translate.ROUTER_DROPPED_KEYS`) is refused as a `configuration_error` when the
engine address is a router (asked once, `SGLangClient.topology`, and only for such a request).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from adapter.bridge.sessions import SessionLRU, TurnBudgets, check_session_id
from adapter.bridge.stats import SessionStats
from adapter.config.limits import ENGINE_ATTEMPTS_PER_TURN
from adapter.config.settings import Settings
from adapter.engine.client import SGLangClient
from adapter.errors import (
    ConfigurationError,
    EngineAbortedError,
    EngineError,
    EngineStatusError,
    EngineTimeoutError,
    EngineUnavailableError,
    InternalBridgeError,
    JSONBodyError,
    WireFormatError,
)
from adapter.wire.strict_json import dumps, loads
from adapter.wire.translate import (
    SESSION_ID_HEADER,
    SGLangRequest,
    overlong_error_class,
    refuse_router_dropped,
    router_dropped_keys,
    to_renderers_response,
    to_sglang_request,
)

logger = logging.getLogger(__name__)

CONFIGURATION_ERROR = "configuration_error"
OVERLONG_PROMPT = "overlong_prompt"
ENGINE_ERROR = "engine_error"
ENGINE_ABORTED = "engine_aborted"
# An engine abort (`abort_all`, e.g. before a weight update) means stop, not try again: 410 is a
# status no client SDK retries (OpenAI's retries 408/409/429/5xx; a 503 was retried by the
# harness' SDK and the abort undone). The rollout ends in error and becomes ABORTED.
ABORTED_STATUS = 410
INTERNAL_ERROR = "internal_error"
MAX_REQUEST_BYTES = 64 * 1024 * 1024  # a Renderers body: ~8 bytes per prompt token


@dataclass(frozen=True)
class ErrorBody:
    """The bridge's error, typed: what its JSON body says (`{"error": {...}}`), for the
    in-process door to raise without parsing the bytes back."""

    type: str
    message: str
    code: int

    def as_dict(self) -> dict[str, Any]:
        return {"type": self.type, "message": self.message, "code": self.code}


@dataclass(frozen=True)
class Reply:
    """One answer of the bridge: HTTP status and JSON body bytes (and, on failure, the error)."""

    status: int
    body: bytes
    error: ErrorBody | None = None

    @property
    def ok(self) -> bool:
        return self.status == 200


@dataclass
class BridgeState:
    settings: Settings
    engine: SGLangClient
    model: str | None
    sessions: SessionLRU
    budgets: TurnBudgets = field(default_factory=TurnBudgets)
    # The last typed configuration error this bridge answered (400 `configuration_error`), or
    # one a client in front of it refused with (generation A's TrainClient). The orchestrator
    # re-raises this object as soon as a group finishes: the type travels, never its name.
    refusal: ConfigurationError | None = None
    # The first bug in the bridge's own code (an exception no typed answer covers): answered 500,
    # and raised by the orchestrator at the next group, the bug chained as its cause, so a bug
    # stops the run instead of becoming dropped, resampled data.
    internal_error: InternalBridgeError | None = None
    stats: SessionStats = field(default_factory=SessionStats)  # per-session meta_info (adapter.bridge.stats)


    def record_bug(self, exc: BaseException) -> None:
        if self.internal_error is None:
            error = InternalBridgeError(
                f"the bridge's own code failed answering a model call ({type(exc).__name__}: {exc}): a bug in "
                "vf-sglang, not a fault of the engine or the client; the run stops (traceback chained below)")
            error.__cause__ = exc
            self.internal_error = error


def error_reply(status: int, kind: str, message: str) -> Reply:
    error = ErrorBody(kind, message, status)
    return Reply(status, dumps({"error": error.as_dict()}), error)


def engine_status(exc: EngineError) -> int:
    """The HTTP status the bridge answers for an engine failure."""
    if isinstance(exc, EngineStatusError) and exc.status_code is not None and 400 <= exc.status_code < 500:
        return exc.status_code
    if isinstance(exc, EngineTimeoutError):
        return 504
    if isinstance(exc, EngineUnavailableError):
        return 503
    return 502


async def _generate(state: BridgeState, body: bytes | Mapping[str, Any], session_id: str | None) -> Reply:
    session_id = check_session_id(session_id)
    if isinstance(body, (bytes, bytearray)):
        body = loads(bytes(body), what="the generate body", limit=MAX_REQUEST_BYTES)
    request = to_sglang_request(
        body,  # type: ignore[arg-type]  # validated into GenerateBody there (a non-object is refused)
        settings=state.settings,
        session_id=session_id,
        first_turn=state.sessions.is_first_turn(session_id),
    )
    await _refuse_what_the_router_drops(state, request)
    state.sessions.remember(session_id)
    prompt_len = len(request.payload["input_ids"])
    budget = state.budgets.for_turn(session_id, prompt_len)
    output = await state.engine.generate(request, budget=budget)
    reply = Reply(200, dumps(to_renderers_response(output, top_logprobs=request.payload.get("top_logprobs_num"))))
    state.budgets.settle(session_id, prompt_len)
    state.stats.record(session_id, output.meta_info, prompt_len=prompt_len)  # a validated output only
    return reply


async def _refuse_what_the_router_drops(state: BridgeState, request: SGLangRequest) -> None:
    """Keys the router would drop are refused when a router is there (asked only for such a request)."""
    dropped = router_dropped_keys(request)
    if dropped:
        topology = await state.engine.topology()
        if topology.is_router:
            raise refuse_router_dropped(dropped, topology.url)


async def handle_generate(state: BridgeState, body: bytes | Mapping[str, Any], session_id: str | None) -> Reply:
    """The generate handler both entry points call. Never raises: every outcome is a `Reply`."""
    try:
        return await _generate(state, body, session_id)
    except overlong_error_class() as exc:
        return error_reply(400, OVERLONG_PROMPT, str(exc))
    except JSONBodyError as exc:
        return error_reply(400, CONFIGURATION_ERROR, str(exc))
    except ConfigurationError as exc:
        state.refusal = exc
        return error_reply(400, CONFIGURATION_ERROR, str(exc))
    except EngineAbortedError as exc:
        state.stats.record_abort(session_id)  # Miles maps an abort to Sample.Status.ABORTED
        return error_reply(ABORTED_STATUS, ENGINE_ABORTED, str(exc))
    except WireFormatError as exc:
        return error_reply(502, ENGINE_ERROR, f"malformed engine output: {exc}")
    except EngineError as exc:
        return error_reply(engine_status(exc), ENGINE_ERROR, str(exc))
    except Exception as exc:  # the last resort: a bug, never a fault of the client or the engine
        logger.exception("bridge: internal error while handling a generate request")
        state.record_bug(exc)
        return error_reply(500, INTERNAL_ERROR, "internal error in the vf-sglang bridge (see its log)")


def models_payload(state: BridgeState) -> dict[str, Any]:
    context = state.settings.rollout_max_context_len
    if state.model is None or context is None:
        return {"object": "list", "data": []}
    card = {"id": state.model, "object": "model", "owned_by": "sglang", "max_model_len": context}
    return {"object": "list", "data": [card]}


def _json(reply: Reply) -> Response:
    return Response(reply.body, status_code=reply.status, media_type="application/json")


async def _generate_method_not_allowed(request: Request) -> Response:  # pragma: no cover
    raise AssertionError("unreachable: BridgeApp answers POST /inference/v1/generate itself")


async def models(request: Request) -> Response:
    return _json(Reply(200, dumps(models_payload(request.app.state.bridge))))


async def health(request: Request) -> Response:
    return _json(Reply(200, b'{"status":"ok"}'))


async def _internal_error(request: Request, exc: Exception) -> Response:
    logger.error("bridge: internal error on %s %s", request.method, request.url.path, exc_info=exc)
    request.app.state.bridge.record_bug(exc)
    return _json(error_reply(500, INTERNAL_ERROR, "internal error in the vf-sglang bridge (see its log)"))


class BridgeApp:
    """The ASGI app. `POST /inference/v1/generate` is answered on the raw ASGI interface (read
    the body, `handle_generate`, two sends): no routing, request or response objects per call.
    Everything else goes to a small Starlette app (`/v1/models`, `/health`, 404/405, and the
    last-resort 500 handler). `state.bridge` is the `BridgeState`."""

    def __init__(self, routes: Starlette) -> None:
        self.routes = routes
        self.state = routes.state

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"] == GENERATE_PATH:
            await self._generate(scope, receive, send)
        else:
            await self.routes(scope, receive, send)

    async def _generate(self, scope: Any, receive: Any, send: Any) -> None:
        body, more = bytearray(), True
        reply: Reply | None = None
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > MAX_REQUEST_BYTES:
                reply = error_reply(413, CONFIGURATION_ERROR, f"the generate body exceeds {MAX_REQUEST_BYTES:,} bytes")
                break
        if reply is None:
            session = next((v.decode("latin-1") for k, v in scope["headers"] if k.lower() == _SESSION_KEY), None)
            reply = await handle_generate(self.state.bridge, bytes(body), session)
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(reply.body)).encode())]
        await send({"type": "http.response.start", "status": reply.status, "headers": headers})
        await send({"type": "http.response.body", "body": reply.body})


GENERATE_PATH = "/inference/v1/generate"
_SESSION_KEY = SESSION_ID_HEADER.lower().encode()


def create_app(settings: Settings, engine: SGLangClient, *, model: str | None = None) -> BridgeApp:
    """The bridge for one engine. `model` is the id episodes use (Renderers matches the
    `/v1/models` card by it); `settings.rollout_max_context_len` is the advertised length;
    refusals name options by `settings.flag`."""
    overlong_error_class()  # imports verifiers (seconds): pay once here, not on the first request
    app = Starlette(
        routes=[
            Route(GENERATE_PATH, _generate_method_not_allowed, methods=["POST"]),  # POST: BridgeApp
            Route("/v1/models", models, methods=["GET"]),
            Route("/health", health, methods=["GET"]),
        ],
        exception_handlers={Exception: _internal_error},
    )
    app.state.bridge = BridgeState(
        settings=settings, engine=engine, model=model, sessions=SessionLRU(settings.session_lru_size),
        budgets=TurnBudgets(ENGINE_ATTEMPTS_PER_TURN, max_size=settings.session_lru_size),
    )
    return BridgeApp(app)
