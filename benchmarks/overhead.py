"""Bridge overhead against a raw `/generate` call: paired rounds in random order, ratio CIs.

The stub engine (`benchmarks.stub`, instant, 16-token completions) and `vf-sglang serve-bridge`
run in their own processes. Paths, each ending with the reply parsed by orjson:
  raw            httpx POST {engine}/generate with the SGLang payload on httpx's default
                 transport: what Miles' own rollout pays per call (`miles.utils.http_utils.post`
                 is an `httpx.AsyncClient` POST), the baseline of the goals
  raw-transport  the same request handed to the adapter's engine transport directly
                 (`EngineTransport`, aiohttp underneath): the fastest raw call on the adapter's
                 stack, so `path - raw-transport` is what the bridge itself adds
  in-process     `handle_generate(state, body)` — generation A's door (DirectBridgeClient)
  served         httpx POST /inference/v1/generate to the serve-bridge process (generation B)
  served+openai  the same through `AsyncOpenAI.post(..., cast_to=httpx.Response)`, exactly as
                 Verifiers' TrainClient and Renderers call a served bridge
Every round runs each path `--per-round` times in a fresh random order; the ratio of a round is
its mean time over raw's mean time in the same round; medians with 95 % bootstrap CIs.
Also: per-turn cost as the prompt grows (300 → 25,700 tokens: turns 1 → 128 of a 200-token-per
-turn session), and trace → Sample conversion throughput (8 traces × 32k tokens).

    uv run python -m benchmarks.overhead [--write]      # about a minute on two busy cores
    uv run python -m benchmarks.overhead --tiny         # the fast test's size
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import orjson
from openai import AsyncOpenAI

from adapter.bridge.handler import create_app, handle_generate
from adapter.config.settings import Settings
from adapter.engine.client import SGLangClient
from adapter.engine.transport import EngineTransport
from benchmarks import stub
from benchmarks.common import PROMPT, body, cpu_seconds, goal_table, machine, ratio_ci, report, served_bridge

Path = Callable[[list[int]], Awaitable[Any]]


def sglang_payload(tokens: list[int]) -> bytes:
    return orjson.dumps({"input_ids": tokens, "return_logprob": True, "sampling_params": {
        "max_new_tokens": 16, "temperature": 0.0, "stop_token_ids": [151645], "skip_special_tokens": False,
        "no_stop_trim": True, "spaces_between_special_tokens": False, "n": 1}})


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


def ratio_table(means: dict[str, list[float]], cpu: dict[str, float], goals: list[tuple[str, str, bool]]) -> list[str]:
    raw, floor = means["raw"], means["raw-transport"]
    limits = {"in-process": 1.2, "served": 2.0}
    lines = ["| path | median (µs) | added (µs) | ratio vs raw | 95 % CI | CPU / request, all processes (µs) "
             "| CPU ratio |", "|---|---|---|---|---|---|---|"]
    for name, values in means.items():
        ratio, low, high = ratio_ci(values, raw)
        added = statistics.median(v - r for v, r in zip(values, raw, strict=True))
        if name in limits:
            goals.append((f"{name} ≤ {limits[name]}× raw (instant stub)", f"{ratio:.3f}× (CI {low:.3f} – {high:.3f})",
                          ratio <= limits[name]))
        lines.append(f"| {name} | {statistics.median(values) * 1e6:,.0f} | {added * 1e6:,.0f} | {ratio:.3f} "
                     f"| {low:.3f} – {high:.3f} | {cpu[name] * 1e6:,.0f} | {cpu[name] / cpu['raw']:.2f} |")
    own = {name: (ratio_ci(means[name], floor)[0],
                  statistics.median(v - r for v, r in zip(means[name], floor, strict=True)) * 1e6)
           for name in ("in-process", "served")}
    lines += ["", "Against raw-transport (the same request on the adapter's own transport, no bridge), the bridge "
              "itself adds " + "; ".join(f"{name} {added:,.0f} µs ({ratio:.3f}×)" for name, (ratio, added)
                                         in own.items()) + "."]
    return lines


def make_paths(engine_url: str, bridge_url: str, raw: httpx.AsyncClient, transport: EngineTransport,
               http: httpx.AsyncClient, openai: AsyncOpenAI, state: Any) -> dict[str, Path]:
    async def raw_call(tokens: list[int]) -> Any:
        response = await raw.post(f"{engine_url}/generate", content=sglang_payload(tokens),
                                  headers={"content-type": "application/json"})
        return orjson.loads(response.content)

    async def raw_transport(tokens: list[int]) -> Any:
        request = httpx.Request("POST", f"{engine_url}/generate", content=sglang_payload(tokens),
                                headers={"content-type": "application/json"})
        response = await transport.handle_async_request(request)
        return orjson.loads(await response.aread())

    async def in_process(tokens: list[int]) -> Any:
        reply = await handle_generate(state, body(tokens), "bench")
        assert reply.ok, reply.body
        return orjson.loads(reply.body)

    async def served(tokens: list[int]) -> Any:
        response = await http.post(f"{bridge_url}/inference/v1/generate", content=orjson.dumps(body(tokens)),
                                   headers={"content-type": "application/json", "X-Session-ID": "bench"})
        return orjson.loads(response.content)

    async def served_openai(tokens: list[int]) -> Any:
        response = await openai.post(f"{bridge_url}/inference/v1/generate", cast_to=httpx.Response,
                                     body=body(tokens), options={"headers": {"X-Session-ID": "bench"}})
        return orjson.loads(response.content)

    return {"raw": raw_call, "raw-transport": raw_transport, "in-process": in_process, "served": served,
            "served+openai": served_openai}


def slope(points: list[tuple[int, float]]) -> float:
    """Least-squares µs of added time per 1k prompt tokens."""
    xs, ys = [p[0] / 1000 for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)


async def per_turn(paths: dict[str, Path], args: argparse.Namespace) -> list[str]:
    lines = ["| turn | prompt tokens | raw (µs) | in-process (µs) | added (µs) | ratio |", "|---|---|---|---|---|---|"]
    points = []
    for turn in args.turns:
        tokens = (PROMPT * 40)[:300] + [1000 + i % 5000 for i in range(200 * (turn - 1))]
        means = await paired({k: paths[k] for k in ("raw", "in-process")}, tokens, args.turn_rounds, 1)
        added = statistics.median(v - r for v, r in zip(means["in-process"], means["raw"], strict=True)) * 1e6
        raw, inproc = statistics.median(means["raw"]) * 1e6, statistics.median(means["in-process"]) * 1e6
        points.append((len(tokens), added))
        lines.append(f"| {turn} | {len(tokens):,} | {raw:,.0f} | {inproc:,.0f} | {added:,.0f} | {inproc / raw:.2f} |")
    per_1k = slope(points)
    args.goals.append(("per-turn added time ≤ 150 µs per 1k prompt tokens", f"{per_1k:,.0f} µs", per_1k <= 150))
    return [*lines, "", f"Added time grows by **{per_1k:,.0f} µs per 1k prompt tokens** (least squares "
            f"over the turns above; {args.turn_rounds} paired rounds per turn).", ""]


def conversion(args: argparse.Namespace) -> list[str]:
    from adapter.rollout.samples import trace_to_samples
    from conformance.traces import TraceSpec, Turn, build_trace

    turns = tuple(Turn([1000 + i for i in range(args.conv_tokens // 32)], [-0.5] * (args.conv_tokens // 32),
                       followup_ids=[7] * (args.conv_tokens // 32 - 3)) for _ in range(16))
    traces = [build_trace(TraceSpec(turns=turns)) for _ in range(8)]
    tokens = sum(len(t.branches[-1].token_ids) for t in traces)
    best = []
    for _ in range(args.conv_repeats):
        started = time.perf_counter()
        for trace in traces:
            trace_to_samples(trace, rollout_id=0)
        best.append(time.perf_counter() - started)
    rate = tokens / statistics.median(best)
    args.goals.append(("trace → Sample ≥ 8 M tokens/s (8 × 32k-token traces)", f"{rate / 1e6:.1f} M tokens/s",
                       rate >= 8e6))
    return [f"8 traces × {tokens // 8:,} tokens (16 turns, half sampled): **{rate / 1e6:.1f} M tokens/s** "
            f"(median of {args.conv_repeats}; `adapter.rollout.samples.trace_to_samples`, Verifiers' branch "
            "assembly included).", ""]


async def run(args: argparse.Namespace) -> list[str]:
    lines = [f"Machine: {machine()}.", ""]
    args.goals = []
    with stub.running() as (engine_url, stub_pid), served_bridge(engine_url) as (bridge_url, bridge_pid):
        engine = SGLangClient(engine_url)
        state = create_app(Settings(), engine, model="m").state.bridge
        async with httpx.AsyncClient(trust_env=False) as raw, httpx.AsyncClient(trust_env=False) as http, \
                EngineTransport(8) as transport:
            openai = AsyncOpenAI(base_url=f"{bridge_url}/v1", api_key="EMPTY", max_retries=0,
                                 http_client=httpx.AsyncClient(trust_env=False))  # type: ignore[arg-type]
            paths = make_paths(engine_url, bridge_url, raw, transport, http, openai, state)
            cpu: dict[str, float] = {}
            means = await paired(paths, list(PROMPT), args.rounds, args.per_round, (stub_pid, bridge_pid), cpu)
            lines += ["### Instant stub engine, 9-token prompt, 16-token completion", "",
                      *ratio_table(means, cpu, args.goals), "",
                      f"{args.rounds} rounds × {args.per_round} requests per path. CPU counts this process, the "
                      "stub engine and serve-bridge (clock ticks, summed over all rounds): on a loaded machine it "
                      "is the steadier measure of the work a path adds.", "",
                      "### Per-turn cost as the prompt grows (instant stub)", "", *await per_turn(paths, args)]
            await openai.close()
        await engine.aclose()
    lines += ["### Trace → Sample conversion", "", *conversion(args)]
    return [*lines[:2], *goal_table(args.goals), *lines[2:]]


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--per-round", type=int, default=5)
    parser.add_argument("--turns", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64, 128])
    parser.add_argument("--turn-rounds", type=int, default=40)
    parser.add_argument("--conv-tokens", type=int, default=32_768)
    parser.add_argument("--conv-repeats", type=int, default=5)
    parser.add_argument("--tiny", action="store_true", help="every scenario at a test's size")
    parser.add_argument("--write", action="store_true", help="update docs/performance.md")
    args = parser.parse_args(argv)
    if args.tiny:
        args.rounds, args.per_round, args.turns, args.turn_rounds = 3, 1, [1, 4], 2
        args.conv_tokens, args.conv_repeats = 1024, 1
    return args


def main(argv: list[str] | None = None) -> list[str]:
    args = parse(argv)
    return report("overhead", "## Bridge overhead (benchmarks/overhead.py)", asyncio.run(run(args)), write=args.write)


if __name__ == "__main__":
    main()
