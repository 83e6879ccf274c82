"""A `/generate` body (SGLang 0.5's `GenerateReqInput`) → validated `GenerateRequest` jobs.

Consumes: the decoded JSON body, the tokenizer (for `text` prompts), the model's context length
and vocabulary size. Emits: a `GenerateRequest` (one `GenerateJob` per prompt, whether the
body was batched, the logprob flags), or `BadRequestError` / `ContextLengthError` (HTTP 400).

Prompts: `input_ids` (list of ids, or a list of such lists for a batch) or `text` (string, or
list of strings), exactly one of the two. `sampling_params` is one object for every prompt or,
in a batch, a list with one per prompt. `rid` is a string (a list in a batch); absent, a fresh
hex id. Fields asking for what this engine does not do are refused when set to a non-default
value (`stream`, `lora_path`, `top_logprobs_num`, `token_ids_logprob`, `return_hidden_states`,
`input_embeds`, multimodal data); scheduling and bookkeeping fields (`priority`, `extra_key`,
`logprob_start_len`, `log_metrics`, `custom_labels`, ...) are accepted and have no effect.
A prompt must leave room in the context: `len(prompt) + max_new_tokens ≤ context length`.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from adapter.reference.errors import BadRequestError, ContextLengthError
from adapter.reference.params import SamplingParams, parse_sampling_params

UNSUPPORTED_FIELDS: dict[str, Any] = {
    "stream": False,
    "lora_path": None,
    "lora_id": None,
    "top_logprobs_num": 0,
    "token_ids_logprob": None,
    "return_hidden_states": False,
    "input_embeds": None,
    "image_data": None,
    "video_data": None,
    "audio_data": None,
    "custom_logit_processor": None,
}


@dataclass(frozen=True)
class GenerateJob:
    """One prompt to decode: its request id, prompt ids and sampling parameters."""

    rid: str
    prompt_ids: tuple[int, ...]
    params: SamplingParams


@dataclass(frozen=True)
class GenerateRequest:
    """One `/generate` call: `batched` decides whether the response is a list."""

    jobs: tuple[GenerateJob, ...]
    batched: bool
    return_logprob: bool
    return_text_in_logprobs: bool


def _check_unsupported(body: Mapping[str, Any]) -> None:
    for key, neutral in UNSUPPORTED_FIELDS.items():
        value = body.get(key)
        if value is not None and value != neutral and value != []:
            raise BadRequestError(f"{key}={value!r} is not supported by the reference engine: omit it")


def _ids(value: Any, vocab_size: int, where: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not value:
        raise BadRequestError(f"{where} must be a non-empty list of token ids")
    for token in value:
        if isinstance(token, bool) or not isinstance(token, int) or not 0 <= token < vocab_size:
            raise BadRequestError(f"{where} holds {token!r}: token ids are integers in [0, {vocab_size})")
    return tuple(value)


def _prompts(body: Mapping[str, Any], tokenizer: Any, vocab_size: int) -> tuple[list[tuple[int, ...]], bool]:
    has_ids, has_text = body.get("input_ids") is not None, body.get("text") is not None
    if has_ids == has_text:
        raise BadRequestError("send exactly one of input_ids (token ids) and text")
    if has_text:
        text = body["text"]
        texts = [text] if isinstance(text, str) else text
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            raise BadRequestError("text must be a string or a non-empty list of strings")
        encoded = [tuple(tokenizer.encode(t, add_special_tokens=False)) for t in texts]
        return [_ids(list(ids), vocab_size, "text (tokenized)") for ids in encoded], not isinstance(text, str)
    ids = body["input_ids"]
    if isinstance(ids, list) and ids and all(isinstance(item, list) for item in ids):
        return [_ids(item, vocab_size, f"input_ids[{i}]") for i, item in enumerate(ids)], True
    return [_ids(ids, vocab_size, "input_ids")], False


def _per_prompt(value: Any, count: int, name: str, batched: bool) -> list[Any]:
    if batched and isinstance(value, list):
        if len(value) != count:
            raise BadRequestError(f"{name} has {len(value)} entries for {count} prompts")
        return list(value)
    if isinstance(value, list):
        raise BadRequestError(f"{name} must not be a list for a single prompt")
    return [value] * count


def _rids(value: Any, count: int, batched: bool) -> list[str]:
    if value is None:
        return [uuid.uuid4().hex for _ in range(count)]
    rids = _per_prompt(value, count, "rid", batched)
    if len(set(rids)) != len(rids) or not all(isinstance(r, str) and r for r in rids):
        raise BadRequestError("rid must be a non-empty string per prompt (a list in a batch), all different")
    return [str(r) for r in rids]


def _fits(prompt: Sequence[int], params: SamplingParams, context_length: int) -> None:
    if len(prompt) >= context_length:
        raise ContextLengthError(
            f"The input ({len(prompt)} tokens) is longer than the model's maximum context length "
            f"({context_length} tokens)."
        )
    wanted = params.max_new_tokens
    if wanted is not None and len(prompt) + wanted > context_length:
        raise ContextLengthError(
            f"Requested token count exceeds the model's maximum context length of {context_length} "
            f"tokens: {len(prompt)} tokens from the input and {wanted} tokens for the completion. "
            "Reduce max_new_tokens or the prompt."
        )


def _flag(body: Mapping[str, Any], key: str) -> bool:
    value = body.get(key, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise BadRequestError(f"{key} must be true or false, got {value!r}")
    return value


def parse_generate(body: Any, *, tokenizer: Any, context_length: int, vocab_size: int) -> GenerateRequest:
    """Validate one `/generate` body; every refusal names the field and what is accepted."""
    if not isinstance(body, Mapping):
        raise BadRequestError("the /generate body must be a JSON object")
    _check_unsupported(body)
    prompts, batched = _prompts(body, tokenizer, vocab_size)
    raw_params = _per_prompt(body.get("sampling_params"), len(prompts), "sampling_params", batched)
    params = [parse_sampling_params(raw, tokenizer=tokenizer, vocab_size=vocab_size) for raw in raw_params]
    rids = _rids(body.get("rid"), len(prompts), batched)
    for prompt, sampling in zip(prompts, params, strict=True):
        _fits(prompt, sampling, context_length)
    jobs = tuple(GenerateJob(r, p, s) for r, p, s in zip(rids, prompts, params, strict=True))
    return GenerateRequest(
        jobs=jobs,
        batched=batched,
        return_logprob=_flag(body, "return_logprob"),
        return_text_in_logprobs=_flag(body, "return_text_in_logprobs"),
    )
