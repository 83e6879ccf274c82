"""Checks against a live SGLang server: one implementation for `pytest -m live` and `vf-sglang check`.

Consumes: an `SGLangClient` pointed at a server or router, and the server's `/model_info` and
`/server_info` (or their older names, `adapter.preflight.MODEL_INFO_PATHS`; `ServerFacts`).
Emits one `CheckResult` per check (`run_checks`): pass, fail (with what was seen) or skip (with
why). Each check speaks the adapter's own code path (`wire.to_sglang_request`, the client,
`wire.to_renderers_response`), so a server whose output the adapter would reject fails with the
adapter's own typed error.

Required checks decide the exit status of `vf-sglang check`; the context-length check only
informs. Determinism is checked only when the server reports
`enable_deterministic_inference` (SGLang ignores `sampling_seed` otherwise).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from adapter.errors import EngineAbortedError, EngineError, EngineStatusError, VfSglangError
from adapter.preflight import MODEL_INFO_PATHS, SERVER_INFO_PATHS, first_served, speaks_sglang
from adapter.settings import Settings
from adapter.sglang import SGLangClient
from adapter.wire import to_renderers_response, to_sglang_request

# "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n" in Qwen3's vocabulary; any model
# accepts the ids (they are only a prompt), Qwen3 models also answer sensibly.
PROBE_PROMPT = [151644, 872, 198, 6023, 151645, 198, 151644, 77091, 198]
NOT_DETERMINISTIC = "skipped: server not started with --enable-deterministic-inference"
Status = Literal["pass", "fail", "skip"]


@dataclass(frozen=True)
class CheckResult:
    name: str
    status: Status
    detail: str
    required: bool = True


@dataclass(frozen=True)
class ServerFacts:
    model_info: dict[str, Any] | None
    server_info: dict[str, Any] | None

    @property
    def speaks_sglang(self) -> bool:
        return speaks_sglang(self.model_info)

    @property
    def deterministic(self) -> bool:
        return bool((self.server_info or {}).get("enable_deterministic_inference"))

    @property
    def context_length(self) -> int | None:
        value = (self.server_info or {}).get("context_length")
        return value if isinstance(value, int) else None

    def describe(self) -> str:
        info, server = self.model_info or {}, self.server_info or {}
        if server.get("version"):
            return f"{info.get('model_path')} on SGLang {server['version']}"
        return f"{info.get('model_path')} ({server.get('engine') or 'SGLang version unknown'})"


def probe_body(max_tokens: int = 8, **sampling: Any) -> dict[str, Any]:
    params = {"max_tokens": max_tokens, "temperature": 0.0, "logprobs": 1,
              "stop_token_ids": [151645, 151643], "skip_special_tokens": False, **sampling}
    return {"model": "live", "token_ids": list(PROBE_PROMPT), "sampling_params": params}


async def check_generate(engine: SGLangClient, settings: Settings | None = None, **sampling: Any) -> dict[str, Any]:
    """One translated `/generate`; returns the Renderers response (raises on any violation)."""
    return (await _generate(engine, settings, **sampling))[1]


async def _generate(engine: SGLangClient, settings: Settings | None = None, **sampling: Any) -> tuple[Any, Any]:
    request = to_sglang_request(probe_body(**sampling), settings=settings or Settings(), session_id="live-check",
                                first_turn=True)
    raw = await engine.generate(request)
    response = to_renderers_response(raw)
    budget = request.payload["sampling_params"]["max_new_tokens"]
    if len(response["choices"][0]["token_ids"]) > budget:
        raise AssertionError(f"engine sampled {len(response['choices'][0]['token_ids'])} tokens, over {budget}")
    return raw, response


_NOT_SERVED = object()


async def read_facts(engine: SGLangClient) -> ServerFacts:
    async def fetch(path: str) -> Any:
        try:
            return await engine.get(path)
        except EngineStatusError as exc:
            if exc.status_code == 404:
                return _NOT_SERVED
            raise

    async def body(paths: tuple[str, ...]) -> dict[str, Any] | None:
        try:
            _, found = await first_served(paths, fetch, lambda answer: answer is _NOT_SERVED)
        except EngineError:
            return None
        return found if isinstance(found, dict) else None

    return ServerFacts(await body(MODEL_INFO_PATHS), await body(SERVER_INFO_PATHS))


async def _logprobs(engine: SGLangClient, facts: ServerFacts) -> str:
    raw, _ = await _generate(engine)
    items = raw["meta_info"]["output_token_logprobs"]
    assert items and all(math.isfinite(i[0]) and i[0] <= 1e-6 for i in items), f"logprobs {items!r:.200}"
    return f"{len(items)} finite logprobs"


async def _ids(engine: SGLangClient, facts: ServerFacts) -> str:
    raw, response = await _generate(engine)
    ids = [item[1] for item in raw["meta_info"]["output_token_logprobs"]]
    assert raw.get("output_ids", ids) == ids == response["choices"][0]["token_ids"], f"{raw.get('output_ids')} vs {ids}"
    return f"output_ids == logprob ids ({len(ids)})"


async def _stop_ids(engine: SGLangClient, facts: ServerFacts) -> str:
    first = (await check_generate(engine, max_tokens=4))["choices"][0]["token_ids"][0]
    choice = (await check_generate(engine, max_tokens=16, stop_token_ids=[151645, 151643, first]))["choices"][0]
    assert choice["token_ids"] == [first] and choice["finish_reason"] == "stop", (
        f"stop_token_ids [{first}] not honoured: got {choice['token_ids']} ({choice['finish_reason']})")
    return f"stopped on token {first}"


async def _finish_reasons(engine: SGLangClient, facts: ServerFacts) -> str:
    length = (await check_generate(engine, max_tokens=1, stop_token_ids=[], ignore_eos=True))["choices"][0]
    assert (len(length["token_ids"]), length["finish_reason"]) == (1, "length"), f"max_tokens=1 gave {length}"
    return "stop and length, as SGLang names them"


async def _abort(engine: SGLangClient, facts: ServerFacts) -> str:
    budget = 512 if facts.context_length is None else max(1, min(512, facts.context_length - len(PROBE_PROMPT)))
    task = asyncio.ensure_future(check_generate(engine, max_tokens=budget, temperature=1.0, ignore_eos=True))
    await asyncio.sleep(0.3)
    await engine.abort_all()
    try:
        response = await asyncio.wait_for(task, timeout=60)
    except EngineAbortedError:
        return "an aborted request finished with finish_reason abort"
    raise AssertionError(f"the request finished {response['choices'][0]['finish_reason']!r} despite abort_all")


async def _routing(engine: SGLangClient, facts: ServerFacts) -> str:
    workers = await engine.worker_urls()
    if workers == [engine.base_url]:
        raise _Skip("not a router (neither /workers nor /list_workers listed workers)")
    await check_generate(engine, Settings(sglang_router_policy="consistent_hashing"))
    return f"X-SMG-Routing-Key accepted by the router ({len(workers)} workers)"


async def _determinism(engine: SGLangClient, facts: ServerFacts) -> str:
    if not facts.deterministic:
        raise _Skip(NOT_DETERMINISTIC)
    first = await check_generate(engine, max_tokens=16, temperature=0.8, seed=1234)
    second = await check_generate(engine, max_tokens=16, temperature=0.8, seed=1234)
    assert first["choices"][0]["token_ids"] == second["choices"][0]["token_ids"], "same seed, different tokens"
    return "same seed, same tokens"


class _Skip(Exception):  # a control-flow signal: the check does not apply to this server
    pass


Check = Callable[[SGLangClient, ServerFacts], Awaitable[str]]
CHECKS: dict[str, Check] = {
    "logprobs returned and finite": _logprobs,
    "ids = logprob ids": _ids,
    "stop ids honoured": _stop_ids,
    "finish reasons known": _finish_reasons,
    "abort reported as abort": _abort,
    "routing header through a router": _routing,
    "same seed, same tokens": _determinism,
}


async def run_check(name: str, engine: SGLangClient, facts: ServerFacts) -> CheckResult:
    try:
        return CheckResult(name, "pass", await CHECKS[name](engine, facts))
    except _Skip as skip:
        return CheckResult(name, "skip", str(skip))
    except (AssertionError, VfSglangError) as exc:
        return CheckResult(name, "fail", f"{type(exc).__name__}: {exc}")


def context_check(facts: ServerFacts, model_max: int | None) -> CheckResult:
    """The server's context length against the model's `max_position_embeddings` (informs only)."""
    name, served = "context length vs model", facts.context_length
    if served is None or model_max is None:
        known = f"server {served}, model {model_max}"
        return CheckResult(name, "skip", f"skipped: not both known ({known}; pass --tokenizer DIR)", required=False)
    status: Status = "pass" if served <= model_max else "fail"
    return CheckResult(name, status, f"server {served} tokens, model {model_max}", required=False)


async def run_checks(engine: SGLangClient, facts: ServerFacts, *, model_max: int | None = None) -> list[CheckResult]:
    results = [await run_check(name, engine, facts) for name in CHECKS]
    return [*results, context_check(facts, model_max)]
