"""What the bridge adds per model turn over the floor, on the paths Verifiers really takes: paired
rounds in random order, bootstrap CIs.

The stub engine (`benchmarks.stub`, instant, 16-token completions) and `vf-sglang serve-bridge`
run in their own processes; the paths are `benchmarks.paths` (floor, Miles' own call as the peer,
the bare handler, generation A's door, generation B's served path in this loop and as its own
process, generation B's client alone). Every round runs each path `--per-round` times in a fresh
random order; a path's added time in a round is its mean time minus the floor's mean time in the
same round; medians with 95 % bootstrap CIs over rounds. Goals (docs/performance.md): gen-A door ≤ 60 µs,
gen-B ≤ 300 µs over the floor, and per-turn growth ≤ 10 µs per 1k prompt tokens (gen-A door over
the floor, prompts of 300 → 25,700 tokens: turns 1 → 128 of a 200-token-per-turn session). Trace →
Sample conversion has its own benchmark: `benchmarks.conversion`.

    uv run python -m benchmarks.overhead [--write]      # about two minutes on two busy cores
    uv run python -m benchmarks.overhead --tiny         # the fast test's size
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time

import httpx

from adapter.bridge.handler import create_app
from adapter.bridge.serve import run_event_loop, served
from adapter.config.settings import Settings
from adapter.engine.client import SGLangClient
from adapter.engine.transport import EngineTransport
from benchmarks import stub
from benchmarks.common import (
    PROMPT,
    added_ci,
    cpu_seconds,
    goal_table,
    machine,
    ratio_ci,
    report,
    served_bridge,
)
from benchmarks.paths import Ends, Path, generation_b_client, make_paths

FLOOR = "floor"
# path → (goal: µs added over the floor per turn, the goal's words)
GOALS = {"gen-A door": (60.0, "generation A door (DirectBridgeClient + Renderers' parsing)"),
         "gen-B": (300.0, "generation B path (Verifiers 0.4.0's client → bridge served in its loop)")}
GROWTH_GOAL = 10.0  # µs per 1k prompt tokens, gen-A door over the floor


async def paired(paths: dict[str, Path], tokens: list[int], rounds: int, per_round: int,
                 pids: tuple[int, ...] = (), cpu: dict[str, float] | None = None) -> dict[str, list[float]]:
    """Per-round mean seconds of each path, paths in a new random order every round; with
    `cpu`, also each path's CPU per request summed over this process and `pids`."""
    means: dict[str, list[float]] = {name: [] for name in paths}
    spent = dict.fromkeys(paths, 0.0)
    rng = random.Random(1)
    for call in paths.values():  # warm connections, imports and caches
        for _ in range(3):
            await call(tokens)
    for _ in range(rounds):
        order = list(paths)
        rng.shuffle(order)
        for name in order:
            cpu0 = _cpu(pids) if cpu is not None else 0.0
            started = time.perf_counter()
            for _ in range(per_round):
                await paths[name](tokens)
            means[name].append((time.perf_counter() - started) / per_round)
            spent[name] += _cpu(pids) - cpu0 if cpu is not None else 0.0
    if cpu is not None:
        cpu.update({name: total / (rounds * per_round) for name, total in spent.items()})
    return means


def _cpu(pids: tuple[int, ...]) -> float:
    return cpu_seconds() + sum(cpu_seconds(pid) for pid in pids)


def added_table(means: dict[str, list[float]], cpu: dict[str, float], goals: list[tuple[str, str, bool]]) -> list[str]:
    """One row per path: median time, added over the floor with its CI, ratio to the floor, CPU;
    the goal rows of GOALS; the peer line."""
    floor = means[FLOOR]
    lines = ["| path | median (µs) | added over floor (µs) | 95 % CI (µs) | ratio vs floor "
             "| CPU / request, all processes (µs) |", "|---|---|---|---|---|---|"]
    for name, values in means.items():
        added, low, high = (x * 1e6 for x in added_ci(values, floor))
        ratio = ratio_ci(values, floor)[0]
        lines.append(f"| {name} | {statistics.median(values) * 1e6:,.0f} | {added:+,.0f} | {low:+,.0f} – {high:+,.0f} "
                     f"| {ratio:.2f} | {cpu[name] * 1e6:,.0f} |")
        if name in GOALS:
            limit, words = GOALS[name]
            goals.append((f"{words} ≤ {limit:.0f} µs over the floor per turn (instant stub)",
                          f"{added:+,.0f} µs (CI {low:+,.0f} – {high:+,.0f})", added <= limit))
    peer = added_ci(means["miles"], floor)[0] * 1e6
    door = added_ci(means["gen-A door"], means["miles"])[0] * 1e6
    return [*lines, "", f"Peer: Miles' own call (`miles`, httpx's default transport) pays {peer:+,.0f} µs over the "
            f"floor per call; generation A through the adapter pays {door:+,.0f} µs over that."]


def slope(points: list[tuple[int, float]]) -> float:
    """Least-squares µs of added time per 1k prompt tokens."""
    xs, ys = [p[0] / 1000 for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)


def slope_ci(rounds: list[tuple[int, list[float]]], *, draws: int = 1000) -> tuple[float, float]:
    """95 % bootstrap CI of `slope`: each draw resamples every turn's paired rounds and fits the
    medians again."""
    rng = random.Random(0)
    fits = sorted(slope([(n, statistics.median(rng.choices(added, k=len(added)))) for n, added in rounds])
                  for _ in range(draws))
    return fits[int(0.025 * draws)], fits[int(0.975 * draws) - 1]


async def per_turn(paths: dict[str, Path], args: argparse.Namespace) -> list[str]:
    lines = ["| turn | prompt tokens | floor (µs) | gen-A door (µs) | added (µs) | 95 % CI (µs) |",
             "|---|---|---|---|---|---|"]
    points, rounds = [], []
    for turn in args.turns:
        tokens = (PROMPT * 40)[:300] + [1000 + i % 5000 for i in range(200 * (turn - 1))]
        means = await paired({k: paths[k] for k in (FLOOR, "gen-A door")}, tokens, args.turn_rounds, 1)
        added, low, high = (x * 1e6 for x in added_ci(means["gen-A door"], means[FLOOR]))
        points.append((len(tokens), added))
        rounds.append((len(tokens), [(d - f) * 1e6 for d, f in zip(means["gen-A door"], means[FLOOR], strict=True)]))
        floor, door = (statistics.median(means[k]) * 1e6 for k in (FLOOR, "gen-A door"))
        lines.append(f"| {turn} | {len(tokens):,} | {floor:,.0f} | {door:,.0f} | {added:+,.0f} "
                     f"| {low:+,.0f} – {high:+,.0f} |")
    per_1k, (low, high) = slope(points), slope_ci(rounds)
    args.goals.append((f"per-turn growth ≤ {GROWTH_GOAL:.0f} µs per 1k prompt tokens (gen-A door over the floor)",
                       f"{per_1k:,.1f} µs (CI {low:,.1f} – {high:,.1f})", per_1k <= GROWTH_GOAL))
    return [*lines, "", f"Added time grows by **{per_1k:,.1f} µs per 1k prompt tokens** (least squares "
            f"over the turns above; {args.turn_rounds} paired rounds per turn).", ""]


async def run(args: argparse.Namespace) -> list[str]:
    lines = [f"Machine: {machine()}.", ""]
    args.goals = []
    with stub.running() as (engine_url, stub_pid), served_bridge(engine_url) as (bridge_url, bridge_pid):
        engine, own = SGLangClient(engine_url), SGLangClient(engine_url)
        state = create_app(Settings(), engine, model="m").state.bridge
        async with served(create_app(Settings(), own, model="m")) as in_loop_url, \
                httpx.AsyncClient(trust_env=False) as miles, EngineTransport(8) as transport:
            clients = [generation_b_client(url) for url in (in_loop_url, bridge_url, engine_url)]
            paths = make_paths(Ends(engine_url, state, *clients, miles=miles, transport=transport))
            cpu: dict[str, float] = {}
            means = await paired(paths, list(PROMPT), args.rounds, args.per_round, (stub_pid, bridge_pid), cpu)
            lines += ["### Instant stub engine, 9-token prompt, 16-token completion", "",
                      *added_table(means, cpu, args.goals), "",
                      f"{args.rounds} rounds × {args.per_round} requests per path, one process driving them all "
                      "(the in-loop bridge shares its event loop, as generation B's does). CPU counts this process, "
                      "the stub engine and serve-bridge (clock ticks, summed over all rounds).", "",
                      "### Per-turn cost as the prompt grows (instant stub)", "", *await per_turn(paths, args)]
            for client in clients:
                await client.close()
        await engine.aclose()
        await own.aclose()
    return [*lines[:2], *goal_table(args.goals), *lines[2:]]


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--per-round", type=int, default=5)
    parser.add_argument("--turns", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64, 128])
    parser.add_argument("--turn-rounds", type=int, default=40)
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio",
                        help="the loop driving the paths (asyncio: what `vf-sglang rollout` and Miles run episodes on)")
    parser.add_argument("--tiny", action="store_true", help="every scenario at a test's size")
    parser.add_argument("--write", action="store_true", help="update docs/performance.md")
    args = parser.parse_args(argv)
    if args.tiny:
        args.rounds, args.per_round, args.turns, args.turn_rounds = 3, 1, [1, 4], 2
    return args


def main(argv: list[str] | None = None) -> list[str]:
    args = parse(argv)
    loop = run_event_loop if args.loop == "uvloop" else asyncio.run
    return report("overhead", "## Bridge overhead (benchmarks/overhead.py)", loop(run(args)), write=args.write)


if __name__ == "__main__":
    main()
