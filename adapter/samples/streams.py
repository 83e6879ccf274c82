"""A branch's streams → a Sample's token columns, at C speed for lists and numpy arrays alike (pure).

Verifiers up to 0.4.0 holds a branch's `token_ids`, `sampled_mask` and `logprobs` as Python lists;
0.4.1 on holds numpy arrays (int32, bool, float32). Either way the columns come out as plain Python
ints and floats (Miles dumps samples as JSON and builds tensors from them: never numpy scalars):

    tokens             the whole branch
    start              the first sampled position (len(tokens) when none is sampled)
    loss_mask          0/1 from `start` on
    rollout_log_probs  from `start` on, 0.0 where not sampled (Verifiers stores 0.0 there already;
                       a stream that does not is zeroed)

Lists go through C-level builtins (`bytes`, `map`, `compress`), arrays through numpy's vectorised
operations and one `tolist()` per column: no Python loop per token on either path
(`benchmarks/conversion.py` measures both).
"""

from __future__ import annotations

import operator
from collections.abc import Sized
from dataclasses import dataclass
from itertools import compress
from typing import Any

from adapter.errors import StreamLengthError


@dataclass(frozen=True)
class Columns:
    tokens: list[int]
    start: int
    loss_mask: list[int]
    rollout_log_probs: list[float]
    sampled_mask: Any  # the whole branch's, as given: a list of bools or a numpy bool array


def is_array(stream: Any) -> bool:
    return hasattr(stream, "dtype") and hasattr(stream, "tolist")


def columns(token_ids: Any, sampled_mask: Any, logprobs: Any) -> Columns:
    """The Sample columns of one branch (`StreamLengthError` when its streams disagree in length)."""
    if is_array(token_ids) or is_array(sampled_mask) or is_array(logprobs):
        return _from_arrays(token_ids, sampled_mask, logprobs)
    return _from_lists(list(token_ids), list(sampled_mask), list(logprobs))


def _check(tokens: Sized, mask: Sized, logprobs: Sized) -> None:
    if not len(tokens) == len(mask) == len(logprobs):
        raise StreamLengthError((len(tokens), len(mask), len(logprobs)))


def _from_lists(tokens: list[int], mask: list[bool], logprobs: list[float]) -> Columns:
    _check(tokens, mask, logprobs)
    start = mask.index(True) if True in mask else len(tokens)
    values = list(map(float, logprobs[start:]))
    tail = mask[start:]
    if any(compress(values, map(operator.not_, tail))):
        values = [v if m else 0.0 for v, m in zip(values, tail, strict=True)]
    return Columns(tokens, start, list(bytes(tail)), values, mask)  # bytes: bools → 0/1 in one C pass


def _from_arrays(token_ids: Any, sampled_mask: Any, logprobs: Any) -> Columns:
    import numpy as np

    ids, mask, values = np.asarray(token_ids), np.asarray(sampled_mask, dtype=bool), np.asarray(logprobs)
    _check(ids, mask, values)
    start = int(mask.argmax()) if mask.any() else len(mask)
    tail, tail_values = mask[start:], values[start:].astype(np.float64)
    if np.any(tail_values[~tail] != 0.0):
        tail_values = np.where(tail, tail_values, 0.0)
    return Columns(ids.tolist(), start, list(tail.tobytes()), tail_values.tolist(), mask)
