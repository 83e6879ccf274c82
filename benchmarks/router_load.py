"""Load through the real SGLang router: the Miles-scale scenario (1,024 sessions in flight, 12 s
generations) through `smg` in front of two stub engines, paired with the same load sent straight
to the stubs, in one run.

Each of `--concurrent` sessions runs `--turns` turns; every turn is sent twice at the same moment:
once through the in-process bridge to the router (consistent_hashing, the session id as routing
key, `--disable-retries`), once through a second bridge straight to one stub (session i → stub
i mod 2). Both arms share the stubs and the clock, so the per-turn difference (router − direct)
is the router's added latency under the same load. Reported: errors per arm, latency
percentiles, the paired added latency (median, p90), and how the router split its requests over
the two workers (each stub's count minus the direct arm's share). A quiet phase follows: `--quiet`
single requests on instant stubs, each way in turn (the order alternating): the hop's own cost.

    uv run python -m benchmarks.router_load [--write]      # full size (~40 s of 12 s turns)
    uv run python -m benchmarks.router_load --tiny         # the router lane's size

Needs `smg` (`pip install smg==1.13.0`; `tox -e router` has it): skipped with a line otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from adapter.bridge.handler import create_app, handle_generate
from adapter.config.settings import Settings
from adapter.engine.client import SGLangClient, Timeouts
from benchmarks.common import PROMPT, body, goal_table, machine, percentile, report
from benchmarks.load import row
from e2e.router.smg import Started, smg_binary, smg_router, started, stub_engine

TITLE = "## Load through the SGLang router (benchmarks/router_load.py)"


class Arm:
    """One in-process bridge in front of one engine address, and what its calls saw."""

    def __init__(self, url: str, concurrent: int, settings: Settings) -> None:
        self.engine = SGLangClient(url, max_in_flight=max(concurrent, 1), timeouts=Timeouts(read=600))
        self.state = create_app(settings, self.engine, model="m").state.bridge
        self.latencies: list[float] = []
        self.errors = 0

    async def call(self, payload: dict[str, Any], session: str) -> float:
        started_at = time.perf_counter()
        status = (await handle_generate(self.state, payload, session)).status
        elapsed = time.perf_counter() - started_at
        self.latencies.append(elapsed)
        self.errors += status != 200
        return elapsed


async def _session(index: int, turns: int, routed: Arm, direct: list[Arm], pairs: list[float]) -> None:
    prompt = list(PROMPT)
    for turn in range(turns):
        payload = body(prompt)
        via_router, straight = await asyncio.gather(routed.call(payload, f"router-{index}"),
                                                    direct[index % len(direct)].call(payload, f"direct-{index}"))
        pairs.append(via_router - straight)
        prompt += [1000 + turn] * 16 + [151645, 198, 151644, 77091, 198]


async def _in_turn(index: int, routed: Arm, direct: list[Arm], pairs: list[float]) -> None:
    """One request each way, one after the other (the order alternates), the difference kept."""
    payload, straight = body(PROMPT), direct[index % len(direct)]
    if index % 2:
        via_router = await routed.call(payload, f"router-{index}")
        pairs.append(via_router - await straight.call(payload, f"direct-{index}"))
    else:
        other = await straight.call(payload, f"direct-{index}")
        pairs.append(await routed.call(payload, f"router-{index}") - other)


def _generated(url: str) -> int:
    return int(httpx.get(f"{url}/stats", timeout=10, trust_env=False).json()["generate"])


@contextlib.contextmanager
def _topology(delay: float, logs: Path) -> Iterator[tuple[list[Started], Started]]:
    with started(stub_engine(logs / "stub-a.log", delay=delay)) as a, \
            started(stub_engine(logs / "stub-b.log", delay=delay)) as b, \
            started(smg_router([a.url, b.url], logs / "smg.log")) as router:
        yield [a, b], router


async def _measure(args: argparse.Namespace, stubs: list[Started], router: Started, *,
                   sequential: int = 0) -> dict[str, Any]:
    """The loaded phase (`sequential` = 0: every session at once) or the quiet one (that many
    one-turn sessions, one after another)."""
    keyed = Settings(sglang_router_policy="consistent_hashing", session_lru_size=100_000)
    routed = Arm(router.url, args.concurrent, keyed)
    direct = [Arm(stub.url, args.concurrent, Settings(session_lru_size=100_000)) for stub in stubs]
    before = [_generated(stub.url) for stub in stubs]
    pairs: list[float] = []
    wall = time.perf_counter()
    try:
        if sequential:
            for index in range(sequential):
                await _in_turn(index, routed, direct, pairs)
        else:
            await asyncio.gather(*(_session(i, args.turns, routed, direct, pairs) for i in range(args.concurrent)))
    finally:
        for arm in (routed, *direct):
            await arm.engine.aclose()
    wall = time.perf_counter() - wall
    seen = [_generated(stub.url) - start for stub, start in zip(stubs, before, strict=True)]
    via_router = [count - len(arm.latencies) for count, arm in zip(seen, direct, strict=True)]
    return {"routed": routed, "direct": direct, "pairs": pairs, "wall": wall, "split": via_router}


def _lines(args: argparse.Namespace, found: dict[str, Any]) -> list[str]:
    routed, direct, pairs, split = found["routed"], found["direct"], found["pairs"], found["split"]
    straight = [lat for arm in direct for lat in arm.latencies]
    errors = routed.errors + sum(arm.errors for arm in direct)
    added = statistics.median(pairs) * 1e3
    share = max(split) / max(sum(split), 1)
    args.goals.extend([
        (f"{len(routed.latencies):,} requests through smg, {args.concurrent:,} in flight, {args.delay:g} s each: "
         "0 errors", f"{routed.errors} errors (direct arm {errors - routed.errors})", errors == 0),
        ("per-worker balance reported (consistent_hashing over session ids)",
         f"{split[0]:,} / {split[1]:,} ({share:.0%} on the busier worker)", sum(split) == len(routed.latencies)),
        ("added latency per request reported (paired, one run)",
         f"median {added:+.2f} ms, p90 {percentile(pairs, .9) * 1e3:+.2f} ms", True),
    ])
    return [f"### {args.concurrent:,} sessions × {args.turns} turns, {args.delay:g} s per generation, through smg "
            "and straight to the stubs at the same moment", "",
            "| arm | requests | errors | p50 (s) | p99 (s) | requests per worker |", "|---|---|---|---|---|---|",
            row("through smg", len(routed.latencies), routed.errors, f"{percentile(routed.latencies, .5):.3f}",
                f"{percentile(routed.latencies, .99):.3f}", " / ".join(f"{n:,}" for n in split)),
            row("straight", len(straight), errors - routed.errors, f"{percentile(straight, .5):.3f}",
                f"{percentile(straight, .99):.3f}", " / ".join(f"{len(arm.latencies):,}" for arm in direct)),
            "", f"Added latency through the router, paired per turn: median {added:+.2f} ms, p10 "
            f"{percentile(pairs, .1) * 1e3:+.2f} ms, p90 {percentile(pairs, .9) * 1e3:+.2f} ms over {len(pairs):,} "
            f"pairs; wall {found['wall']:.1f} s for {args.turns} turns of {args.delay:g} s. smg 1.13.0, "
            "`--policy consistent_hashing --disable-retries`, two stub engines (benchmarks/stub.py).", ""]


async def run(args: argparse.Namespace) -> list[str]:
    args.goals = []
    head = [f"Machine: {machine()}.", ""]
    if smg_binary() is None:
        return [*head, "Skipped: smg is not installed (pip install smg==1.13.0; `tox -e router` has it).", ""]
    with tempfile.TemporaryDirectory(prefix="vf-sglang-router-load-") as logs:
        with _topology(args.delay, Path(logs)) as (stubs, router):
            found = await _measure(args, stubs, router)
        with _topology(0.0, Path(logs)) as (stubs, router):
            quiet = await _measure(args, stubs, router, sequential=args.quiet)
    lines = [*_lines(args, found), *_quiet_lines(quiet)]
    return [*head, *goal_table(args.goals), *lines]


def _quiet_lines(found: dict[str, Any]) -> list[str]:
    pairs = found["pairs"]
    return ["### The hop alone: one request at a time, instant stubs", "",
            f"{len(pairs)} paired requests: added latency through the router median "
            f"{statistics.median(pairs) * 1e3:+.2f} ms, p10 {percentile(pairs, .1) * 1e3:+.2f} ms, p90 "
            f"{percentile(pairs, .9) * 1e3:+.2f} ms (errors: {found['routed'].errors}).", ""]


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrent", type=int, default=1024)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--delay", type=float, default=12.0)
    parser.add_argument("--quiet", type=int, default=200, help="paired single requests on instant stubs")
    parser.add_argument("--tiny", action="store_true", help="the router lane's size")
    parser.add_argument("--write", action="store_true", help="update docs/performance.md")
    args = parser.parse_args(argv)
    if args.tiny:
        args.concurrent, args.turns, args.delay, args.quiet = 16, 2, 0.05, 10
    return args


def main(argv: list[str] | None = None) -> list[str]:
    args = parse(argv)
    return report("router-load", TITLE, asyncio.run(run(args)), write=args.write)


if __name__ == "__main__":
    main()
