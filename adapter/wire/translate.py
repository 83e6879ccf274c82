"""Pure translation between Renderers' token-in/token-out wire and SGLang's native `/generate`.

Consumes:
  * a Renderers generate body (`POST /inference/v1/generate`, produced by
    `renderers.client.generate`): `model`, `token_ids`, `sampling_params`, optional
    `features`, `cache_salt`, `priority`; plus the `X-Session-ID` header (the trace id);
  * an SGLang `/generate` output: `output_ids`, `meta_info{id, finish_reason,
    completion_tokens, output_token_logprobs: [[logprob, token_id, text|None], ...]}`.
Emits:
  * `SGLangRequest(payload, headers)` for `POST {sglang}/generate`;
  * the Renderers response body `{"request_id", "choices": [{"token_ids", "logprobs":
    {"content": [{"token": "token_id:<id>", "logprob"}]}, "finish_reason"}]}`, which
    renderers ≥ 0.1.9 validates label by label.

Invariants enforced here (docs/contract.md §2–§3): sampled ids and logprobs are zipped strictly from
the engine's own `output_token_logprobs` (never re-tokenized); every logprob is finite and ≤ 0;
`abort` and unknown finish reasons are typed errors; an exhausted length budget raises
Verifiers' `OverlongPromptError` (a clean truncation). No I/O happens in this module.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any, Protocol

from adapter.config.settings import MILES_LORA_NAME
from adapter.errors import (
    EngineAbortedError,
    FinishReasonError,
    PromptTooLongError,
    UnsupportedRequestError,
    WireFormatError,
)
from adapter.wire.types import (
    EngineOutput,
    GenerateBody,
    MetaInfo,
    logprob_items,
    parse_engine_output,
    parse_generate_body,
)


class WireSettings(Protocol):
    """The trainer options the translation reads, and nothing else (`adapter.config.settings.Settings`
    has them all): the length caps, the stop sequences, special-token skipping, the live LoRA, the
    router policy, and the flag that names it in a refusal."""

    @property
    def rollout_max_prompt_len(self) -> int | None: ...
    @property
    def rollout_max_response_len(self) -> int | None: ...
    @property
    def rollout_max_context_len(self) -> int | None: ...
    @property
    def rollout_stop(self) -> tuple[str, ...] | None: ...
    @property
    def rollout_stop_token_ids(self) -> tuple[int, ...] | None: ...
    @property
    def rollout_skip_special_tokens(self) -> bool: ...
    @property
    def rollout_lora_live(self) -> bool: ...
    @property
    def sglang_router_policy(self) -> str | None: ...
    @property
    def needs_routing_key(self) -> bool: ...
    def flag(self, name: str) -> str: ...

SESSION_ID_HEADER = "X-Session-ID"
ROUTING_KEY_HEADER = "X-SMG-Routing-Key"

# Renderers' sampling keys that SGLang names differently.
RENAMED_KEYS: dict[str, str] = {"max_tokens": "max_new_tokens", "min_tokens": "min_new_tokens", "seed": "sampling_seed"}
# Keys Renderers/Verifiers set that SGLang's SamplingParams does not accept: `logprobs` is
# replaced by `return_logprob`; `routed_experts_prompt_start` only serves vLLM's routing replay,
# which the adapter refuses (validation: --use-rollout-routing-replay).
DROPPED_KEYS = frozenset({"logprobs", "routed_experts_prompt_start", "extra_args"})
# `sampling_params.extra_args` keys Renderers' client sets for itself, and what the bridge does with
# each: `prl_compact_logprobs` (renderers 0.1.13, with logprobs=k+2) asks for the packed head; the
# client accepts the plain per-token `top_logprobs` too, which the bridge answers. Any other key is
# refused, naming it (SGLang has no extra_args).
CLIENT_EXTRA_ARGS = frozenset({"prl_compact_logprobs"})
# The keys SGLang's `SamplingParams(**params)` accepts in every release the schema lane checks
# (sglang 0.5.15 and 0.5.23: `tox -e sglang-schema` proves this set is a subset of each). Any
# other key would make SGLang answer 400 (e.g. Verifiers' `reasoning_effort`): refused here first.
SGLANG_SAMPLING_KEYS = frozenset({
    "max_new_tokens", "min_new_tokens", "stop", "stop_token_ids", "stop_regex", "temperature", "top_p",
    "top_k", "min_p", "frequency_penalty", "presence_penalty", "repetition_penalty", "n", "json_schema",
    "regex", "ebnf", "structural_tag", "ignore_eos", "skip_special_tokens", "spaces_between_special_tokens",
    "no_stop_trim", "custom_params", "stream_interval", "logit_bias", "sampling_seed",
})  # fmt: skip
SGLANG_CHECKED_VERSIONS = ("0.5.15", "0.5.16", "0.5.23")
# Sampling keys the SGLang router (smg 1.13.0, measured: docs/router.md) drops when it re-serializes
# a `/generate` body, so a worker behind it never sees them. `logit_bias` and `stop_regex` change
# what is sampled; `stream_interval` and `spaces_between_special_tokens` only the streaming and the
# detokenized `text` (which the adapter never reads). A request carrying any of them behind a router
# is refused, naming them (`router_dropped_keys`; the bridge decides whether a router is there),
# rather than sampled without them. The adapter itself sends none of them.
ROUTER_DROPPED_KEYS = frozenset({"logit_bias", "stop_regex", "stream_interval", "spaces_between_special_tokens"})
# Finish reasons passed through to Renderers unchanged. `abort` is an error, anything else too.
FINISH_REASONS = frozenset({"stop", "length"})
# log_softmax can round a certain token's logprob to a hair above zero; more is a wrong value.
POSITIVE_LOGPROB_TOLERANCE = 1e-6
TOKEN_LABEL = "token_id:{}"
_CONTENT_KEYS = ("token", "logprob")


@dataclass(frozen=True)
class SGLangRequest:
    """One SGLang call: the JSON `payload` for `POST /generate` and extra HTTP `headers`
    (the routing key; empty when the router policy needs none)."""

    payload: dict[str, Any]
    headers: dict[str, str]


@functools.cache
def overlong_error_class() -> type[Exception]:
    """Verifiers' `OverlongPromptError` where the installed release has one, else ours.
    Imported on first use: `verifiers.v1` costs seconds to import and this module stays pure."""
    import verifiers.v1.errors as verifiers_errors

    return getattr(verifiers_errors, "OverlongPromptError", PromptTooLongError)


def _overlong(prompt_len: int, limit: int, what: str) -> Exception:
    # The wording carries "maximum context length" so Verifiers' TrainClient recognises the
    # relayed 400 as an overlong prompt too (its `model_error` phrase table).
    error_class: Callable[..., Exception] = overlong_error_class()  # Verifiers' or ours: both take status_code
    return error_class(
        f"Prompt length ({prompt_len}) exceeds maximum context length ({limit}): {what}",
        status_code=400,
    )


def routing_headers(session_id: str | None, settings: WireSettings) -> dict[str, str]:
    """The SGLang router's routing header for policies that pin a session to one worker. A
    refusal names the router-policy option as the running command spells it (`settings.flag`)."""
    if not settings.needs_routing_key:
        return {}
    if not session_id:
        flag = settings.flag("sglang_router_policy")
        raise UnsupportedRequestError(
            f"{flag} {settings.sglang_router_policy} routes every request by "
            f"session, but this request has no {SESSION_ID_HEADER} header: send requests "
            "through Verifiers' TrainClient (it sets the header) or use another router policy"
        )
    return {ROUTING_KEY_HEADER: session_id}


def router_dropped_keys(request: SGLangRequest) -> list[str]:
    """The sampling keys of `request` that the SGLang router would drop (`ROUTER_DROPPED_KEYS`)."""
    return sorted(ROUTER_DROPPED_KEYS.intersection(request.payload["sampling_params"]))


def refuse_router_dropped(keys: Sequence[str], router: str) -> UnsupportedRequestError:
    """The refusal of a request whose `keys` the router at `router` would drop."""
    return UnsupportedRequestError(
        f"sampling_params {list(keys)} would be dropped by the SGLang router at {router} (it re-serializes "
        f"/generate bodies without {', '.join(sorted(ROUTER_DROPPED_KEYS))}), so the engine would sample "
        "without them: remove them from the taskset's sampling config, or point the adapter at one "
        "SGLang server instead of the router"
    )


def _merge_stop_ids(renderer_ids: Sequence[int] | None, trainer_ids: Sequence[int] | None) -> list[int]:
    return list(dict.fromkeys([*(renderer_ids or ()), *(trainer_ids or ())]))


def length_budget(prompt_len: int, requested: int | None, settings: WireSettings) -> int | None:
    """`max_new_tokens` for a prompt: the request's (or the trainer's) budget, bounded by the
    context left after the prompt and by the max response length. None means unbounded."""
    budget = requested if requested is not None else settings.rollout_max_response_len
    context = settings.rollout_max_context_len
    if context is not None:
        left = context - prompt_len
        budget = left if budget is None else min(budget, left)
    if budget is not None and settings.rollout_max_response_len is not None:
        budget = min(budget, settings.rollout_max_response_len)
    if budget is not None and budget <= 0:
        raise _overlong(prompt_len, context if context is not None else prompt_len, "no tokens left")
    return budget


def top_logprobs_num(body: GenerateBody) -> int | None:
    """SGLang's `top_logprobs_num` for a request: its `logprobs` when that asks for more than the
    sampled token's own (an int > 1: renderers 0.1.13 sends k+2 for a head of k), else None."""
    asked = body.sampling_params.logprobs
    return asked if isinstance(asked, int) and not isinstance(asked, bool) and asked > 1 else None


def _refuse_unknown_extra_args(extra: Mapping[str, Any] | None) -> None:
    unknown = sorted(set(extra or ()) - CLIENT_EXTRA_ARGS)
    if unknown:
        raise UnsupportedRequestError(
            f"sampling_params.extra_args {unknown} are not understood (SGLang has no extra_args; the bridge "
            f"knows the keys Renderers' client sets itself: {sorted(CLIENT_EXTRA_ARGS)}): remove them from the "
            "taskset's sampling config"
        )


def _sampling_params(body: GenerateBody, prompt_len: int, settings: WireSettings) -> dict[str, Any]:
    incoming = body.sampling_params
    _refuse_unknown_extra_args(incoming.extra_args)
    params: dict[str, Any] = {}
    for key, value in incoming.model_dump(exclude_unset=True).items():
        if key not in DROPPED_KEYS:
            params[RENAMED_KEYS.get(key, key)] = value
    unknown = sorted(set(params) - SGLANG_SAMPLING_KEYS)
    if unknown:
        raise UnsupportedRequestError(
            f"sampling_params {unknown} are not SGLang sampling parameters (SamplingParams of sglang "
            f"{', '.join(SGLANG_CHECKED_VERSIONS[:-1])} and {SGLANG_CHECKED_VERSIONS[-1]} refuses them with "
            "HTTP 400): remove them from the taskset's sampling config"
        )
    if not params.get("stop") and settings.rollout_stop:
        params["stop"] = list(settings.rollout_stop)
    params["stop_token_ids"] = _merge_stop_ids(incoming.stop_token_ids, settings.rollout_stop_token_ids)
    params["skip_special_tokens"] = settings.rollout_skip_special_tokens
    params["no_stop_trim"] = True
    params["n"] = 1
    budget = length_budget(prompt_len, params.pop("max_new_tokens", None), settings)
    if budget is not None:
        params["max_new_tokens"] = budget
        # SGLang refuses min_new_tokens > max_new_tokens: a budget cut by the context or the
        # max response length lowers the floor with it.
        if isinstance(params.get("min_new_tokens"), int) and params["min_new_tokens"] > budget:
            params["min_new_tokens"] = budget
    return params


def to_sglang_request(
    body: Mapping[str, Any] | GenerateBody,
    *,
    settings: WireSettings,
    session_id: str | None,
    first_turn: bool,
) -> SGLangRequest:
    """Translate one Renderers generate body (a dict, validated here into `GenerateBody`, or
    the model itself). `first_turn` is True for a session's first request and for requests
    with no session id: the trainer's max prompt length applies to those only (later turns
    are bounded by the context length). Refusals name options by `settings.flag`."""
    body = parse_generate_body(body)
    if body.features:
        raise UnsupportedRequestError(
            "multimodal `features` are not supported: the adapter serves text-only renderers; "
            "use a text model, or drop image inputs from the taskset"
        )
    prompt = body.token_ids
    max_prompt = settings.rollout_max_prompt_len
    if first_turn and max_prompt is not None and len(prompt) > max_prompt:
        raise _overlong(len(prompt), max_prompt, "--rollout-max-prompt-len on the first turn")
    payload: dict[str, Any] = {
        "input_ids": prompt,
        "sampling_params": _sampling_params(body, len(prompt), settings),
        "return_logprob": True,
    }
    top = top_logprobs_num(body)
    if top is not None:
        payload["top_logprobs_num"] = top
    if settings.rollout_lora_live:
        payload["lora_path"] = MILES_LORA_NAME
    if body.priority is not None:
        payload["priority"] = body.priority
    if body.cache_salt is not None:
        payload["extra_key"] = body.cache_salt
    return SGLangRequest(payload=payload, headers=routing_headers(session_id, settings))


def finish_reason_of(meta: MetaInfo) -> str:
    """SGLang's finish reason (`{"type": ...}` or a bare string) as Renderers' string.
    `abort` raises `EngineAbortedError`; missing or unknown values raise `FinishReasonError`."""
    raw = meta.finish_reason
    kind = raw.get("type") if isinstance(raw, Mapping) else raw
    if kind == "abort":
        message = raw.get("message") if isinstance(raw, Mapping) else None
        request_id = None if meta.id is None else str(meta.id)
        raise EngineAbortedError(f"engine aborted request {meta.id!r}: {message or 'no message'}",
                                 request_id=request_id)
    if kind is None:
        raise FinishReasonError("engine output has no finish_reason", value=raw)
    if not isinstance(kind, str) or kind not in FINISH_REASONS:
        raise FinishReasonError(
            f"unknown finish_reason {raw!r}: expected one of {sorted(FINISH_REASONS)} or abort",
            value=raw,
        )
    return str(kind)


def sampled_tokens(output: Mapping[str, Any] | EngineOutput) -> tuple[list[int], list[float]]:
    """The sampled ids and their logprobs, zipped strictly from `output_token_logprobs` and
    cross-checked against `output_ids` and `completion_tokens` when the engine sends them.
    Every per-token pass runs at C level (`map(itemgetter)`, pydantic-core, `max`)."""
    output = parse_engine_output(output)
    items = output.meta_info.output_token_logprobs
    if items is None:
        raise WireFormatError(
            "meta_info.output_token_logprobs is missing: the /generate call must set "
            "return_logprob=true"
        )
    ids, logprobs = logprob_items(items)
    if logprobs and max(logprobs) > POSITIVE_LOGPROB_TOLERANCE:
        index = logprobs.index(max(logprobs))
        raise WireFormatError(f"output_token_logprobs[{index}]: logprob {logprobs[index]} is positive")
    output_ids = output.output_ids
    if output_ids is not None and output_ids != ids:
        first = next((i for i, (a, b) in enumerate(zip(output_ids, ids, strict=False)) if a != b), None)
        where = f"first difference at {first}" if first is not None else "lengths differ"
        raise WireFormatError(
            f"output_ids ({len(output_ids)} ids) disagree with output_token_logprobs "
            f"({len(ids)} ids): {where}"
        )
    count = output.meta_info.completion_tokens
    if count is not None and count != len(ids):
        raise WireFormatError(
            f"meta_info.completion_tokens is {count} but {len(ids)} sampled tokens carry logprobs"
        )
    return ids, logprobs


def weight_spans(meta: MetaInfo) -> list[tuple[str, int, int]]:
    """The weights each part of one answer was sampled under, as (version, start, end) over its
    completion indexes: SGLang 0.5.23's `weight_versions` spans (an open end is the output's end),
    else `weight_version` over the whole output, else none; empty spans are left out."""
    output_len = len(meta.output_token_logprobs or ())
    if meta.weight_versions:
        spans = [(str(span.version), span.start or 0, output_len if span.end is None else span.end)
                 for span in meta.weight_versions]
    elif meta.weight_version is not None:
        spans = [(str(meta.weight_version), 0, output_len)]
    else:
        spans = []
    return [span for span in spans if span[1] < span[2]]


def _label_items(ids: Sequence[int], logprobs: Sequence[float]) -> list[dict[str, Any]]:
    """[{"token": "token_id:<id>", "logprob": lp}, ...] built by C-level map/zip/dict calls."""
    return list(map(dict, map(zip, repeat(_CONTENT_KEYS), zip(map(TOKEN_LABEL.format, ids), logprobs, strict=True))))


def top_candidates(meta: MetaInfo, count: int, sampled: int) -> list[list[dict[str, Any]]]:
    """Each sampled token's `count` most likely candidates, as Renderers' `top_logprobs` entries,
    from `meta_info.output_top_logprobs`; a `WireFormatError` naming the field when the engine sent
    fewer positions or candidates than asked, or a bad one (never an answer with the head missing)."""
    rows = meta.output_top_logprobs
    if rows is None or len(rows) != sampled:
        got = "none" if rows is None else f"{len(rows)} positions"
        raise WireFormatError(f"meta_info.output_top_logprobs: {count} candidates per token were asked "
                              f"(logprobs={count}) for {sampled} sampled tokens, the engine sent {got}")
    out = []
    for position, row in enumerate(rows):
        if row is None or len(row) < count:
            raise WireFormatError(f"meta_info.output_top_logprobs[{position}]: {count} candidates asked "
                                  f"(logprobs={count}), got {0 if row is None else len(row)}")
        try:
            ids, logprobs = logprob_items(row[:count])
        except WireFormatError as exc:
            raise WireFormatError(f"meta_info.output_top_logprobs[{position}]: {exc}") from exc
        if max(logprobs) > POSITIVE_LOGPROB_TOLERANCE:
            raise WireFormatError(f"meta_info.output_top_logprobs[{position}]: logprob {max(logprobs)} is positive")
        out.append(_label_items(ids, logprobs))
    return out


def to_renderers_response(output: Any, *, request_id: str | None = None,
                          top_logprobs: int | None = None) -> dict[str, Any]:
    """Translate one SGLang `/generate` output into the Renderers generate response; with
    `top_logprobs` (the request's `top_logprobs_num`), each token carries that many candidates."""
    model = parse_engine_output(output)
    meta = model.meta_info
    finish = finish_reason_of(meta)
    ids, logprobs = sampled_tokens(model)
    if finish == "stop" and not ids:
        raise WireFormatError("finish_reason is stop but no token was sampled: a stop needs its stop token")
    content = _label_items(ids, logprobs)
    if top_logprobs is not None:
        for item, candidates in zip(content, top_candidates(meta, top_logprobs, len(ids)), strict=True):
            item["top_logprobs"] = candidates
    return {
        "request_id": str(meta.id or request_id or uuid.uuid4().hex),
        "choices": [
            {
                "index": 0,
                "token_ids": ids,
                "logprobs": {"content": content},
                "finish_reason": finish,
                # renderers 0.1.13 on returns them and Verifiers records them per turn; older clients ignore them
                "weight_versions": [{"version": v, "start": a, "end": b} for v, a, b in weight_spans(meta)],
            }
        ],
    }
