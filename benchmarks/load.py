"""Load on the bridge at Miles' scale, against the stub engine in its own process (`benchmarks.stub`).

Scenarios (each prints a table; `--write` puts them in docs/performance.md):
  queued     --concurrent sessions (1,024) × --turns (3) at once, the engine taking --delay (12 s)
             per generation, in-process bridge with the in-flight bound = --concurrent:
             errors, p50/p99 per turn, peak in flight seen by the engine.
  miles      --miles-inflight (512) requests at once, --miles-delay (10 s) each, the bound at
             Miles' default 512: wall time vs the delay (the floor), peak in flight at the engine.
  sessions   --sessions (1,000) sessions × --turns, instant engine, two rounds, in-process
             and served (`vf-sglang serve-bridge` in its own process): errors, req/s, p50/p99,
             bridge CPU per request, bridge RSS after each round.
  depth      instant engine, the in-flight bound 8: bridge CPU per request with 10 requests
             waiting vs 1,000 waiting (the cost of a queue must not grow with its depth).

    uv run python -m benchmarks.load [--write]          # full size (minutes, two cores busy)
    uv run python -m benchmarks.load --tiny             # the fast test's size
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from adapter.bridge.handler import create_app, handle_generate
from adapter.config.settings import Settings
from adapter.engine.client import SGLangClient, Timeouts
from adapter.engine.transport import EngineTransport
from benchmarks import stub
from benchmarks.common import (
    PROMPT,
    body,
    cpu_seconds,
    goal_table,
    machine,
    percentile,
    report,
    rss_mb,
    served_bridge,
)

Call = Callable[[dict[str, Any], str], Awaitable[int]]


def in_process(engine_url: str, max_in_flight: int) -> tuple[Call, SGLangClient]:
    engine = SGLangClient(engine_url, max_in_flight=max_in_flight, timeouts=Timeouts(read=600))
    state = create_app(Settings(session_lru_size=100_000), engine, model="m").state.bridge

    async def call(payload: dict[str, Any], session: str) -> int:
        return (await handle_generate(state, payload, session)).status

    return call, engine


async def sessions(call: Call, count: int, turns: int, prefix: str) -> tuple[list[float], int]:
    """`count` sessions at once, each `turns` turns in sequence (the prompt grows per turn)."""
    latencies: list[float] = []
    errors = 0

    async def one(index: int) -> None:
        nonlocal errors
        prompt = list(PROMPT)
        for turn in range(turns):
            started = time.perf_counter()
            status = await call(body(prompt), f"{prefix}-{index}")
            latencies.append(time.perf_counter() - started)
            errors += status != 200
            prompt += [1000 + turn] * 16 + [151645, 198, 151644, 77091, 198]

    await asyncio.gather(*(one(i) for i in range(count)))
    return latencies, errors


async def engine_stats(url: str) -> dict[str, int]:
    async with httpx.AsyncClient(trust_env=False) as client:
        return dict((await client.get(f"{url}/stats")).json())


def row(*cells: Any) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


async def queued(args: argparse.Namespace) -> list[str]:
    with stub.running(delay=args.delay) as (url, _):
        call, engine = in_process(url, args.concurrent)
        started = time.perf_counter()
        latencies, errors = await sessions(call, args.concurrent, args.turns, "q")
        wall = time.perf_counter() - started
        seen = await engine_stats(url)
        await engine.aclose()
    args.goals.append((f"{len(latencies):,} requests, {args.concurrent:,} at once, {args.delay:g} s each: 0 errors",
                       f"{errors} errors, p99 {percentile(latencies, .99):.2f} s", errors == 0))
    return [f"### {args.concurrent:,} concurrent sessions × {args.turns} turns, {args.delay:g} s per generation",
            "", "| requests | errors | p50 (s) | p99 (s) | wall (s) | floor (s) | peak in flight at the engine |",
            "|---|---|---|---|---|---|---|",
            row(len(latencies), errors, f"{percentile(latencies, .5):.2f}", f"{percentile(latencies, .99):.2f}",
                f"{wall:.1f}", f"{args.turns * args.delay:g}", seen["peak_in_flight"]), ""]


async def miles(args: argparse.Namespace) -> list[str]:
    with stub.running(delay=args.miles_delay) as (url, _):
        call, engine = in_process(url, 512)
        started = time.perf_counter()
        latencies, errors = await sessions(call, args.miles_inflight, 1, "m")
        wall = time.perf_counter() - started
        seen = await engine_stats(url)
        await engine.aclose()
    floor, bound = args.miles_delay, min(512, args.miles_inflight)
    args.goals.append((f"{args.miles_inflight} × {floor:g} s at bound 512: wall ≤ {1.2 * floor:g} s, "
                       f"{bound} in flight at the engine",
                       f"{wall:.2f} s, {seen['peak_in_flight']} in flight, {errors} errors",
                       wall <= 1.2 * floor and seen["peak_in_flight"] == bound and errors == 0))
    return [f"### Miles' concurrency: {args.miles_inflight} requests × {args.miles_delay:g} s, bound 512", "",
            "| requests | errors | wall (s) | floor (s) | wall / floor | peak in flight at the engine |",
            "|---|---|---|---|---|---|",
            row(len(latencies), errors, f"{wall:.2f}", f"{args.miles_delay:g}", f"{wall / args.miles_delay:.2f}",
                seen["peak_in_flight"]), ""]


async def _rounds(call: Call, args: argparse.Namespace, pid: int | None, label: str) -> list[str]:
    lines, rss, failed, p99 = [], [], 0, 0.0
    for round_no in (1, 2):
        cpu0, started = cpu_seconds(pid), time.perf_counter()
        latencies, errors = await sessions(call, args.sessions, args.turns, f"{label}{round_no}")
        wall, cpu = time.perf_counter() - started, cpu_seconds(pid) - cpu0
        lines.append(row(label, round_no, len(latencies), errors, f"{len(latencies) / wall:,.0f}",
                         f"{percentile(latencies, .5) * 1e3:,.1f}", f"{percentile(latencies, .99) * 1e3:,.1f}",
                         f"{cpu / len(latencies) * 1e6:,.0f}", f"{rss_mb(pid):,.0f}"))
        rss.append(rss_mb(pid))
        failed += errors
        p99 = max(p99, percentile(latencies, .99))
    args.goals.append((f"{label}: {args.sessions:,} sessions × {args.turns} turns, 0 errors; RSS growth round 1 → 2 "
                       "< 50 MB", f"{failed} errors, p99 {p99 * 1e3:,.0f} ms, RSS {rss[1] - rss[0]:+.1f} MB",
                       failed == 0 and rss[1] - rss[0] < 50))
    return lines


async def sessions_scenario(args: argparse.Namespace) -> list[str]:
    lines = [f"### {args.sessions:,} sessions × {args.turns} turns, instant engine, two rounds", "",
             "| bridge | round | requests | errors | req/s | p50 (ms) | p99 (ms) | bridge CPU / request (µs) "
             "| bridge RSS after (MB) |", "|---|---|---|---|---|---|---|---|---|"]
    with stub.running() as (url, _):
        call, engine = in_process(url, 512)
        lines += await _rounds(call, args, None, "in-process")
        await engine.aclose()
        with served_bridge(url, max_in_flight=512) as (bridge_url, pid):
            # the load driver uses the adapter's engine transport: one httpx pool of 512 would make
            # the driver, not the bridge, the bottleneck (its per-request pool scan)
            async with httpx.AsyncClient(base_url=bridge_url, transport=EngineTransport(512), timeout=600,
                                         trust_env=False) as http:
                gate = asyncio.Semaphore(512)

                async def over_http(payload: dict[str, Any], session: str) -> int:
                    async with gate:  # the client's own bound, as Verifiers' pool has one
                        response = await http.post("/inference/v1/generate", json=payload,
                                                   headers={"X-Session-ID": session})
                        return response.status_code

                lines += await _rounds(over_http, args, pid, "served")
    return [*lines, "", "In-process CPU is this whole process (bridge and the load driver); served CPU is "
            "the serve-bridge process alone.", ""]


async def depth(args: argparse.Namespace) -> list[str]:
    lines = ["### Bridge CPU per request vs queue depth (instant engine, in-flight bound 8)", "",
             "| waiting | requests | CPU / request (µs) |", "|---|---|---|"]
    per: dict[int, float] = {}
    with stub.running() as (url, _):
        call, engine = in_process(url, 8)
        await sessions(call, 8, 1, "warm")
        for waiting in (10, args.depth):
            total, cpu = 0, 0.0
            for _ in range(max(1, args.depth // waiting) * args.depth_rounds):
                cpu0 = cpu_seconds()
                latencies, _ = await sessions(call, waiting, 1, f"d{waiting}")
                cpu += cpu_seconds() - cpu0
                total += len(latencies)
            per[waiting] = cpu / total
            lines.append(row(waiting, total, f"{per[waiting] * 1e6:,.0f}"))
        await engine.aclose()
    ratio = per[args.depth] / per[10]
    args.goals.append((f"bridge CPU per request, {args.depth:,} waiting ≤ 2 × 10 waiting",
                       f"{per[args.depth] * 1e6:,.0f} vs {per[10] * 1e6:,.0f} µs: {ratio:.2f}×", ratio <= 2))
    return [*lines, "", f"Ratio {args.depth:,} waiting / 10 waiting: {per[args.depth] / per[10]:.2f} "
            "(CPU time is counted in clock ticks: small runs are coarse).", ""]


async def run(args: argparse.Namespace) -> list[str]:
    lines = [f"Machine: {machine()}.", ""]
    args.goals = []
    for scenario in args.scenarios:
        added = await {"queued": queued, "miles": miles, "sessions": sessions_scenario, "depth": depth}[scenario](args)
        print("\n".join(added), flush=True)
        lines += added
    return [*lines[:2], *goal_table(args.goals), *lines[2:]]



def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", nargs="+", default=["depth", "sessions", "miles", "queued"])
    parser.add_argument("--concurrent", type=int, default=1024)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--delay", type=float, default=12.0)
    parser.add_argument("--miles-inflight", type=int, default=512)
    parser.add_argument("--miles-delay", type=float, default=10.0)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--depth", type=int, default=1000)
    parser.add_argument("--depth-rounds", type=int, default=3)
    parser.add_argument("--tiny", action="store_true", help="every scenario at a test's size")
    parser.add_argument("--write", action="store_true", help="update docs/performance.md")
    args = parser.parse_args(argv)
    if args.tiny:
        args.concurrent, args.turns, args.delay, args.miles_inflight, args.miles_delay = 6, 2, 0.05, 4, 0.05
        args.sessions, args.depth, args.depth_rounds = 5, 20, 1
    return args


def main(argv: list[str] | None = None) -> list[str]:
    args = parse(argv)
    return report("load", "## Load (benchmarks/load.py)", asyncio.run(run(args)), write=args.write)


if __name__ == "__main__":
    main()
