"""The reference engine's decode loop: one request, one stream, a KV cache, SGLang's stop rules.

Consumes: a loaded causal LM and tokenizer, a prompt (token ids), validated `SamplingParams`
and an abort flag (`threading.Event`, set by `/abort_request`). Emits: a `Completion` with
the sampled ids, their logprobs, SGLang's finish reason and the `text` field.

Rules mirrored from SGLang 0.5 (`Req.check_finished`), checked after every sampled token in
this order: abort → `{"type": "abort", "message", "status_code": None, "err_type": None}`; `max_new_tokens` reached →
`{"type": "length", "length": max_new_tokens}`; a stop token (`stop_token_ids` plus the
model's eos ids, all skipped when `ignore_eos`) → `{"type": "stop", "matched": id}`, the id
kept in `output_ids`; a stop string found in the decoded tail → `{"type": "stop", "matched":
str}`. Before `min_new_tokens` tokens, stop tokens are masked out of the draw (SGLang's
min-new-tokens penalizer) and stop strings are not checked. The abort flag is also read before
the prefill, so a request aborted while queued finishes with no tokens. `text` is decoded with
`skip_special_tokens`; unless `no_stop_trim`, a matched stop token or everything from a
matched stop string on is left out of `text` (never out of `output_ids`).
Not thread-safe: the server serialises calls (one compute lock).
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from adapter.reference.params import SamplingParams
from adapter.reference.sampling import make_generator, mask_tokens, sample_next

ABORT_MESSAGE = "Abort request: aborted by /abort_request"
# SGLang's FINISH_ABORT.to_json() always carries status_code and err_type (None for an abort
# asked for through /abort_request).
ABORTED = {"type": "abort", "message": ABORT_MESSAGE, "status_code": None, "err_type": None}


@dataclass
class Completion:
    """One finished request: ids and logprobs line up one to one."""

    output_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finish_reason: dict[str, Any] = field(default_factory=dict)
    text: str = ""


def eos_token_ids(model: Any, tokenizer: Any) -> frozenset[int]:
    """The model's eos ids (config and generation config) plus the tokenizer's eos."""
    found: set[int] = set()
    for source in (model.config, getattr(model, "generation_config", None)):
        value = getattr(source, "eos_token_id", None)
        found.update([value] if isinstance(value, int) else list(value or []))
    if tokenizer.eos_token_id is not None:
        found.add(int(tokenizer.eos_token_id))
    return frozenset(found)


class Generator:
    """Runs single-stream decoding with a KV cache for one loaded model."""

    def __init__(self, model: Any, tokenizer: Any) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.eos_ids = eos_token_ids(model, tokenizer)
        self.context_length = int(model.config.max_position_embeddings)
        # transformers ≥ 5.x names the cache argument `cache`; earlier ones `past_key_values`
        parameters = inspect.signature(model.forward).parameters
        self._cache_kwarg = "cache" if "cache" in parameters else "past_key_values"

    def _step(self, input_ids: list[int], cache: Any) -> torch.Tensor:
        out = self.model(
            input_ids=torch.tensor([input_ids], dtype=torch.long),
            use_cache=True,
            logits_to_keep=1,
            **{self._cache_kwarg: cache},
        )
        return out.logits[0, -1]

    def generate(self, prompt_ids: Sequence[int], params: SamplingParams, abort: threading.Event) -> Completion:
        """Decode until a finish rule fires. `params.max_new_tokens` None: to the context end."""
        from transformers import DynamicCache

        budget = params.max_new_tokens
        if budget is None:
            budget = max(0, self.context_length - len(prompt_ids))
        stop_ids = frozenset() if params.ignore_eos else params.stop_token_ids | self.eos_ids
        generator = make_generator(params.sampling_seed)
        done = Completion()
        next_input = list(prompt_ids)
        with torch.inference_mode():
            cache = DynamicCache(config=self.model.config)
            finish = self._finish_before_step(done, budget, abort)
            while finish is None:
                logits = self._step(next_input, cache)
                if len(done.output_ids) < params.min_new_tokens:
                    logits = mask_tokens(logits, stop_ids)
                token, logprob = sample_next(logits, params, generator)
                done.output_ids.append(token)
                done.logprobs.append(logprob)
                finish = self._finish_after_step(done, params, budget, stop_ids, abort)
                next_input = [token]
        done.finish_reason = finish
        done.text = self._text(done, params)
        return done

    @staticmethod
    def _finish_before_step(done: Completion, budget: int, abort: threading.Event) -> dict[str, Any] | None:
        if abort.is_set():
            return dict(ABORTED)
        if budget <= 0:
            return {"type": "length", "length": budget}
        return None

    def _finish_after_step(
        self,
        done: Completion,
        params: SamplingParams,
        budget: int,
        stop_ids: frozenset[int],
        abort: threading.Event,
    ) -> dict[str, Any] | None:
        if abort.is_set():
            return dict(ABORTED)
        if len(done.output_ids) >= budget:
            return {"type": "length", "length": budget}
        last = done.output_ids[-1]
        if last in stop_ids:
            return {"type": "stop", "matched": last}
        if params.stop and len(done.output_ids) >= params.min_new_tokens:
            return self._stop_string(done.output_ids, params.stop)
        return None

    def _stop_string(self, output_ids: list[int], stops: tuple[str, ...]) -> dict[str, Any] | None:
        # every token decodes to at least one character, so this tail holds any fresh match
        longest = max(len(s) for s in stops)
        tail = self.tokenizer.decode(output_ids[-(longest + 1) :], skip_special_tokens=False)
        for stop in stops:
            if stop in tail:
                return {"type": "stop", "matched": stop}
        return None

    def _text(self, done: Completion, params: SamplingParams) -> str:
        ids = done.output_ids
        matched = done.finish_reason.get("matched") if done.finish_reason.get("type") == "stop" else None
        if isinstance(matched, int) and not params.no_stop_trim:
            ids = ids[:-1]
        text = str(self.tokenizer.decode(ids, skip_special_tokens=params.skip_special_tokens))
        if isinstance(matched, str) and not params.no_stop_trim:
            cut = text.find(matched)
            text = text[:cut] if cut >= 0 else text
        return text
