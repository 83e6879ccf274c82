"""Multi-turn checks of a recorded run: the samples against the `/generate` exchanges that made them.

Consumes dumped samples (`Sample.to_dict()` rows) and the run's cassette (`--record DIR`: JSONL
files, `adapter/engine/recording.py`). Emits a list of problems (empty: every rule holds) and the
counts the E2E log prints. Pure, apart from `load_exchanges`.

A sample's tokens are its prompt, then `response_length` tokens under `loss_mask`: runs of 1 are
what the model sampled, runs of 0 what the harness added (tool responses, the next generation
prompt). For every sample the rules are:

* exact prefix: turn k's prompt, as SGLang received it, is turn k-1's prompt + its completion +
  the tokens between (the run of 0 after it); i.e. some recorded exchange has exactly
  `input_ids` = the sample's tokens up to the k-th run of 1 and `output_ids` = that run;
* the loss mask covers exactly the model's tokens: each run of 1 is one exchange's `output_ids`,
  nothing the harness added is under a 1, and no sampled token is under a 0;
* the radix cache serves later turns: turn k ≥ 2's `meta_info.cached_tokens` ≥ turn k-1's prompt
  length (the engine kept the whole previous prompt).

And over the run: at least `min_multi_turn` of the samples have two or more model turns.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Exchange:
    input_ids: tuple[int, ...]
    output_ids: tuple[int, ...]
    cached_tokens: int | None
    worker: str | None = None  # the router's `x-smg-routed-worker-id` answer header, when routed
    key: str | None = None  # the request's `X-SMG-Routing-Key` (the trace id), when sent


@dataclass(frozen=True)
class TurnReport:
    samples: int
    multi_turn: int  # samples with ≥ 2 model turns
    turns: int  # model turns over all samples
    later_turns_cached: int  # turns ≥ 2 whose cached_tokens covered the previous prompt
    problems: tuple[str, ...]


def exchanges_from(lines: Iterable[str]) -> list[Exchange]:
    """The answered `POST /generate` exchanges of cassette lines (other lines are skipped)."""
    found = []
    for line in lines:
        if not line.strip():
            continue
        row = json.loads(line)
        request, response = row.get("request") or {}, row.get("response") or {}
        if row.get("kind") != "exchange" or request.get("path") != "/generate" or response.get("status") != 200:
            continue
        body, answer = request.get("body") or {}, response.get("body") or {}
        meta = answer.get("meta_info") or {}
        found.append(Exchange(tuple(body.get("input_ids") or ()), tuple(answer.get("output_ids") or ()),
                              meta.get("cached_tokens"), (response.get("headers") or {}).get("x-smg-routed-worker-id"),
                              (request.get("headers") or {}).get("x-smg-routing-key")))
    return found


def load_exchanges(path: Path) -> list[Exchange]:
    """A cassette file, or every `*.jsonl` under a `--record` directory."""
    files = sorted(path.rglob("*.jsonl")) if path.is_dir() else [path]
    return [exchange for file in files for exchange in exchanges_from(file.read_text().splitlines())]


def later_turns(exchanges: Sequence[Exchange]) -> list[tuple[Exchange, Exchange]]:
    """(turn k-1, turn k) pairs of a cassette: exchange k's prompt is exchange k-1's prompt + its
    completion + at least one token more (what the harness added between them)."""
    by_prefix = {e.input_ids + e.output_ids: e for e in exchanges}
    pairs = []
    for exchange in exchanges:
        for cut in range(len(exchange.input_ids) - 1, 0, -1):
            previous = by_prefix.get(exchange.input_ids[:cut])
            if previous is not None:
                pairs.append((previous, exchange))
                break
    return pairs


def runs_of(mask: Sequence[int]) -> list[tuple[int, int, int]]:
    """(value, start, end) of each maximal run of equal values in `mask`."""
    runs: list[tuple[int, int, int]] = []
    start = 0
    for i in range(1, len(mask) + 1):
        if i == len(mask) or mask[i] != mask[start]:
            runs.append((int(mask[start]), start, i))
            start = i
    return runs


def _sample_turns(i: int, sample: Mapping[str, Any], by_turn: Mapping[tuple[tuple[int, ...], tuple[int, ...]], Exchange]
                  ) -> tuple[int, int, list[str]]:
    """(model turns, later turns served from the cache, problems) of one sample."""
    tokens, mask = list(sample.get("tokens") or []), list(sample.get("loss_mask") or [])
    where = f"sample {i} (group {sample.get('group_index')})"
    if len(mask) != sample.get("response_length") or len(mask) > len(tokens):
        return 0, 0, [f"{where}: loss_mask of {len(mask)} for response_length {sample.get('response_length')} "
                      f"and {len(tokens)} tokens"]
    offset = len(tokens) - len(mask)
    problems, turns, cached, previous_prompt = [], 0, 0, None
    for value, start, end in runs_of(mask):
        if value != 1:
            continue
        prompt, completion = tuple(tokens[: offset + start]), tuple(tokens[offset + start : offset + end])
        exchange = by_turn.get((prompt, completion))
        turns += 1
        if exchange is None:
            problems.append(f"{where}: model turn {turns} ({len(completion)} tokens under 1 after a "
                            f"{len(prompt)}-token prompt) is no recorded exchange: the prompt is not the previous "
                            "turn's prompt + completion + the tokens between, or the mask covers tokens the model "
                            "did not sample")
            previous_prompt = prompt
            continue
        if previous_prompt is not None:
            if exchange.cached_tokens is not None and exchange.cached_tokens >= len(previous_prompt):
                cached += 1
            else:
                problems.append(f"{where}: model turn {turns}: cached_tokens {exchange.cached_tokens} < the previous "
                                f"turn's prompt length {len(previous_prompt)} (the radix cache did not serve it)")
        previous_prompt = prompt
    if turns == 0:
        problems.append(f"{where}: no token under loss_mask 1")
    return turns, cached, problems


def turn_report(samples: Sequence[Mapping[str, Any]], exchanges: Sequence[Exchange], *,
                min_multi_turn: float = 0.0) -> TurnReport:
    by_turn = {(e.input_ids, e.output_ids): e for e in exchanges}
    problems: list[str] = []
    multi = total_turns = total_cached = 0
    for i, sample in enumerate(samples):
        turns, cached, found = _sample_turns(i, sample, by_turn)
        problems += found
        multi += turns >= 2
        total_turns += turns
        total_cached += cached
    if samples and multi < min_multi_turn * len(samples):
        problems.append(f"{multi} of {len(samples)} samples have two or more model turns, expected at least "
                        f"{min_multi_turn:.0%}")
    return TurnReport(len(samples), multi, total_turns, total_cached, tuple(problems))
