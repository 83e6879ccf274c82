"""The in-process door to the bridge: the slice of `AsyncOpenAI` that Verifiers' TrainClient
and `renderers.client.generate` use, answered by `adapter.bridge.handler.handle_generate` directly.

Generation A (verifiers 0.2.x) builds its TrainClient around an `AsyncOpenAI` it is handed.
Renderers only calls `client.post(<base>/inference/v1/generate, cast_to=httpx.Response,
body=<dict>, options={"headers": ...})`, `client.get("/models", cast_to=dict)`, reads
`client.base_url`, and the TrainClient calls `close()`. `DirectBridgeClient` provides exactly
those, so a turn costs translation + one engine call: no second HTTP client, no JSON round trip
of the request (the body dict goes to the typed handler as it is; the reply's bytes are what
Renderers parses). Failures are raised as `openai.APIStatusError` with the bridge's status and
error body, so Verifiers maps them exactly as it maps the served bridge's (overlong prompt →
clean truncation, 4xx not retried, `configuration_error` → `AdapterRequestError`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx
from openai import APIStatusError

from adapter.bridge.handler import GENERATE_PATH, BridgeState, Reply, error_reply, handle_generate, models_payload
from adapter.wire.translate import SESSION_ID_HEADER

NOT_FOUND = "not_found"
_JSON = {"content-type": "application/json"}


def _session_id(options: Mapping[str, Any] | None) -> str | None:
    headers = (options or {}).get("headers") or {}
    for key, value in headers.items():
        if key.lower() == SESSION_ID_HEADER.lower():
            return str(value)
    return None


class DirectBridgeClient:
    """An `AsyncOpenAI` stand-in whose generate calls are the bridge's handler, in-process."""

    def __init__(self, state: BridgeState, *, base_url: str) -> None:
        self.state = state
        self.base_url = httpx.URL(base_url)
        self._posts: dict[str, httpx.Request] = {}  # URL → the POST its responses carry

    def _post_request(self, url: str) -> httpx.Request:
        """The `httpx.Request` a POST's response names (Renderers posts to one URL: built once,
        ~12 µs a turn saved; it carries no body, so sharing it between responses shares nothing)."""
        request = self._posts.get(url)
        if request is None:
            request = httpx.Request("POST", url)
            if len(self._posts) < 64:
                self._posts[url] = request
        return request

    async def post(self, path: str, *, cast_to: Any = None, body: Any = None,
                   options: Mapping[str, Any] | None = None, **_: Any) -> httpx.Response:
        url = str(path)
        request = self._post_request(url)
        if not url.rstrip("/").endswith(GENERATE_PATH):
            raise _status_error(request, error_reply(404, NOT_FOUND, f"no route {url}"))
        reply = await handle_generate(self.state, body if body is not None else {}, _session_id(options))
        response = httpx.Response(reply.status, content=reply.body, request=request, headers=_JSON)
        if not reply.ok:
            raise _status_error(request, reply, response)
        return response

    async def get(self, path: str, *, cast_to: Any = None, **_: Any) -> Any:
        if str(path).rstrip("/").endswith("/models"):
            return models_payload(self.state)
        raise _status_error(httpx.Request("GET", str(path)), error_reply(404, NOT_FOUND, f"no route {path}"))

    async def close(self) -> None:
        """Nothing to close: the engine client belongs to whoever built the bridge."""


def _status_error(request: httpx.Request, reply: Reply, response: httpx.Response | None = None) -> APIStatusError:
    response = response or httpx.Response(reply.status, content=reply.body, request=request)
    error = reply.error.as_dict() if reply.error is not None else None
    message = f"Error code: {reply.status} - {({'error': error})}"
    # openai's stubs name their vendored httpx fork's Response; an httpx.Response works at runtime
    return APIStatusError(message, response=response, body=error)  # type: ignore[arg-type]
