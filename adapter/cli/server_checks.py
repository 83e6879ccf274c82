"""The live server checks `vf-sglang check` runs (and `pytest -m live` reuses), one verdict each.

Consumes: an `SGLangClient` pointed at a server or router, and the server's `/model_info` and
`/server_info` (or their older names, `adapter.engine.probe.MODEL_INFO_PATHS`; `ServerFacts`),
read from a worker when the address is a router (`Topology.fact_source`: sglang-router 0.3.2's
own `/get_server_info` is its summary, not an engine's). Emits one `CheckResult` per check
(`run_checks`): pass, fail (with what was seen) or skip (with why). Each check speaks the
adapter's own code path (`wire.translate.to_sglang_request`, the client, `wire.translate.to_renderers_response`), so
a server whose output the adapter would reject fails with the adapter's own typed error.

Each verdict is explicit (`_expect` raises `CheckFailed`; no bare `assert`, which `python -O`
strips), and a check that raises anything else is that check's failure, not the end of the table.
Required checks decide the exit status of `vf-sglang check`; the input-limit check only
informs. Behind a router, the routing check sends one routing key `SAME_KEY_PROBES` times
(one worker must answer them all, by `x-smg-routed-worker-id`) and then different keys until a
second worker answers (at most `SPREAD_PROBES`): it fails under round_robin and random. It is
required under `--router-policy consistent_hashing`/`manual`, informs without the flag, and is
skipped under round_robin; the router-retries row informs (smg does not report its setting).
Determinism is checked only when the server reports `enable_deterministic_inference` (SGLang
ignores `sampling_seed` otherwise).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from adapter.cli.routing import ROUTER_RETRY_FLAG, SMG_DEFAULT_RETRIES
from adapter.config.limits import ENGINE_ATTEMPTS_PER_TURN
from adapter.config.settings import ROUTING_KEY_POLICIES, Settings
from adapter.engine.client import SGLangClient
from adapter.engine.probe import MODEL_INFO_PATHS, SERVER_INFO_PATHS, speaks_sglang
from adapter.engine.topology import ROUTED_WORKER_HEADER, Topology
from adapter.errors import EngineAbortedError, EngineError, VfSglangError
from adapter.wire.translate import to_renderers_response, to_sglang_request
from adapter.wire.types import EngineOutput

# "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n" in Qwen3's vocabulary; any model
# accepts the ids (they are only a prompt), Qwen3 models also answer sensibly.
PROBE_PROMPT = [151644, 872, 198, 6023, 151645, 198, 151644, 77091, 198]
NOT_DETERMINISTIC = "skipped: server not started with --enable-deterministic-inference"
Status = Literal["pass", "fail", "skip"]
SAME_KEY_PROBES = 10  # one key this many times: a key-blind router with 2 workers splits them (p ≤ 2⁻⁹)
SPREAD_PROBES = 32  # different keys until a second worker answers
ROUTING_CHECK = "routing by X-SMG-Routing-Key"
KEYED = Settings(sglang_router_policy="consistent_hashing")


class CheckFailed(Exception):
    """A check's own verdict: the server answered, and the answer is not what the adapter needs.
    The check command's own, beside it (the product's errors are in `adapter.errors`)."""


class CheckSkipped(Exception):
    """A control-flow signal: the check does not apply to this server (the message says why)."""


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
    topology: Topology | None = None  # None: not looked at (a single server is assumed)

    @property
    def speaks_sglang(self) -> bool:
        return speaks_sglang(self.model_info)

    @property
    def deterministic(self) -> bool:
        return bool((self.server_info or {}).get("enable_deterministic_inference"))

    @property
    def context_length(self) -> int | None:
        """`context_length` as the server reports it (SGLang: None unless launched with one)."""
        return self._int("context_length")

    @property
    def input_limit(self) -> tuple[str, int] | None:
        """The longest prompt the server takes, and the `/server_info` key that says so."""
        for key in ("context_length", "max_req_input_len"):
            value = self._int(key)
            if value is not None:
                return key, value
        return None

    def _int(self, key: str) -> int | None:
        value = (self.server_info or {}).get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def behind_router(self) -> bool:
        return self.topology is not None and self.topology.is_router

    def describe(self) -> str:
        info, server = self.model_info or {}, self.server_info or {}
        if server.get("version"):
            engine = f"{info.get('model_path')} on SGLang {server['version']}"
        else:
            engine = f"{info.get('model_path')} ({server.get('engine') or 'SGLang version unknown'})"
        if self.topology is not None and self.topology.is_router:
            return f"{engine}, read from {self.topology.fact_source}, behind the {self.topology.describe()}"
        return engine


def probe_body(max_tokens: int = 8, **sampling: Any) -> dict[str, Any]:
    params = {"max_tokens": max_tokens, "temperature": 0.0, "logprobs": 1,
              "stop_token_ids": [151645, 151643], "skip_special_tokens": False, **sampling}
    return {"model": "live", "token_ids": list(PROBE_PROMPT), "sampling_params": params}


async def check_generate(engine: SGLangClient, settings: Settings | None = None, **sampling: Any) -> dict[str, Any]:
    """One translated `/generate`; returns the Renderers response (raises on any violation)."""
    return (await _generate(engine, settings, **sampling))[1]


async def _generate(
    engine: SGLangClient, settings: Settings | None = None, **sampling: Any
) -> tuple[EngineOutput, dict[str, Any]]:
    request = to_sglang_request(probe_body(**sampling), settings=settings or Settings(), session_id="live-check",
                                first_turn=True)
    raw = await engine.generate(request)
    response = to_renderers_response(raw)
    budget = request.payload["sampling_params"]["max_new_tokens"]
    if len(response["choices"][0]["token_ids"]) > budget:
        raise CheckFailed(f"engine sampled {len(response['choices'][0]['token_ids'])} tokens, over {budget}")
    return raw, response


async def read_facts(engine: SGLangClient) -> ServerFacts:
    """The address's topology, then the model and server info of the engine: a worker's behind a
    router (`Topology.fact_source`), the address's own otherwise."""
    topology = await engine.discover()

    async def body(paths: tuple[str, ...]) -> dict[str, Any] | None:
        try:
            return await engine.engine_info(paths, at=topology.fact_source)
        except EngineError:
            return None

    return ServerFacts(await body(MODEL_INFO_PATHS), await body(SERVER_INFO_PATHS), topology)


async def _logprobs(engine: SGLangClient, facts: ServerFacts) -> str:
    raw, _ = await _generate(engine)
    items = raw.meta_info.output_token_logprobs or []
    _expect(items and all(math.isfinite(i[0]) and i[0] <= 1e-6 for i in items), f"logprobs {items!r:.200}")
    return f"{len(items)} finite logprobs"


async def _ids(engine: SGLangClient, facts: ServerFacts) -> str:
    raw, response = await _generate(engine)
    ids = [item[1] for item in raw.meta_info.output_token_logprobs or []]
    sent = response["choices"][0]["token_ids"]
    output_ids = ids if raw.output_ids is None else raw.output_ids
    _expect(output_ids == ids == sent, f"{raw.output_ids} vs {ids}")
    return f"output_ids == logprob ids ({len(ids)})"


async def _stop_ids(engine: SGLangClient, facts: ServerFacts) -> str:
    first = (await check_generate(engine, max_tokens=4))["choices"][0]["token_ids"][0]
    choice = (await check_generate(engine, max_tokens=16, stop_token_ids=[151645, 151643, first]))["choices"][0]
    _expect(choice["token_ids"] == [first] and choice["finish_reason"] == "stop", (
        f"stop_token_ids [{first}] not honoured: got {choice['token_ids']} ({choice['finish_reason']})"))
    return f"stopped on token {first}"


async def _finish_reasons(engine: SGLangClient, facts: ServerFacts) -> str:
    length = (await check_generate(engine, max_tokens=1, stop_token_ids=[], ignore_eos=True))["choices"][0]
    _expect((len(length["token_ids"]), length["finish_reason"]) == (1, "length"), f"max_tokens=1 gave {length}")
    return "stop and length, as SGLang names them"


async def _abort(engine: SGLangClient, facts: ServerFacts) -> str:
    limit = facts.input_limit
    budget = 512 if limit is None else max(1, min(512, limit[1] - len(PROBE_PROMPT)))
    task = asyncio.ensure_future(check_generate(engine, max_tokens=budget, temperature=1.0, ignore_eos=True))
    await asyncio.sleep(0.3)
    await engine.abort_all()
    try:
        response = await asyncio.wait_for(task, timeout=60)
    except EngineAbortedError:
        return "an aborted request finished with finish_reason abort"
    raise CheckFailed(f"the request finished {response['choices'][0]['finish_reason']!r} despite abort_all")


async def _routed_to(engine: SGLangClient, key: str) -> str | None:
    """The worker the router named for one one-token probe carrying routing key `key`."""
    request = to_sglang_request(probe_body(max_tokens=1), settings=KEYED, session_id=key, first_turn=True)
    return (await engine.generate_routed(request)).worker


async def _routing(engine: SGLangClient, facts: ServerFacts) -> str:
    if not facts.behind_router:
        raise CheckSkipped("not a router (neither /workers nor /list_workers listed workers)")
    same = [await _routed_to(engine, "vf-sglang-check-same-key") for _ in range(SAME_KEY_PROBES)]
    if None in same:
        raise CheckSkipped(f"the router names no worker ({ROUTED_WORKER_HEADER}): where a key went cannot be seen")
    workers = sorted(set(same), key=same.index)
    _expect(len(workers) == 1, (
        f"one X-SMG-Routing-Key went to {len(workers)} workers in {SAME_KEY_PROBES} requests "
        f"({', '.join(f'{w} ×{same.count(w)}' for w in workers)}): the router does not route by key (round_robin, "
        "random, ...): start it with --policy consistent_hashing"))
    listed = len(facts.topology.workers) if facts.topology is not None else 1
    if listed < 2:
        return f"one key → one worker ({SAME_KEY_PROBES}/{SAME_KEY_PROBES}); one worker listed: spread not checked"
    seen = set(workers)
    for index in range(SPREAD_PROBES):
        seen.add(await _routed_to(engine, f"vf-sglang-check-key-{index}"))
        if len(seen) > 1:
            break
    _expect(len(seen) > 1, f"{SPREAD_PROBES + 1} different keys all went to {workers[0]} of {listed} workers")
    return (f"one key → one worker ({SAME_KEY_PROBES}/{SAME_KEY_PROBES}); different keys → "
            f"{len(seen)} of {listed} workers")


async def _determinism(engine: SGLangClient, facts: ServerFacts) -> str:
    if not facts.deterministic:
        raise CheckSkipped(NOT_DETERMINISTIC)
    first = await check_generate(engine, max_tokens=16, temperature=0.8, seed=1234)
    second = await check_generate(engine, max_tokens=16, temperature=0.8, seed=1234)
    _expect(first["choices"][0]["token_ids"] == second["choices"][0]["token_ids"], "same seed, different tokens")
    return "same seed, same tokens"


def _expect(condition: object, detail: str) -> None:
    if not condition:
        raise CheckFailed(detail)


Check = Callable[[SGLangClient, ServerFacts], Awaitable[str]]
CHECKS: dict[str, Check] = {
    "logprobs returned and finite": _logprobs,
    "ids = logprob ids": _ids,
    "stop ids honoured": _stop_ids,
    "finish reasons known": _finish_reasons,
    "abort reported as abort": _abort,
    ROUTING_CHECK: _routing,
    "same seed, same tokens": _determinism,
}


async def run_check(name: str, engine: SGLangClient, facts: ServerFacts, *, required: bool = True) -> CheckResult:
    try:
        return CheckResult(name, "pass", await CHECKS[name](engine, facts), required)
    except CheckSkipped as skip:
        return CheckResult(name, "skip", str(skip), required)
    except (CheckFailed, VfSglangError) as exc:
        return CheckResult(name, "fail", f"{type(exc).__name__}: {exc}", required)
    except Exception as exc:  # a check that breaks is that check's failure; the table goes on
        return CheckResult(name, "fail", f"unexpected {type(exc).__name__}: {exc}", required)


async def routing_check(engine: SGLangClient, facts: ServerFacts, policy: str | None) -> CheckResult:
    """The routing check as `--router-policy` asks: required for a keyed policy, informs
    without one (the detail says what to pass), skipped for one that sends no key."""
    if policy is not None and policy not in ROUTING_KEY_POLICIES:
        return CheckResult(ROUTING_CHECK, "skip", f"skipped: --router-policy {policy} sends no routing key",
                           required=False)
    result = await run_check(ROUTING_CHECK, engine, facts, required=policy is not None)
    if policy is None and result.status == "pass":
        return CheckResult(result.name, "pass", f"{result.detail}: the router routes by key; pass "
                           "--router-policy consistent_hashing to the jobs", required=False)
    return result


def retries_check(facts: ServerFacts) -> CheckResult | None:
    """Behind a router, what its retries do to the per-turn attempt budget (informs only)."""
    if not facts.behind_router:
        return None
    attempts, calls = ENGINE_ATTEMPTS_PER_TURN, ENGINE_ATTEMPTS_PER_TURN * SMG_DEFAULT_RETRIES
    return CheckResult("router retries", "skip", (
        f"not readable from the router: the adapter's {attempts} engine attempts per model turn hold only when "
        f"smg runs with {ROUTER_RETRY_FLAG} (its default --retry-max-retries {SMG_DEFAULT_RETRIES} makes them up "
        f"to {calls} worker calls; docs/router.md)"), required=False)


def context_check(facts: ServerFacts, model_max: int | None, *, tokenizer: str | None = None) -> CheckResult:
    """The server's input limit against the model's `max_position_embeddings` (informs only)."""
    name, limit = "input limit vs model", facts.input_limit
    if limit is None:
        return CheckResult(name, "skip", "skipped: /server_info reports neither context_length nor max_req_input_len",
                           required=False)
    key, served = limit
    if model_max is None:
        why = ("pass --tokenizer DIR (the model's checkpoint directory) to compare" if tokenizer is None
               else f"{tokenizer}/config.json has no max_position_embeddings to compare")
        return CheckResult(name, "skip", f"server {key} {served}; {why}", required=False)
    status: Status = "pass" if served <= model_max else "fail"
    return CheckResult(name, status, f"server {key} {served} tokens, model {model_max}", required=False)


async def run_checks(engine: SGLangClient, facts: ServerFacts, *, model_max: int | None = None,
                     tokenizer: str | None = None, router_policy: str | None = None) -> list[CheckResult]:
    results = [await routing_check(engine, facts, router_policy) if name == ROUTING_CHECK
               else await run_check(name, engine, facts) for name in CHECKS]
    extra = [retries_check(facts), context_check(facts, model_max, tokenizer=tokenizer)]
    return [*results, *(row for row in extra if row is not None)]
