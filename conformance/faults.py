"""The fault matrix: what the bridge answers when the engine or the client misbehaves.

Each `FaultCase` names one fault (the engine's behaviour from `conformance.hostile`, or the
client's body/session id), and what must come back: the HTTP status, the error `type`, how
many `/generate` calls reached the engine, and a bound on the time taken. `run_case` runs one
case against either door of the bridge — `served` (uvicorn on a loopback port, real HTTP) or
`in-process` (`handle_generate`, as generation A calls it) — then sends a normal request that
must succeed (a fault never poisons the bridge). The bridge runs with no backoff and a 1 MiB
engine body limit, so the whole matrix takes seconds.

Deadlines, so that the matrix passes on a loaded machine as on an idle one: only the cases
that test the per-attempt deadline (`deadline=DEADLINE`: a silent or trickling engine) run with
the short 0.5 s one, and they bound their time from both sides with a stated margin
(`min_seconds`, `max_seconds`). Every other case runs with ROOMY_DEADLINE (30 s), which no
scheduling delay reaches: the hostile engine answers at once, so a case is no slower for it,
and its engine-call count cannot grow by a deadline firing on a busy machine (CI once saw
`engine_429_retry_after_too_long` reach the engine twice when its 0.5 s deadline fired before
the 429 arrived). Those cases still bound their time, at PROMPT_S: far above what load adds to
an instant answer, far below one roomy deadline, so a case that waited for a deadline fails.

    pytest tests/conformance/test_faults.py        # every case × both doors, in the fast lane
"""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import orjson

from adapter.bridge.handler import create_app, handle_generate
from adapter.bridge.serve import served
from adapter.config.settings import Settings
from adapter.engine.client import RetryPolicy, SGLangClient, Timeouts
from adapter.engine.transport import tls_context
from conformance.hostile import (
    LOGPROBS,
    Behaviour,
    HostileEngine,
    ok,
    output,
    reset,
    respond,
    silence,
    trickle,
)

DEADLINE = 0.5  # the per-attempt deadline of the cases that test it
ROOMY_DEADLINE = 30.0  # every other case: never reached, however busy the machine
PROMPT_S = 10.0  # the time bound of a case that waits for no deadline: 1/3 of ROOMY_DEADLINE
# The margin a deadline case allows above ATTEMPTS × DEADLINE: each attempt's deadline may fire
# late on a loaded machine (the event loop waits for a core), and the bridge's own work, uvicorn
# included, comes on top; 3 s per attempt is far more than any scheduling delay seen, while a
# deadline that did not fire would run until the trickle ends (25 s per attempt) or forever.
DEADLINE_MARGIN_S = 9.0
# A deadline never fires early, but the engine's clock and the test's may differ by a tick.
EARLY_SLACK_S = 0.05
ATTEMPTS = 3
BODY_LIMIT = 1024 * 1024
CONTEXT = 4096
PROMPT = [151644, 872, 198, 6023, 151645, 198, 151644, 77091, 198]
MODES = ("served", "in-process")
CONFIG, ENGINE, OVERLONG, ABORTED = "configuration_error", "engine_error", "overlong_prompt", "engine_aborted"


def body(**params: Any) -> dict[str, Any]:
    """The body Renderers posts, with sampling params replaced (None deletes one)."""
    sampling = {"max_tokens": 16, "logprobs": 1, "stop_token_ids": [151645, 151643], "skip_special_tokens": False}
    sampling.update(params)
    return {"model": "m", "token_ids": list(PROMPT), "sampling_params": {k: v for k, v in sampling.items()
                                                                          if v is not None}}


def with_body(**fields: Any) -> dict[str, Any]:
    return {**body(), **fields}


def raw_output(text: str) -> Callable[[], Behaviour]:
    """An engine body given as JSON text (for what a dict cannot hold: duplicates, NaN)."""
    return lambda: respond(200, text.encode())


def items(*pairs: Any) -> list[list[Any]]:
    return [[lp, i, None] for lp, i in pairs]


@dataclass(frozen=True)
class FaultCase:
    id: str
    status: int
    kind: str
    engine_calls: int
    engine: Callable[[], Behaviour] = ok
    body: Any = None  # None: a well-formed body; bytes are sent as they are
    session: str | None = "fault-session"
    deadline: float | None = None  # the per-attempt deadline under test; None: ROOMY_DEADLINE
    reason: str = ""

    @property
    def read_deadline(self) -> float:
        return ROOMY_DEADLINE if self.deadline is None else self.deadline

    @property
    def min_seconds(self) -> float:
        """A deadline case waits out every attempt's deadline; other cases have no lower bound."""
        return 0.0 if self.deadline is None else self.engine_calls * self.deadline - EARLY_SLACK_S

    @property
    def max_seconds(self) -> float:
        """Every attempt's deadline plus DEADLINE_MARGIN_S; PROMPT_S where no deadline may fire."""
        return PROMPT_S if self.deadline is None else self.engine_calls * self.deadline + DEADLINE_MARGIN_S


DEEP = b'{"meta_info":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
GOOD = orjson.dumps(output()).decode()
DUPLICATE_META = GOOD.replace('"meta_info":{', '"meta_info":{"finish_reason":{"type":"abort"},', 1)
A = ATTEMPTS

ENGINE_CASES = [
    FaultCase("engine_500", 502, ENGINE, A, lambda: respond(500, {"error": "boom"}), reason="5xx retried, then 502"),
    FaultCase("engine_502", 502, ENGINE, A, lambda: respond(502, b"bad gateway")),
    FaultCase("engine_503", 502, ENGINE, A, lambda: respond(503, {"error": "busy"})),
    FaultCase("engine_504", 502, ENGINE, A, lambda: respond(504, {})),
    FaultCase("engine_429", 429, ENGINE, A, lambda: respond(429, {"error": "slow down"}), reason="the retried 4xx"),
    FaultCase("engine_429_retry_after", 429, ENGINE, A,
              lambda: respond(429, {}, headers={"Retry-After": "0.2"}), reason="two 0.2 s pauses, within PROMPT_S"),
    FaultCase("engine_429_retry_after_too_long", 429, ENGINE, 1,
              lambda: respond(429, {}, headers={"Retry-After": "3600"}), reason="a pause over the cap: not retried"),
    FaultCase("engine_400", 400, ENGINE, 1, lambda: respond(400, {"error": "bad"}), reason="4xx never retried"),
    FaultCase("engine_404", 404, ENGINE, 1, lambda: respond(404, {"detail": "Not Found"})),
    FaultCase("engine_413", 413, ENGINE, 1, lambda: respond(413, {})),
    FaultCase("engine_422", 422, ENGINE, 1, lambda: respond(422, {"detail": "bad"})),
    FaultCase("engine_302_output_body", 502, ENGINE, 1,
              lambda: respond(302, output(), headers={"Location": "/elsewhere"}), reason="3xx never followed"),
    FaultCase("engine_301", 502, ENGINE, 1, lambda: respond(301, b"", headers={"Location": "http://x/"})),
    FaultCase("connection_reset", 503, ENGINE, A, reset),
    FaultCase("truncated_body", 503, ENGINE, A, lambda: respond(200, output(), length=100_000)),
    FaultCase("trickling_body", 504, ENGINE, A, lambda: trickle(0.05), deadline=DEADLINE,
              reason="one deadline per attempt covers the whole body"),
    FaultCase("silent_engine", 504, ENGINE, A, silence, deadline=DEADLINE),
    FaultCase("invalid_gzip", 502, ENGINE, 1,
              lambda: respond(200, b"not gzip at all", headers={"Content-Encoding": "gzip"})),
    FaultCase("gzip_bomb", 502, ENGINE, 1, lambda: respond(200, b"[" + b"0," * BODY_LIMIT + b"0]", gzipped=True)),
    FaultCase("huge_body", 502, ENGINE, 1, lambda: respond(200, b" " * (BODY_LIMIT + 10))),
    FaultCase("not_json", 502, ENGINE, 1, lambda: respond(200, b"<html>oops</html>")),
    FaultCase("invalid_utf8", 502, ENGINE, 1, lambda: respond(200, b'{"meta_info": "\xff\xfe"}')),
    FaultCase("empty_body", 502, ENGINE, 1, lambda: respond(200, b"")),
    FaultCase("nested_100k_deep", 502, ENGINE, 1, lambda: respond(200, DEEP)),
    FaultCase("duplicate_meta_info_keys", 502, ENGINE, 1, raw_output(DUPLICATE_META), reason="first said abort"),
    FaultCase("duplicate_top_level_key", 502, ENGINE, 1, raw_output(GOOD[:-1] + ',"meta_info":{}}')),
    FaultCase("batch_output", 502, ENGINE, 1, lambda: respond(200, [output(), output()])),
    FaultCase("meta_info_not_object", 502, ENGINE, 1, lambda: respond(200, {"meta_info": [1]})),
    FaultCase("output_ids_int", 502, ENGINE, 1, lambda: respond(200, {**output(), "output_ids": 5})),
    FaultCase("output_ids_mismatch", 502, ENGINE, 1, lambda: respond(200, {**output(), "output_ids": [1, 2, 3]})),
    FaultCase("completion_tokens_float", 502, ENGINE, 1, lambda: respond(200, output(completion_tokens=3.0))),
    FaultCase("cached_tokens_str", 502, ENGINE, 1, lambda: respond(200, output(cached_tokens="abc")),
              reason="a stats field Miles' samples read"),
    FaultCase("prompt_tokens_list", 502, ENGINE, 1, lambda: respond(200, output(prompt_tokens=[1]))),
    FaultCase("completion_tokens_mismatch", 502, ENGINE, 1, lambda: respond(200, output(completion_tokens=7))),
    FaultCase("finish_abort", 410, ABORTED, 1, lambda: respond(200, output(finish_reason={"type": "abort"}))),
    FaultCase("finish_unknown", 502, ENGINE, 1, lambda: respond(200, output(finish_reason={"type": "eos"}))),
    FaultCase("finish_missing", 502, ENGINE, 1, lambda: respond(200, output(finish_reason=None))),
    FaultCase("finish_stop_zero_tokens", 502, ENGINE, 1,
              lambda: respond(200, {**output(completion_tokens=0, output_token_logprobs=[]), "output_ids": []})),
    FaultCase("logprobs_missing", 502, ENGINE, 1, lambda: respond(200, output(output_token_logprobs=None))),
    FaultCase("logprob_positive", 502, ENGINE, 1,
              lambda: respond(200, output(output_token_logprobs=items((0.5, 40), (-0.5, 1080), (-0.01, 151645))))),
    FaultCase("logprob_nan_literal", 502, ENGINE, 1, raw_output(GOOD.replace("-0.25", "NaN", 1))),
    FaultCase("logprob_overflow", 502, ENGINE, 1, raw_output(GOOD.replace("-0.25", "-1e400", 1))),
    FaultCase("logprob_null", 502, ENGINE, 1,
              lambda: respond(200, output(output_token_logprobs=items((None, 40), (-0.5, 1080), (-0.01, 151645))))),
    FaultCase("token_id_1e30", 502, ENGINE, 1, raw_output(GOOD.replace(",40,", ",1e30,", 1))),
    FaultCase("token_id_bignum", 502, ENGINE, 1, raw_output(GOOD.replace(",40,", ",99999999999999999999999,", 1))),
    FaultCase("token_id_negative", 502, ENGINE, 1,
              lambda: respond(200, {**output(output_token_logprobs=items(*zip(LOGPROBS, [-1, 1080, 151645],
                                                                                strict=True))),
                                    "output_ids": None})),
    FaultCase("logprob_item_too_short", 502, ENGINE, 1,
              lambda: respond(200, output(output_token_logprobs=[[-0.1]] * 3))),
]

BIG_SESSION = "s" * 300
CLIENT_CASES = [
    FaultCase("client_invalid_json", 400, CONFIG, 0, body=b'{"token_ids": [1,'),
    FaultCase("client_nested_100k_deep", 400, CONFIG, 0, body=b'{"x":' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
    FaultCase("client_duplicate_key", 400, CONFIG, 0,
              body=b'{"token_ids":[1],"sampling_params":{"max_tokens":4,"max_tokens":0}}'),
    FaultCase("client_not_an_object", 400, CONFIG, 0, body=[1, 2]),
    FaultCase("client_max_tokens_str", 400, CONFIG, 0, body=body(max_tokens="10")),
    FaultCase("client_max_tokens_list", 400, CONFIG, 0, body=body(max_tokens=[1])),
    FaultCase("client_max_tokens_zero", 400, CONFIG, 0, body=body(max_tokens=0), reason="a bad request, not overlong"),
    FaultCase("client_max_tokens_negative", 400, CONFIG, 0, body=body(max_tokens=-5)),
    FaultCase("client_max_tokens_fraction", 400, CONFIG, 0, body=body(max_tokens=1.5)),
    FaultCase("client_max_tokens_bool", 400, CONFIG, 0, body=body(max_tokens=True)),
    FaultCase("client_max_tokens_1e30", 400, CONFIG, 0, body=body(max_tokens=1e30)),
    FaultCase("client_max_new_tokens_fraction", 400, CONFIG, 0, body=body(max_tokens=None, max_new_tokens=1.5)),
    FaultCase("client_stop_token_ids_int", 400, CONFIG, 0, body=body(stop_token_ids=5)),
    FaultCase("client_stop_token_ids_str", 400, CONFIG, 0, body=body(stop_token_ids="ab")),
    FaultCase("client_temperature_nan", 400, CONFIG, 0, body=body(temperature=math.nan)),
    FaultCase("client_token_ids_empty", 400, CONFIG, 0, body=with_body(token_ids=[])),
    FaultCase("client_token_id_negative", 400, CONFIG, 0, body=with_body(token_ids=[1, -2])),
    FaultCase("client_token_id_bool", 400, CONFIG, 0, body=with_body(token_ids=[1, True])),
    FaultCase("client_token_id_1e30", 400, CONFIG, 0, body=with_body(token_ids=[1, 1e30])),
    FaultCase("client_multimodal_features", 400, CONFIG, 0, body=with_body(features={"image": [1]})),
    FaultCase("client_session_id_300_bytes", 400, CONFIG, 0, session=BIG_SESSION),
    FaultCase("client_session_id_4kb", 400, CONFIG, 0, session="x" * 4096),
    FaultCase("client_overlong_prompt", 400, OVERLONG, 0, body=with_body(token_ids=[5] * (CONTEXT + 1))),
]

CASES = ENGINE_CASES + CLIENT_CASES


@dataclass(frozen=True)
class Outcome:
    status: int
    kind: str | None
    engine_calls: int
    seconds: float
    followup_status: int


def _wire_bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    return json.dumps(value).encode()  # the stdlib writes NaN as a bare literal, as a sloppy client would


async def run_case(case: FaultCase, mode: str) -> Outcome:
    """Run `case` through the bridge's `mode` door; then one normal request (new session)."""
    async with HostileEngine(behaviour=case.engine()) as engine:
        deadline = case.read_deadline
        client = SGLangClient(engine.url, timeouts=Timeouts(connect=deadline, read=deadline, write=deadline),
                              retry=RetryPolicy(max_attempts=ATTEMPTS, initial_backoff=0, max_backoff=0,
                                                max_retry_after=1.0),
                              max_body_bytes=BODY_LIMIT)
        app = create_app(Settings(rollout_max_context_len=CONTEXT), client, model="m")
        payload = body() if case.body is None else case.body
        try:
            if mode == "in-process":
                async def send(value: Any, session: str | None) -> tuple[int, Any]:
                    reply = await handle_generate(app.state.bridge, value, session)
                    return reply.status, orjson.loads(reply.body)
                outcome = await _exchange(case, engine, send, payload)
            else:
                # the process' shared TLS context: a client of its own would parse certifi's store (~38 ms)
                async with served(app) as url, \
                        httpx.AsyncClient(base_url=url, timeout=30, verify=tls_context()) as http:
                    async def send(value: Any, session: str | None) -> tuple[int, Any]:
                        headers = {"content-type": "application/json", **({"X-Session-ID": session} if session else {})}
                        response = await http.post("/inference/v1/generate", content=_wire_bytes(value),
                                                   headers=headers)
                        return response.status_code, response.json()
                    outcome = await _exchange(case, engine, send, payload)
        finally:
            await client.aclose()
    return outcome


async def _exchange(case: FaultCase, engine: HostileEngine, send: Any, payload: Any) -> Outcome:
    started = time.perf_counter()
    status, answer = await send(payload, case.session)
    seconds = time.perf_counter() - started
    calls = engine.generate_calls
    engine.behaviour = ok()
    followup, _ = await send(body(), f"followup-{uuid.uuid4().hex}")
    kind = answer.get("error", {}).get("type") if isinstance(answer, dict) else None
    return Outcome(status, kind, calls, seconds, followup)
