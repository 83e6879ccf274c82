"""What the miles lane asserts about what real Miles ingested: its debug dump, its converted
batch (as the stand-in actor received it) and the metrics it logged. Pure functions over plain
data; `problems(...)` lists every breach (empty = pass).

Per rollout id `r` of the run:
  * the dump `rollout_<r>.pt` (Miles' `_save_debug_rollout_data`) holds `rollout_id == r` and
    exactly `rollout_batch_size × n_samples_per_prompt` samples, in groups of n consecutive
    samples sharing one `group_index` (distinct across the run);
  * every dumped sample: `len(loss_mask) == len(rollout_log_probs) == response_length`,
    `len(tokens) > response_length`, logprobs finite and ≤ 0, a routing key, the engine's
    weight version on every sample, a `verifiers` metadata block, status completed/truncated;
    no `rollout_id` key where the installed Miles has none;
  * every dumped sample's model turns (the loss mask's runs of 1s): one weight version per model
    turn; log-probs only on them (exactly 0.0 on every masked token); between two model turns a
    masked span that holds a tool response (the tokenizer's `<tool_response>` id), and no tool
    response inside a model turn, where the expectation names that id; and at least
    `multi_turn_share` of the run's samples with two or more model turns (a tool case: the tool
    was called and its response fed back);
  * the converted batch (`converted_<r>.json`) has the same count, per-sample token, loss-mask,
    logprob and response lengths as the dump, `raw_reward` equal to the dumped rewards and
    `rewards` equal to GRPO's per-group normalisation of them ((r - mean) / (std + 1e-6), torch's
    unbiased std, as Miles computes it);
  * Miles' logged `perf <r>` metrics include the adapter's own (`verifiers/*`) beside Miles'
    `rollout/*` and `perf/*`, with `verifiers/traces` ≥ the batch's sample count.

A resumed run (`resume_problems`) draws, per rollout, exactly the uninterrupted run's samples: the
same tasks, tokens, loss masks and rewards, and the same group and sample indices.
"""

from __future__ import annotations

import ast
import itertools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from adapter.samples.weight_spans import model_turns  # the loss mask's runs of 1s: the model turns

OUR_METRICS = ("verifiers/reward_mean", "verifiers/error_rate", "verifiers/truncated_rate",
               "verifiers/num_turns_mean", "verifiers/traces")
MILES_METRICS = ("rollout/response_len/mean", "rollout/truncated_ratio", "perf/rollout_time")
ROUTING_FIELDS = ("routing_key", "session_id")
_PERF_LINE = re.compile(r"perf (\d+): (\{.*\})\s*$")
_WRAPPED_NUMBER = re.compile(r"\b(?:np\.\w+|tensor)\(([^()]*)\)")


@dataclass(frozen=True)
class Expectation:
    rollout_batch_size: int
    n_samples_per_prompt: int
    num_rollout: int
    weight_version: str  # what the engine reports (/model_info `weight_version`)
    has_rollout_id: bool  # whether the installed Miles' Sample has the field
    tool_response_id: int | None = None  # the tokenizer's `<tool_response>`: a tool case's masked spans hold it
    multi_turn_share: float = 0.0  # the least share of samples with two or more model turns
    first_rollout: int = 0  # a resumed run's --start-rollout-id: it trains first_rollout..num_rollout-1


def _turn_problems(where: str, s: Mapping[str, Any], expect: Expectation) -> list[str]:
    mask, logprobs = list(s["loss_mask"] or []), list(s["rollout_log_probs"] or [])
    if len(mask) != len(logprobs):
        return []  # named by the length check
    turns = model_turns(mask)
    problems = []
    versions = s.get("weight_versions") or []
    if len(versions) != len(turns):
        problems.append(f"{where}: {len(versions)} weight versions for {len(turns)} model turns")
    off_turn = [i for i, (m, lp) in enumerate(zip(mask, logprobs, strict=True)) if not m and lp != 0.0]
    if off_turn:
        problems.append(f"{where}: log-probs on masked (not sampled) tokens at response offsets {off_turn[:5]}")
    if expect.tool_response_id is not None:
        response = list(s["tokens"])[len(s["tokens"]) - s["response_length"]:]
        gaps = [(end, start) for (_, end), (start, _) in itertools.pairwise(turns)]
        bare = [gap for gap in gaps if expect.tool_response_id not in response[gap[0]:gap[1]]]
        if bare:
            problems.append(f"{where}: masked spans {bare} between model turns hold no tool response")
        trained = [turn for turn in turns if expect.tool_response_id in response[turn[0]:turn[1]]]
        if trained:
            problems.append(f"{where}: model turns {trained} hold a tool response: it would be trained on")
    return problems

def logged_metrics(log_text: str) -> dict[int, dict[str, Any]]:
    """Miles' `perf <rollout_id>: {...}` lines (RolloutManager's `_log_rollout_data`) as dicts."""
    found: dict[int, dict[str, Any]] = {}
    for line in log_text.splitlines():
        match = _PERF_LINE.search(line)
        if match:
            found[int(match.group(1))] = ast.literal_eval(_WRAPPED_NUMBER.sub(r"\1", match.group(2)))
    return found


def grpo_normalised(raw: Sequence[float], n: int) -> list[float]:
    """Miles' grpo rewards: per block of n, minus the mean, over (unbiased std + 1e-6)."""
    out: list[float] = []
    for start in range(0, len(raw), n):
        block = list(raw[start:start + n])
        mean = sum(block) / len(block)
        std = math.sqrt(sum((r - mean) ** 2 for r in block) / (len(block) - 1)) if len(block) > 1 else 0.0
        out += [(r - mean) / (std + 1e-6) for r in block]
    return out


def _sample_problems(where: str, s: Mapping[str, Any], expect: Expectation) -> list[str]:
    problems = []
    n = s["response_length"]
    lengths = (len(s["loss_mask"] or []), len(s["rollout_log_probs"] or []), n)
    if not lengths[0] == lengths[1] == lengths[2]:
        problems.append(f"{where}: loss_mask, rollout_log_probs and response_length disagree: {lengths}")
    if not len(s["tokens"]) > n:
        problems.append(f"{where}: {len(s['tokens'])} tokens for a response of {n}: no prompt left")
    bad = [lp for lp in s["rollout_log_probs"] or [] if not (math.isfinite(lp) and lp <= 0.0)]
    if bad:
        problems.append(f"{where}: logprobs must be finite and <= 0, got {bad[:3]}")
    if not any(s.get(name) for name in ROUTING_FIELDS):
        problems.append(f"{where}: no routing key ({' / '.join(ROUTING_FIELDS)})")
    if ("rollout_id" in s) != expect.has_rollout_id:
        problems.append(f"{where}: rollout_id {'missing' if expect.has_rollout_id else 'present'} for this Miles")
    if s.get("weight_versions") != [expect.weight_version] * len(s.get("weight_versions") or [None]):
        problems.append(f"{where}: weight_versions {s.get('weight_versions')} are not the engine's "
                        f"{expect.weight_version!r}")
    if "verifiers" not in (s.get("metadata") or {}):
        problems.append(f"{where}: no metadata['verifiers']")
    if s["status"] not in ("completed", "truncated"):
        problems.append(f"{where}: status {s['status']!r}")
    return problems


def dump_problems(rollout_id: int, dump: Mapping[str, Any], expect: Expectation) -> list[str]:
    size = expect.rollout_batch_size * expect.n_samples_per_prompt
    samples = dump["samples"]
    problems = []
    if dump.get("rollout_id") != rollout_id:
        problems.append(f"dump {rollout_id}: rollout_id {dump.get('rollout_id')}")
    if len(samples) != size:
        problems.append(f"dump {rollout_id}: {len(samples)} samples, expected {expect.rollout_batch_size} x "
                        f"{expect.n_samples_per_prompt} = {size}")
    n = expect.n_samples_per_prompt
    for start in range(0, len(samples), n):
        ids = {s["group_index"] for s in samples[start:start + n]}
        if len(ids) != 1:
            problems.append(f"dump {rollout_id}: samples {start}..{start + n - 1} span group_index {sorted(ids)}")
    for i, s in enumerate(samples):
        problems += _sample_problems(f"dump {rollout_id} sample {i}", s, expect)
        problems += _turn_problems(f"dump {rollout_id} sample {i}", s, expect)
    return problems


def converted_problems(rollout_id: int, dump: Mapping[str, Any], conv: Mapping[str, Any],
                       expect: Expectation) -> list[str]:
    samples = dump["samples"]
    where = f"converted {rollout_id}"
    expected = {
        "tokens": [len(s["tokens"]) for s in samples],
        "response_lengths": [s["response_length"] for s in samples],
        "loss_masks": [len(s["loss_mask"]) for s in samples],
        "rollout_log_probs": [len(s["rollout_log_probs"]) for s in samples],
        "raw_reward": [float(s["reward"]) for s in samples],
        "sample_indices": [s["index"] for s in samples],
    }
    problems = [f"{where}: {key} {conv.get(key)} != the dump's {value}"
                for key, value in expected.items() if conv.get(key) != value]
    if conv.get("loss_masks") != conv.get("response_lengths"):
        problems.append(f"{where}: loss mask lengths {conv.get('loss_masks')} != response lengths")
    grpo = grpo_normalised(expected["raw_reward"], expect.n_samples_per_prompt)
    got = conv.get("rewards") or []
    if len(got) != len(grpo) or any(abs(a - b) > 1e-4 for a, b in zip(got, grpo, strict=False)):
        problems.append(f"{where}: rewards {got} are not GRPO's normalisation {grpo} of {expected['raw_reward']}")
    if not conv.get("rollout_log_probs_finite", False):
        problems.append(f"{where}: rollout_log_probs tensors are not all finite")
    return problems


def metric_problems(rollout_id: int, logged: Mapping[str, Any], expect: Expectation) -> list[str]:
    missing = [k for k in (*OUR_METRICS, *MILES_METRICS) if k not in logged]
    if missing:
        return [f"Miles' logged metrics of rollout {rollout_id} lack {missing}"]
    size = expect.rollout_batch_size * expect.n_samples_per_prompt
    if logged["verifiers/traces"] < size:
        return [f"rollout {rollout_id}: verifiers/traces {logged['verifiers/traces']} < {size} samples trained"]
    return []


def _draw(s: Mapping[str, Any]) -> tuple[Any, ...]:
    meta = (s.get("metadata") or {}).get("verifiers") or {}
    return (meta.get("task_index"), list(s["tokens"]), list(s["loss_mask"] or []), s["reward"])


def resume_problems(rollout_id: int, straight: Mapping[str, Any], resumed: Mapping[str, Any]) -> list[str]:
    """A run resumed at `rollout_id` (from the state saved after rollout_id - 1) against the run
    that went on uninterrupted: the same tasks, token for token (seeded by the task cursor on a
    deterministic engine), with the same rewards, and the same group and sample indices (the
    counters). Compared as sets: the order in which groups finish may differ between runs."""
    where = f"resumed rollout {rollout_id}"
    a, b = straight["samples"], resumed["samples"]
    problems = []
    if sorted(map(repr, map(_draw, a))) != sorted(map(repr, map(_draw, b))):
        problems.append(f"{where}: drew tasks {sorted(_draw(s)[0] for s in b)} (or other tokens or rewards); the "
                        f"uninterrupted run drew {sorted(_draw(s)[0] for s in a)}")
    for key in ("group_index", "index"):
        if sorted(s[key] for s in a) != sorted(s[key] for s in b):
            problems.append(f"{where}: {key} {sorted(s[key] for s in b)}; the uninterrupted run's "
                            f"{sorted(s[key] for s in a)}")
    return problems


def problems(dumps: Mapping[int, Mapping[str, Any]], converted: Mapping[int, Mapping[str, Any]],
             logged: Mapping[int, Mapping[str, Any]], expect: Expectation) -> list[str]:
    """Every breach across the run's rollouts (module docstring)."""
    found: list[str] = []
    for rollout_id in range(expect.first_rollout, expect.num_rollout):
        if rollout_id not in dumps or rollout_id not in converted:
            found.append(f"rollout {rollout_id}: no dump or no converted batch (Miles never trained on it)")
            continue
        found += dump_problems(rollout_id, dumps[rollout_id], expect)
        found += converted_problems(rollout_id, dumps[rollout_id], converted[rollout_id], expect)
        found += metric_problems(rollout_id, logged.get(rollout_id, {}), expect)
    samples = [s for d in dumps.values() for s in d["samples"]]
    groups = [s["group_index"] for s in samples]
    if len(set(groups)) * expect.n_samples_per_prompt != len(groups):
        found.append(f"group_index values repeat across rollouts: {groups}")
    multi = sum(len(model_turns(s["loss_mask"] or [])) >= 2 for s in samples)
    if samples and multi < expect.multi_turn_share * len(samples):
        found.append(f"{multi} of {len(samples)} samples have two or more model turns; the case needs at least "
                     f"{expect.multi_turn_share:.0%}")
    return found
