"""The bridge's HTTP surface, called directly: statuses, error bodies, /v1/models, sessions."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest

from adapter.bridge.handler import create_app
from adapter.config.settings import Settings
from adapter.engine.client import RetryPolicy, SGLangClient
from adapter.errors import UnsupportedRequestError
from adapter.wire.translate import ROUTER_DROPPED_KEYS
from conformance.engine import Completion, Fault

PROMPT = [151644, 872, 198, 6023, 151645, 198, 151644, 77091, 198]


def body(**overrides: Any) -> dict[str, Any]:
    params = {"max_tokens": 16, "logprobs": 1, "stop_token_ids": [151645, 151643], "skip_special_tokens": False}
    return {"model": "m", "token_ids": list(PROMPT), "sampling_params": params, **overrides}


@pytest.fixture
async def bridge(sglang_mock):
    clients = []

    async def make(**settings: Any) -> httpx.AsyncClient:
        engine = SGLangClient(sglang_mock.url, retry=RetryPolicy(max_attempts=2, initial_backoff=0, max_backoff=0))
        app = create_app(Settings(**settings), engine, model="m")
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bridge")
        clients.append((client, engine))
        return client

    yield make
    for client, engine in clients:
        await client.aclose()
        await engine.aclose()


async def post(client: httpx.AsyncClient, payload: Any = None, session: str | None = "s1") -> httpx.Response:
    headers = {"X-Session-ID": session} if session else {}
    return await client.post("/inference/v1/generate", json=body() if payload is None else payload, headers=headers)


async def test_generate_round_trip(bridge, sglang_mock) -> None:
    client = await bridge()
    sglang_mock.script(Completion([40, 151645], [-0.3, -0.01]))
    response = await post(client)
    assert response.status_code == 200
    choice = response.json()["choices"][0]
    assert choice["token_ids"] == [40, 151645]
    assert [c["token"] for c in choice["logprobs"]["content"]] == ["token_id:40", "token_id:151645"]


@pytest.mark.parametrize(
    ("step", "status", "kind"),
    [
        (Completion([1], [-0.1], finish="abort"), 410, "engine_aborted"),
        (Completion([1], [-0.1], finish="eos"), 502, "engine_error"),
        (Fault(status=200, body={"meta_info": {"finish_reason": {"type": "stop"}}}), 502, "engine_error"),
        (Fault(status=422, body={"detail": "bad"}), 422, "engine_error"),
        (Fault(reset=True), 503, "engine_error"),
        (Fault(timeout=True), 504, "engine_error"),
        (Fault(status=500, body={}), 502, "engine_error"),
    ],
    ids=["abort", "unknown_finish", "no_logprobs", "engine_4xx", "unreachable", "timeout", "engine_5xx"],
)
async def test_engine_failures_map_to_statuses_verifiers_understands(bridge, sglang_mock, step, status, kind) -> None:
    client = await bridge()
    sglang_mock.script(step, step)
    response = await post(client)
    assert response.status_code == status
    assert response.json()["error"]["type"] == kind


@pytest.mark.parametrize(
    ("payload", "settings", "kind"),
    [
        (body(features={"x": 1}), {}, "configuration_error"),
        (body(token_ids=[]), {}, "configuration_error"),
        ([1, 2], {}, "configuration_error"),
        (body(), {"rollout_max_context_len": 9}, "overlong_prompt"),
        (body(), {"rollout_max_prompt_len": 4}, "overlong_prompt"),
    ],
    ids=["multimodal", "empty_prompt", "not_an_object", "no_budget", "prompt_cap"],
)
async def test_configuration_problems_are_400_and_never_reach_the_engine(
    bridge, sglang_mock, payload, settings, kind
) -> None:
    client = await bridge(**settings)
    response = await post(client, payload)
    assert response.status_code == 400
    assert response.json()["error"]["type"] == kind
    assert sglang_mock.generate_requests() == []


async def test_overlong_message_carries_the_phrase_verifiers_maps_to_truncation(bridge) -> None:
    client = await bridge(rollout_max_context_len=9)
    assert "maximum context length" in (await post(client)).json()["error"]["message"]


async def test_invalid_json_is_a_400(bridge) -> None:
    client = await bridge()
    response = await client.post("/inference/v1/generate", content=b"{", headers={"content-type": "application/json"})
    assert response.status_code == 400


async def test_prompt_cap_applies_to_the_first_turn_of_a_session_only(bridge, sglang_mock) -> None:
    client = await bridge(rollout_max_prompt_len=len(PROMPT))
    sglang_mock.script(Completion([1], [-0.1]), Completion([2], [-0.1]))
    assert (await post(client)).status_code == 200  # first turn at the cap: served
    longer = body(token_ids=[*PROMPT, 1, 151645, 198, 151644, 77091, 198])
    assert (await post(client, longer)).status_code == 200  # later turn: no prompt cap
    assert (await post(client, longer, session="s2")).status_code == 400  # a new session's first turn


@pytest.mark.parametrize(
    ("settings", "data"),
    [({"rollout_max_context_len": 2048}, [{"id": "m", "object": "model", "owned_by": "sglang",
                                           "max_model_len": 2048}]),
     ({}, [])],
    ids=["context_known", "context_unknown"],
)
async def test_models_advertises_the_context_length_when_known(bridge, settings, data) -> None:
    client = await bridge(**settings)
    response = await client.get("/v1/models")
    assert response.json()["data"] == data


async def test_health(bridge) -> None:
    assert (await (await bridge()).get("/health")).json() == {"status": "ok"}


async def test_an_evicted_session_is_a_first_turn_again(bridge, sglang_mock) -> None:
    """Documented in adapter/bridge/sessions.py: past the LRU bound, the oldest session's next turn is
    capped like a first turn (here refused as an overlong prompt, a clean truncation)."""
    client = await bridge(rollout_max_prompt_len=len(PROMPT), session_lru_size=1)
    sglang_mock.script(Completion([1], [-0.1]), Completion([2], [-0.1]))
    longer = body(token_ids=[*PROMPT, 1, 151645, 198])
    assert (await post(client, session="a")).status_code == 200
    assert (await post(client, session="b")).status_code == 200  # evicts a
    response = await post(client, longer, session="a")
    assert response.status_code == 400 and response.json()["error"]["type"] == "overlong_prompt"


@pytest.mark.parametrize("door", ["asgi", "direct"])
async def test_a_bug_is_a_typed_500_internal_error(bridge, monkeypatch, door) -> None:
    from adapter.bridge.handler import handle_generate

    client = await bridge()

    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug")

    app = client._transport.app  # the ASGI app behind the test client
    monkeypatch.setattr(app.state.bridge.engine, "generate", broken)
    if door == "asgi":
        response = await post(client)
        status, error = response.status_code, response.json()["error"]
    else:
        reply = await handle_generate(app.state.bridge, body(), "s1")
        status, error = reply.status, orjson.loads(reply.body)["error"]
    assert status == 500 and error["type"] == "internal_error"


@pytest.mark.parametrize("key", sorted(ROUTER_DROPPED_KEYS))
async def test_a_key_the_router_would_drop_is_refused_behind_a_router_naming_it(bridge, sglang_mock, key) -> None:
    sglang_mock.workers = ["http://w1.test:1", "http://w2.test:2"]  # a router: /workers lists them
    client = await bridge()
    sampling = {**body()["sampling_params"], key: {"7": 1.0} if key == "logit_bias" else 1}
    response = await post(client, body(sampling_params=sampling))
    assert response.status_code == 400 and response.json()["error"]["type"] == "configuration_error"
    assert f"sampling_params ['{key}'] would be dropped by the SGLang router" in response.json()["error"]["message"]
    assert sglang_mock.generate_requests() == []  # refused before any engine call
    assert isinstance(client._transport.app.state.bridge.refusal, UnsupportedRequestError)  # the run stops on it


async def test_the_same_key_reaches_a_single_server_and_the_router_look_is_asked_once(bridge, sglang_mock) -> None:
    client = await bridge()
    sampling = {**body()["sampling_params"], "logit_bias": {"7": 1.0}}
    sglang_mock.script(Completion([40, 151645], [-0.3, -0.01]), Completion([40, 151645], [-0.3, -0.01]))
    for _ in range(2):
        assert (await post(client, body(sampling_params=sampling))).status_code == 200
    assert sglang_mock.generate_requests()[0].body["sampling_params"]["logit_bias"] == {"7": 1.0}
    assert [r.path for r in sglang_mock.requests].count("/workers") == 1


async def test_requests_without_such_keys_never_ask_for_the_topology(bridge, sglang_mock) -> None:
    client = await bridge()
    sglang_mock.script(Completion([40, 151645], [-0.3, -0.01]))
    assert (await post(client)).status_code == 200
    assert [r.path for r in sglang_mock.requests] == ["/generate"]
