"""SGLang `/generate` outputs in the engine's exact shape (sglang 0.5.23's tokenizer manager).

One function builds them for every test and for the scripted engine, so the shape lives in
one place: top-level `text` and `output_ids`; `meta_info` with `id`, `finish_reason`
(`{"type": "stop", "matched": ...}`, `{"type": "length", "length": n}` or
`{"type": "abort", "message": ..., "status_code": None, "err_type": None}`), `prompt_tokens`,
`completion_tokens`, `cached_tokens`, `reasoning_tokens`, `num_retractions`, `weight_version`,
`e2e_latency`, and with logprobs `input_token_logprobs` (empty: the default logprob_start_len
asks for none), `output_token_logprobs: [[logprob, id, None], ...]` and
`output_token_logprobs_length`, and with `top_logprobs_num` `output_top_logprobs` (per token, that
many `[logprob, id, None]`). `tox -e sglang-schema` checks this shape against the sglang
wheels' own source (conformance/sglang_schema.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def finish_reason(kind: str, ids: Sequence[int], *, message: str = "") -> dict[str, Any] | None:
    if kind == "stop":
        return {"type": "stop", "matched": ids[-1] if ids else None}
    if kind == "length":
        return {"type": "length", "length": len(ids)}
    if kind == "abort":
        return {"type": "abort", "message": message or "Abort request", "status_code": None, "err_type": None}
    return {"type": kind}


def sglang_output(
    ids: Sequence[int],
    logprobs: Sequence[float],
    *,
    finish: str = "stop",
    request_id: str = "sglang-req-0",
    prompt_tokens: int = 0,
    text: str = "",
    weight_version: str = "default",
    top_logprobs_num: int | None = None,
) -> dict[str, Any]:
    output = {
        "text": text,
        "output_ids": list(ids),
        "meta_info": {
            "id": request_id,
            "finish_reason": finish_reason(finish, ids),
            "prompt_tokens": prompt_tokens,
            "completion_tokens": len(ids),
            "cached_tokens": 0,
            "cached_tokens_details": {"device": 0, "host": 0},  # where the cached prefix lived
            "dp_rank": None,  # data-parallel rank: None on a single-rank server
            "reasoning_tokens": 0,
            "num_retractions": 0,
            "weight_version": weight_version,
            "e2e_latency": 0.01,
            "response_sent_to_client_ts": 1.7e9,  # wall-clock time the answer left (0.5.16 on)
            "input_token_logprobs": [],
            "output_token_logprobs": [[lp, i, None] for lp, i in zip(logprobs, ids, strict=True)],
            "output_token_logprobs_length": len(ids),
        },
    }
    if top_logprobs_num:
        output["meta_info"]["output_top_logprobs"] = [top_candidates(i, lp, top_logprobs_num)
                                                      for i, lp in zip(ids, logprobs, strict=True)]
    return output


def top_candidates(token_id: int, logprob: float, count: int) -> list[list[Any]]:
    """`count` candidates `[logprob, id, None]`, most likely first, as SGLang sends them per token
    with `top_logprobs_num`: the sampled token first, then ids beside it, each far less likely
    (their probabilities keep the head's sum below 1)."""
    others = [[min(logprob, 0.0) - 10.0 - rank, (token_id + rank + 1) % 151_000, None] for rank in range(count - 1)]
    return [[logprob, token_id, None], *others]
