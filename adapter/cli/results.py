"""Presenting a finished job: the per-group table and the JSONL file of samples.

Consumes groups of Miles-shaped samples (`reward`, `status`, `group_index`, `metadata`,
`response_length`, `to_dict()`; a multi-branch rollout's samples nested as one list entry);
emits text and a file (one flat row per sample), and the summary of a batch's dropped groups
(from its `rollout/drop/<reason>` metrics). No I/O besides the file written.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from adapter.samples.conversion import flatten


def in_task_order(groups: list[list[Any]]) -> list[list[Any]]:
    """The groups of a CLI job in taskset order (stable for a task sampled twice), renumbered:
    `group_index` is the group's place and `index` runs consecutively, so two seeded runs write
    the same file. (The orchestrator numbers groups as they finish, as Miles' train loop does.)"""
    ordered = sorted(groups, key=lambda group: task_index(next(flatten(group))))
    index = 0
    for position, group in enumerate(ordered):
        for sample in flatten(group):
            sample.group_index, sample.index = position, index
            index += 1
    return ordered


def write_jsonl(path: Path, groups: list[list[Any]]) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [sample.to_dict() for group in groups for sample in flatten(group)]
    with path.open("w") as handle:
        for row in rows:
            handle.write(json.dumps(row, default=str) + "\n")
    return len(rows)


# Train metrics count each drop reason under this prefix (adapter.rollout.orchestrator).
DROP_METRIC = "rollout/drop/"


def dropped_groups(metrics: Mapping[str, float]) -> dict[str, int]:
    """Groups dropped (and replaced) during a train batch, by reason, from its metrics."""
    return {name.removeprefix(DROP_METRIC): int(count) for name, count in sorted(metrics.items())
            if name.startswith(DROP_METRIC) and count}


def format_drops(drops: Mapping[str, int], details: Mapping[str, str] | None = None) -> str:
    """`; 3 groups dropped and replaced (trace_error ×2, episode_error ×1)`, or "" for none; with
    `details` (per reason, the last dropped group's), each reason names it: `trace_dropped ×1: trace
    'a1' dropped by Verifiers: judge: ...`."""
    if not drops:
        return ""
    total = sum(drops.values())
    details = details or {}
    reasons = ", ".join(f"{reason} ×{count}" + (f": {details[reason]}" if details.get(reason) else "")
                        for reason, count in drops.items())
    return f"; {total} group{'s' if total != 1 else ''} dropped and replaced ({reasons})"


def _scalar(reward: Any) -> float:
    return float(reward["reward"]) if isinstance(reward, dict) else float(reward)


def task_index(sample: Any) -> int:
    """The taskset row a sample answers (`metadata["verifiers"]["task_index"]`), else its group."""
    verifiers = (sample.metadata or {}).get("verifiers") or {}
    found = verifiers.get("task_index")
    return int(found) if isinstance(found, int) else int(sample.group_index)


def format_table(groups: list[list[Any]]) -> str:
    """task | sample | reward | status | response tokens, then each group's reward mean/std.

    Groups are listed by task and samples by their place in the group, never in the order the
    groups happened to finish (`group_index`), so a seeded run prints the same table every time."""
    lines = [f"{'task':>5}  {'sample':>6}  {'reward':>7}  {'status':<10}  {'resp.tokens':>11}"]
    flat = [list(flatten(entries)) for entries in groups]  # a multi-branch rollout's samples are nested
    for group in sorted(flat, key=lambda g: task_index(g[0])):
        rewards = [_scalar(sample.reward) for sample in group]
        task = task_index(group[0])
        for place, (sample, reward) in enumerate(zip(group, rewards, strict=True)):
            lines.append(f"{task:>5}  {place:>6}  {reward:>7.3f}  "
                         f"{sample.status.value:<10}  {sample.response_length:>11}")
        std = statistics.pstdev(rewards) if len(rewards) > 1 else 0.0
        lines.append(f"{'':>5}  task {task} group: reward mean {statistics.fmean(rewards):.3f} "
                     f"std {std:.3f}" + ("" if math.isfinite(std) else " (!)"))
    return "\n".join(lines)
