"""Shared benchmark helpers: process CPU and RSS (by pid, from /proc), machine load, percentiles,
paired-ratio bootstrap CIs, the served bridge as a subprocess, and the generated-doc writer."""

from __future__ import annotations

import contextlib
import os
import random
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "performance.md"
PROMPT = [151644, 872, 198, 6023, 151645, 198, 151644, 77091, 198]
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int | None = None) -> float:
    """User + system CPU of a process (this one by default, at full resolution)."""
    if pid is None:
        return time.process_time()
    fields = Path(f"/proc/{pid or os.getpid()}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def rss_mb(pid: int | None = None) -> float:
    for line in Path(f"/proc/{pid or os.getpid()}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def machine() -> str:
    load = os.getloadavg()
    return (f"{os.cpu_count()} cores, load average {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} "
            "(1/5/15 min) when the run started; the machine was shared with other work")


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def median_ci(values: Sequence[float], *, draws: int = 2000) -> tuple[float, float, float]:
    """Median of per-round values, with a 95 % bootstrap CI over rounds (seeded: reproducible)."""
    rng = random.Random(0)
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(draws))
    return statistics.median(values), medians[int(0.025 * draws)], medians[int(0.975 * draws) - 1]


def ratio_ci(paths: Sequence[float], raws: Sequence[float]) -> tuple[float, float, float]:
    """Median of per-round ratios path/raw, with a 95 % bootstrap CI over rounds."""
    return median_ci([p / r for p, r in zip(paths, raws, strict=True)])


def added_ci(paths: Sequence[float], floors: Sequence[float]) -> tuple[float, float, float]:
    """Median of per-round differences path − floor (seconds), with a 95 % bootstrap CI over rounds."""
    return median_ci([p - f for p, f in zip(paths, floors, strict=True)])


def body(tokens: Sequence[int], max_tokens: int = 16) -> dict:
    return {"model": "m", "token_ids": list(tokens), "sampling_params": {
        "max_tokens": max_tokens, "temperature": 0.0, "logprobs": 1, "stop_token_ids": [151645],
        "skip_special_tokens": False}}


@contextlib.contextmanager
def ready_process(argv: Sequence[str], ready: str) -> Iterator[tuple[str, int]]:
    """`argv` as its own process: yields (the URL printed right after `ready` on the first line
    starting with it, pid); terminated (by pid) on exit."""
    process = subprocess.Popen(list(argv), stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith(ready):
                yield line[len(ready):].split()[0], process.pid
                return
        raise RuntimeError(f"{argv[0]} did not print {ready!r} (exit status {process.wait()})")
    finally:
        process.terminate()
        process.wait(timeout=30)
        if process.stdout is not None:
            process.stdout.close()


def vf_sglang(*args: str) -> list[str]:
    """The `vf-sglang` command of this environment."""
    return [str(Path(sys.executable).with_name("vf-sglang")), *args]


@contextlib.contextmanager
def served_bridge(engine_url: str, *, max_in_flight: int = 512, read_timeout: float = 600) -> Iterator[tuple[str, int]]:
    """`vf-sglang serve-bridge` as its own process: yields (url, pid)."""
    with ready_process(vf_sglang("serve-bridge", "--sglang-url", engine_url, "--model", "m",
                                 "--max-in-flight", str(max_in_flight), "--read-timeout", str(read_timeout),
                                 "--session-lru-size", "100000"), "vf-sglang bridge ready at ") as found:
        yield found


def write_section(name: str, lines: Sequence[str]) -> None:
    """Replace the generated section `name` of docs/performance.md (or append it)."""
    start, end = f"<!-- begin {name} (generated) -->", f"<!-- end {name} -->"
    text = DOC.read_text() if DOC.exists() else "# Performance\n"
    block = "\n".join([start, *lines, end])
    if start in text and end in text:
        head, rest = text.split(start, 1)
        text = head + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    DOC.write_text(text)


def report(section: str, title: str, lines: list[str], *, write: bool) -> list[str]:
    """Print a benchmark's lines and, with `write`, make them section `section` of
    docs/performance.md under `title`."""
    print("\n".join(lines))
    if write:
        write_section(section, [title, "", *lines])
    return lines


def goal_table(goals: Sequence[tuple[str, str, bool]]) -> list[str]:
    """The issue's goals against what this run measured (computed, never hand-edited)."""
    rows = [f"| {goal} | {measured} | {'yes' if met else '**no**'} |" for goal, measured, met in goals]
    return ["| goal | measured | met |", "|---|---|---|", *rows, ""]


_GOAL_ROW = re.compile(r"^\| (?P<goal>[^|]+) \| (?P<measured>[^|]+) \| (?P<met>yes|\*\*no\*\*) \|$", re.M)
_BOUND = re.compile(r"(?P<op>[≤≥]) (?P<limit>[\d.,]+)\s*(?P<unit>×|µs|s\b|M tokens/s)")
_NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?|[-+]?(?:nan|inf)")


def goal_rows(text: str) -> list[tuple[str, float, str, float, bool]]:
    """(goal, limit, op, measured, met) of every goal-table row (`goal_table`) in `text` with one
    bound and a leading measured number (`nan`/`inf` included, so a broken run is seen)."""
    rows = []
    for match in _GOAL_ROW.finditer(text):
        bounds = _BOUND.findall(match["goal"])
        measured = _NUMBER.search(match["measured"])
        if len(bounds) != 1 or measured is None or " vs " in match["measured"]:
            continue
        op, limit, _ = bounds[0]
        rows.append((match["goal"], float(limit.replace(",", "")), op, float(measured[0].replace(",", "")),
                     match["met"] == "yes"))
    return rows


def goal_is_met(op: str, limit: float, measured: float) -> bool:
    return measured <= limit if op == "≤" else measured >= limit
