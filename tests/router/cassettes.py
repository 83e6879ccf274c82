"""Reading a run's cassette (`--record DIR`) for what the router did: per routing key, the worker
each `/generate` went to (the request's `x-smg-routing-key`, the answer's `x-smg-routed-worker-id`)."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Call:
    key: str | None
    worker: str | None
    status: int
    prompt_len: int


def exchanges(directory: Path) -> list[dict[str, Any]]:
    (path,) = sorted(directory.glob("*.jsonl"))
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [line for line in lines if line["kind"] == "exchange"]


def generate_calls(directory: Path) -> list[Call]:
    return [Call(e["request"]["headers"].get("x-smg-routing-key"), (e["response"].get("headers") or {}).get(
        "x-smg-routed-worker-id"), e["response"]["status"], len(e["request"]["body"]["input_ids"]))
        for e in exchanges(directory) if e["request"]["path"] == "/generate"]


def by_key(calls: list[Call]) -> dict[str | None, list[Call]]:
    grouped: dict[str | None, list[Call]] = defaultdict(list)
    for call in calls:
        grouped[call.key].append(call)
    return dict(grouped)
