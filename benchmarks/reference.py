"""Bridge overhead against real decoding: the reference engine (the tiny Qwen3-shaped model,
transformers on CPU, SGLang's `/generate` wire) decoding 64 tokens per request.

The engine (`vf-sglang engine`) and `vf-sglang serve-bridge` run in their own processes. Paths
(`benchmarks.paths`): raw (Miles' own httpx call), in-process (generation A's door,
`DirectBridgeClient` as Renderers calls it, Renderers' parsing included), served (Verifiers
0.4.0's own client → the serve-bridge process). Greedy with `ignore_eos`, so every request decodes exactly
64 tokens of the same prompt. Every round runs each path once in a fresh random order
(`benchmarks.overhead.paired`); the ratio of a round is the path's time over raw's; medians
with 95 % bootstrap CIs over rounds.
Needs the `demo` dependency group (torch).

    uv run python -m benchmarks.reference [--write]     # ~4 minutes on two busy cores
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
from collections.abc import Iterator

import httpx
import orjson
from openai import AsyncOpenAI

from adapter.bridge.direct import DirectBridgeClient
from adapter.bridge.handler import create_app
from adapter.config.settings import Settings
from adapter.engine.client import SGLangClient
from benchmarks.common import PROMPT, goal_table, machine, ratio_ci, ready_process, report, served_bridge, vf_sglang
from benchmarks.overhead import paired
from benchmarks.paths import Path, generation_b_client, renderers_post

GOALS = {"in-process": 1.01, "served": 1.02}


@contextlib.contextmanager
def reference_engine() -> Iterator[str]:
    """`vf-sglang engine` on a free loopback port (the cached tiny model; built on first use)."""
    with ready_process(vf_sglang("engine"), "reference engine ready at ") as (url, _):
        yield url


def paths(engine_url: str, raw: httpx.AsyncClient, door: DirectBridgeClient, served: AsyncOpenAI,
          decode: int) -> dict[str, Path]:
    """Each path sends the prompt it is given and checks that exactly `decode` tokens came back:
    raw (Miles' own call), in-process (generation A's door, `DirectBridgeClient`, as Renderers
    calls it and parses the reply), served (Verifiers 0.4.0's own client → serve-bridge)."""
    sampling = {"max_tokens": decode, "temperature": 0.0, "logprobs": 1, "ignore_eos": True,
                "skip_special_tokens": False}
    engine_sampling = {"max_new_tokens": decode, "temperature": 0.0, "ignore_eos": True,
                       "skip_special_tokens": False}

    def decoded(ids: list[int]) -> list[int]:
        assert len(ids) == decode, f"{len(ids)} tokens decoded, not {decode}"
        return ids

    async def raw_call(prompt: list[int]) -> list[int]:
        payload = orjson.dumps({"input_ids": prompt, "return_logprob": True, "sampling_params": engine_sampling})
        response = await raw.post(f"{engine_url}/generate", content=payload,
                                  headers={"content-type": "application/json"})
        return decoded(orjson.loads(response.content)["output_ids"])

    async def in_process(prompt: list[int]) -> list[int]:
        return decoded(await renderers_post(door, prompt, sampling))

    async def served_call(prompt: list[int]) -> list[int]:
        return decoded(await renderers_post(served, prompt, sampling))

    return {"raw": raw_call, "in-process": in_process, "served": served_call}


async def measure(engine_url: str, args: argparse.Namespace) -> dict[str, list[float]]:
    """Paired per-round seconds of `paths` against the engine at `engine_url`: serve-bridge is
    started in front of it, the in-process bridge built here."""
    with served_bridge(engine_url) as (bridge_url, _):
        engine = SGLangClient(engine_url)
        door = DirectBridgeClient(create_app(Settings(), engine, model="m").state.bridge, base_url="http://in-process/v1")
        served = generation_b_client(bridge_url)
        async with httpx.AsyncClient(trust_env=False, timeout=120) as raw:
            times = await paired(paths(engine_url, raw, door, served, args.tokens), PROMPT, args.rounds, 1)
        await served.close()
        await engine.aclose()
    return times


def tables(times: dict[str, list[float]], args: argparse.Namespace, *, started: str, label: str,
           goals: dict[str, float]) -> list[str]:
    """The goal table, then the per-path table (median, added, ratio vs raw with its CI) under a
    heading naming `label` (the engine), then the rounds line; `started` is the machine line."""
    base = times["raw"]
    met: list[tuple[str, str, bool]] = []
    lines = [f"### {label[0].upper()}{label[1:]}, {len(PROMPT)}-token prompt, {args.tokens} decoded tokens "
             "(greedy, ignore_eos)", "", "| path | median (ms) | added (ms) | ratio vs raw | 95 % CI |",
             "|---|---|---|---|---|"]
    for name, values in times.items():
        ratio, low, high = ratio_ci(values, base)
        added = statistics.median(v - r for v, r in zip(values, base, strict=True))
        lines.append(f"| {name} | {statistics.median(values) * 1e3:,.1f} | {added * 1e3:,.2f} | {ratio:.4f} "
                     f"| {low:.4f} – {high:.4f} |")
        if name in goals:
            met.append((f"{name} ≤ {goals[name]}× raw ({args.tokens}-token decoding, {label})",
                        f"{ratio:.4f}× (CI {low:.4f} – {high:.4f})", ratio <= goals[name]))
    lines += ["", f"{args.rounds} rounds, each path once per round in a fresh random order. The engine decodes "
              "one request at a time, so the three paths never overlap.", ""]
    return [f"Machine: {started}.", "", *goal_table(met), *lines]


async def run(args: argparse.Namespace) -> list[str]:
    started = machine()
    with reference_engine() as engine_url:
        times = await measure(engine_url, args)
    return tables(times, args, started=started, label="reference engine", goals=GOALS)


def decoding_parser(doc: str) -> argparse.ArgumentParser:
    """The options of a 64-token decoding benchmark (this one, `benchmarks.sglang_cpu`)."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--tiny", action="store_true", help="a test's size")
    parser.add_argument("--write", action="store_true", help="update docs/performance.md")
    return parser


def parse_decoding(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """`parser`'s arguments, `--tiny` applied (2 rounds of 4 tokens)."""
    args = parser.parse_args(argv)
    if args.tiny:
        args.rounds, args.tokens = 2, 4
    return args


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    return parse_decoding(decoding_parser(__doc__), argv)


def main(argv: list[str] | None = None) -> list[str]:
    args = parse(argv)
    return report("reference", "## Against real decoding (benchmarks/reference.py)", asyncio.run(run(args)),
                  write=args.write)


if __name__ == "__main__":
    main()
