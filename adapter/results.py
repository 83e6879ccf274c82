"""Presenting a finished job: the per-group table and the JSONL file of samples.

Consumes groups of Miles-shaped samples (`reward`, `status`, `group_index`, `index`,
`response_length`, `to_dict()`; a multi-branch rollout's samples nested as one list entry);
emits text and a file (one flat row per sample). No I/O besides the file written.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

from adapter.samples import flatten


def write_jsonl(path: Path, groups: list[list[Any]]) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [sample.to_dict() for group in groups for sample in flatten(group)]
    with path.open("w") as handle:
        for row in rows:
            handle.write(json.dumps(row, default=str) + "\n")
    return len(rows)


def _scalar(reward: Any) -> float:
    return float(reward["reward"]) if isinstance(reward, dict) else float(reward)


def format_table(groups: list[list[Any]]) -> str:
    """group | sample | reward | status | response tokens, then each group's mean/std."""
    lines = [f"{'group':>5}  {'sample':>6}  {'reward':>7}  {'status':<10}  {'resp.tokens':>11}"]
    for entries in groups:
        group = list(flatten(entries))  # a multi-branch rollout's samples are nested
        rewards = [_scalar(sample.reward) for sample in group]
        for sample, reward in zip(group, rewards, strict=True):
            lines.append(f"{sample.group_index:>5}  {sample.index:>6}  {reward:>7.3f}  "
                         f"{sample.status.value:<10}  {sample.response_length:>11}")
        std = statistics.pstdev(rewards) if len(rewards) > 1 else 0.0
        lines.append(f"{'':>5}  group {group[0].group_index} reward mean {statistics.fmean(rewards):.3f} "
                     f"std {std:.3f}" + ("" if math.isfinite(std) else " (!)"))
    return "\n".join(lines)
