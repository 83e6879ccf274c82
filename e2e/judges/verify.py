"""The verify step shared by the CPU and GPU E2E tiers (docs/contract.md §7), per taskset.

Consumes dumped samples (`Sample.to_dict()` rows, one JSON object per line) and an
`Expectation`; emits nothing on success, otherwise `VerificationError` listing every broken
invariant at once. Invariants (those of Miles' own verifiers E2E, which this replaces): the sample count;
`group_index` counts exactly {0: n, 1: n, ..., groups-1: n}; statuses ⊆ {completed, truncated}
with at least one completed; finite scalar rewards; `len(rollout_log_probs) == len(loss_mask)
== response_length` with finite logprobs; the exact reward components; no `error` in
`metadata["verifiers"]`; binary metrics in {0, 1}; finite metrics (code-golf's `latency`); a
minimum number of successes; and per-group sums of group-reward components.

Miles' own dump (`--dump-details DIR` → `DIR/rollout_data/<rollout_id>.pt`, written by
`miles/ray/rollout/debug_data.py:save_debug_rollout_data` as `torch.save({"rollout_id",
"metadata", "samples": [Sample.to_dict(), ...]})`) is checked by `miles_dump_problems` /
`verify_miles_dump` with the same invariants plus what Miles' E2E asserts on it beyond them: the
dump's own `rollout_id`, every sample a dict, and no `error` key at all in
`metadata["verifiers"]` (Miles: `assert "error" not in metadata`). CLI: `--miles-dump PATH`.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class VerificationError(AssertionError):
    """The dumped samples break at least one E2E invariant (all are listed)."""


@dataclass(frozen=True)
class Expectation:
    groups: int
    n: int
    components: frozenset[str]  # the reward components, exactly
    binary_metrics: frozenset[str] = frozenset()  # each in {0, 1} on every sample
    finite_metrics: frozenset[str] = frozenset()  # each present and finite on every sample
    success_metric: str | None = None  # a metric equal to 1 marks a success ...
    success_component: str | None = None  # ... or a reward component equal to 1
    min_successes: int = 0
    group_sums: Mapping[str, float] = field(default_factory=dict)  # component → sum per group


def expectation_for(env_id: str, *, groups: int, n: int, min_successes: int | None = None) -> Expectation:
    """The invariants of each taskset the tiers run (group sums need n ≥ 2)."""
    table: dict[str, dict[str, Any]] = {
        "code-golf-v1": dict(components={"correct", "fastest", "most_concise"}, binary_metrics={"passed"},
                             finite_metrics={"latency"}, success_metric="passed", min_successes=1,
                             group_sums={"fastest": 0.5}),
        "arith-v1": dict(components={"correct"}, binary_metrics={"parsed"}, success_component="correct",
                         min_successes=1),
        "echo-tool-v1": dict(components={"used_tool"}, binary_metrics={"tool_ran"}),
        "group-v1": dict(components={"says_word", "shortest"}, group_sums={"shortest": 0.5}),
    }
    if env_id not in table:
        raise KeyError(f"no E2E expectation for {env_id!r}: known {sorted(table)}")
    spec = dict(table[env_id])
    spec["components"] = frozenset(spec["components"])
    spec["binary_metrics"] = frozenset(spec.get("binary_metrics", ()))
    spec["finite_metrics"] = frozenset(spec.get("finite_metrics", ()))
    if min_successes is not None:
        spec["min_successes"] = min_successes
    return Expectation(groups=groups, n=n, **spec)


def load_samples(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _finite(values: Iterable[Any]) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values)


def _sample_problems(i: int, s: Mapping[str, Any], expect: Expectation) -> list[str]:
    where = f"sample {i} (group {s.get('group_index')})"
    problems = []
    reward = s.get("reward")
    if not _finite([reward]):
        problems.append(f"{where}: reward {reward!r} is not a finite scalar")
    lengths = (len(s.get("rollout_log_probs") or []), len(s.get("loss_mask") or []), s.get("response_length"))
    if len(set(lengths)) != 1:
        problems.append(f"{where}: rollout_log_probs, loss_mask, response_length disagree: {lengths}")
    if not _finite(s.get("rollout_log_probs") or []):
        problems.append(f"{where}: rollout_log_probs hold a non-finite value")
    meta = (s.get("metadata") or {}).get("verifiers") or {}
    components = set(meta.get("rewards") or {})
    if components != expect.components:
        problems.append(f"{where}: reward components {sorted(components)} != {sorted(expect.components)}")
    metrics = meta.get("metrics") or {}
    for name in sorted(expect.binary_metrics):
        if metrics.get(name) not in (0, 1):
            problems.append(f"{where}: metric {name!r} is {metrics.get(name)!r}, expected 0 or 1")
    for name in sorted(expect.finite_metrics):
        if not _finite([metrics.get(name)]):
            problems.append(f"{where}: metric {name!r} is {metrics.get(name)!r}, expected a finite number")
    for key in ("error", "conversion_error"):
        if meta.get(key) is not None:
            problems.append(f"{where}: metadata carries an {key}: {meta[key]!r}")
    return problems


def _is_success(s: Mapping[str, Any], expect: Expectation) -> bool:
    meta = (s.get("metadata") or {}).get("verifiers") or {}
    if expect.success_metric:
        return (meta.get("metrics") or {}).get(expect.success_metric) == 1
    if expect.success_component:
        return (meta.get("rewards") or {}).get(expect.success_component) == 1
    return False


def problems(samples: list[Mapping[str, Any]], expect: Expectation) -> list[str]:
    found: list[str] = []
    total = expect.groups * expect.n
    if len(samples) != total:
        found.append(f"{len(samples)} samples, expected {expect.groups} groups × {expect.n} = {total}")
    sizes = Counter(s.get("group_index") for s in samples)
    expected_sizes = {group: expect.n for group in range(expect.groups)}
    if dict(sizes) != expected_sizes:
        shown = dict(sorted(sizes.items(), key=str))
        found.append(f"group_index counts {shown}, expected {expected_sizes}")
    statuses = Counter(s.get("status") for s in samples)
    if set(statuses) - {"completed", "truncated"}:
        found.append(f"statuses {dict(statuses)}: only completed/truncated are allowed")
    if not statuses.get("completed"):
        found.append(f"no completed sample (statuses {dict(statuses)})")
    for i, sample in enumerate(samples):
        found += _sample_problems(i, sample, expect)
    successes = sum(_is_success(s, expect) for s in samples)
    if successes < expect.min_successes:
        found.append(f"{successes} successes, expected at least {expect.min_successes}")
    sums: dict[Any, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for s in samples:
        for name in expect.group_sums:
            rewards = ((s.get("metadata") or {}).get("verifiers") or {}).get("rewards") or {}
            sums[s.get("group_index")][name] += float(rewards.get(name, math.nan))
    for group, by_name in sorted(sums.items(), key=lambda kv: str(kv[0])):
        for name, total in by_name.items():
            if not math.isclose(total, expect.group_sums[name], abs_tol=1e-6):
                found.append(f"group {group}: {name!r} sums to {total}, expected {expect.group_sums[name]}")
    return found


def verify(samples: list[Mapping[str, Any]], expect: Expectation) -> None:
    _raise(problems(samples, expect))


def _raise(broken: list[str], what: str = "E2E verification") -> None:
    if broken:
        raise VerificationError(f"{what} failed:\n" + "\n".join(f"- {p}" for p in broken))


def load_miles_dump(path: Path) -> Any:
    """Miles' `rollout_data/<id>.pt` as torch wrote it (pickled dicts: `weights_only=False`, as Miles
    itself loads it in `_load_rollout_data_file`)."""
    import torch

    return torch.load(path, weights_only=False)


def miles_dump_problems(payload: Any, expect: Expectation, *, rollout_id: int = 0) -> list[str]:
    """Every broken invariant of a Miles rollout dump: its shape, then `problems` on its samples."""
    if not isinstance(payload, Mapping) or not isinstance(payload.get("samples"), list):
        keys = sorted(payload) if isinstance(payload, Mapping) else type(payload).__name__
        return [f"not a Miles rollout dump (a dict with a 'samples' list): got {keys}"]
    found = []
    if payload.get("rollout_id") != rollout_id:
        found.append(f"the dump's rollout_id is {payload.get('rollout_id')!r}, expected {rollout_id}")
    samples = payload["samples"]
    not_dicts = [i for i, s in enumerate(samples) if not isinstance(s, Mapping)]
    if not_dicts:
        return [*found, f"samples {not_dicts} are not Sample.to_dict() dicts"]
    for i, s in enumerate(samples):
        meta = (s.get("metadata") or {}).get("verifiers") or {}
        if "error" in meta:  # Miles' E2E: the key itself must be absent, even with a None value
            found.append(f"sample {i} (group {s.get('group_index')}): metadata['verifiers'] has an 'error' key: "
                         f"{meta['error']!r}")
    return found + problems(samples, expect)


def verify_miles_dump(path: Path, expect: Expectation, *, rollout_id: int = 0) -> list[Mapping[str, Any]]:
    """The dump's samples, or `VerificationError` listing every broken invariant."""
    payload = load_miles_dump(path)
    _raise(miles_dump_problems(payload, expect, rollout_id=rollout_id), f"Miles dump {path} verification")
    return list(payload["samples"])


def _verify_turns(samples: list[Mapping[str, Any]], cassette: Path, min_multi_turn: float) -> None:
    from e2e.judges.turns import load_exchanges, turn_report

    report = turn_report(samples, load_exchanges(cassette), min_multi_turn=min_multi_turn)
    print(f"turns: {report.multi_turn} of {report.samples} samples multi-turn, {report.turns} model turns, "
          f"{report.later_turns_cached} later turns served from the radix cache (cassette {cassette})")
    _raise(list(report.problems), "multi-turn verification")


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m e2e.judges.verify", description="verify dumped E2E samples")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--samples", type=Path, help="our JSONL (one Sample.to_dict() per line)")
    source.add_argument("--miles-dump", type=Path, help="Miles' --dump-details DIR/rollout_data/<id>.pt")
    parser.add_argument("--rollout-id", type=int, default=0, help="--miles-dump: the rollout the dump must be")
    parser.add_argument("--env", required=True, help="taskset id, e.g. code-golf-v1")
    parser.add_argument("--groups", type=int, required=True)
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--cassette", type=Path, help="--samples: the run's --record directory (or one cassette): "
                        "check every model turn against the exchanges that made it (e2e/judges/turns.py)")
    parser.add_argument("--min-multi-turn", type=float, default=0.0,
                        help="--cassette: the least share of samples with two or more model turns")
    args = parser.parse_args(argv)
    expect = expectation_for(args.env, groups=args.groups, n=args.n)
    try:
        if args.miles_dump is not None:
            samples = verify_miles_dump(args.miles_dump, expect, rollout_id=args.rollout_id)
        else:
            samples = load_samples(args.samples)
            verify(samples, expect)
            if args.cassette is not None:
                _verify_turns(samples, args.cassette, args.min_multi_turn)
    except VerificationError as exc:
        print(exc)
        return 1
    where = f" in Miles' dump {args.miles_dump}" if args.miles_dump is not None else ""
    print(f"verified {len(samples)} samples of {args.env} ({args.groups} groups × {args.n}){where}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
