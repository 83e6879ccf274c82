"""Trace → Sample conversion throughput, list streams beside numpy streams, measured in one run.

Verifiers up to 0.4.0 holds a branch's streams (token ids, sampled mask, logprobs) as Python lists;
0.4.1 on holds numpy arrays (int32, bool, float32). The same traces are converted both ways,
repeat by repeat in alternating order, by `adapter.samples.conversion.trace_to_samples` (Verifiers'
branch assembly included: the numpy traces are the list traces' branches as arrays,
`conformance.traces.numpy_streams`). Goals (docs/performance.md): lists ≥ 8 M tokens/s, numpy
≥ 10 M tokens/s (the list figure on this machine before numpy streams existed).

    uv run python -m benchmarks.conversion [--write]    # a few seconds
    uv run python -m benchmarks.conversion --tiny       # the fast test's size
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from typing import Any

from benchmarks.common import goal_table, machine, report

GOALS = {"lists": 8e6, "numpy": 10e6}  # tokens/s


def _traces(tokens: int, count: int) -> list[Any]:
    from conformance.traces import TraceSpec, Turn, build_trace

    per_turn = tokens // 32
    turns = tuple(Turn([1000 + i for i in range(per_turn)], [-0.5] * per_turn, followup_ids=[7] * (per_turn - 3))
                  for _ in range(16))
    return [build_trace(TraceSpec(turns=turns)) for _ in range(count)]


def _seconds(traces: Sequence[Any]) -> float:
    from adapter.samples.conversion import trace_to_samples

    started = time.perf_counter()
    for trace in traces:
        trace_to_samples(trace, rollout_id=0)
    return time.perf_counter() - started


def measure(tokens: int, count: int, repeats: int) -> tuple[int, dict[str, float]]:
    """Tokens per kind, and each kind's median tokens/s over `repeats` alternating rounds."""
    from conformance.traces import numpy_streams

    lists = _traces(tokens, count)
    kinds = {"lists": lists, "numpy": [numpy_streams(trace) for trace in lists]}
    total = sum(len(trace.branches[-1].token_ids) for trace in lists)
    seconds: dict[str, list[float]] = {kind: [] for kind in kinds}
    for round_ in range(repeats):
        for kind in (kinds if round_ % 2 == 0 else reversed(kinds)):
            seconds[kind].append(_seconds(kinds[kind]))
    return total, {kind: total / statistics.median(values) for kind, values in seconds.items()}


def run(args: argparse.Namespace) -> list[str]:
    total, rates = measure(args.tokens, args.traces, args.repeats)
    goals = [(f"trace → Sample, {kind} streams ≥ {goal / 1e6:.0f} M tokens/s", f"{rates[kind] / 1e6:.1f} M tokens/s",
              rates[kind] >= goal) for kind, goal in GOALS.items()]
    return [f"Machine: {machine()}.", "", *goal_table(goals),
            f"{args.traces} traces × {total // args.traces:,} tokens (16 turns, half sampled), median of "
            f"{args.repeats} alternating rounds: lists **{rates['lists'] / 1e6:.1f} M tokens/s**, numpy "
            f"**{rates['numpy'] / 1e6:.1f} M tokens/s** (numpy / lists = {rates['numpy'] / rates['lists']:.2f}). "
            "Samples hold plain Python ints and floats either way.", ""]


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=32_768, help="tokens per trace")
    parser.add_argument("--traces", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--tiny", action="store_true", help="the fast test's size")
    parser.add_argument("--write", action="store_true", help="update docs/performance.md")
    args = parser.parse_args(argv)
    if args.tiny:
        args.tokens, args.traces, args.repeats = 1024, 2, 1
    return report("conversion", "## Trace → Sample conversion (benchmarks/conversion.py)", run(args),
                  write=args.write)


if __name__ == "__main__":
    main()
