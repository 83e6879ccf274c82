"""Bridge overhead against real decoding: the reference engine (the tiny Qwen3-shaped model,
transformers on CPU, SGLang's `/generate` wire) decoding 64 tokens per request.

The engine (`vf-sglang engine`) and `vf-sglang serve-bridge` run in their own processes. Paths
as in `benchmarks.overhead`: raw (Miles' own httpx call), in-process (generation A's door),
served (the serve-bridge process). Greedy with `ignore_eos`, so every request decodes exactly
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
from typing import Any

import httpx
import orjson

from adapter.bridge.handler import create_app, handle_generate
from adapter.config.settings import Settings
from adapter.engine.client import SGLangClient
from benchmarks.common import PROMPT, goal_table, machine, ratio_ci, ready_process, report, served_bridge, vf_sglang
from benchmarks.overhead import Path, paired

GOALS = {"in-process": 1.01, "served": 1.02}


@contextlib.contextmanager
def reference_engine() -> Iterator[str]:
    """`vf-sglang engine` on a free loopback port (the cached tiny model; built on first use)."""
    with ready_process(vf_sglang("engine"), "reference engine ready at ") as (url, _):
        yield url


def paths(engine_url: str, bridge_url: str, raw: httpx.AsyncClient, state: Any, decode: int) -> dict[str, Path]:
    """Each path sends the prompt it is given and checks that exactly `decode` tokens came back."""
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
        reply = await handle_generate(state, {"model": "m", "token_ids": prompt, "sampling_params": sampling},
                                      "bench")
        assert reply.ok, reply.body
        return decoded(orjson.loads(reply.body)["choices"][0]["token_ids"])

    async def served(prompt: list[int]) -> list[int]:
        body = orjson.dumps({"model": "m", "token_ids": prompt, "sampling_params": sampling})
        response = await raw.post(f"{bridge_url}/inference/v1/generate", content=body,
                                  headers={"content-type": "application/json", "X-Session-ID": "bench"})
        return decoded(orjson.loads(response.content)["choices"][0]["token_ids"])

    return {"raw": raw_call, "in-process": in_process, "served": served}


async def run(args: argparse.Namespace) -> list[str]:
    lines = [f"Machine: {machine()}.", ""]
    goals: list[tuple[str, str, bool]] = []
    with reference_engine() as engine_url, served_bridge(engine_url) as (bridge_url, _):
        engine = SGLangClient(engine_url)
        state = create_app(Settings(), engine, model="m").state.bridge
        async with httpx.AsyncClient(trust_env=False, timeout=120) as raw:
            times = await paired(paths(engine_url, bridge_url, raw, state, args.tokens), PROMPT, args.rounds, 1)
        await engine.aclose()
    base = times["raw"]
    lines += [f"### Reference engine, {len(PROMPT)}-token prompt, {args.tokens} decoded tokens (greedy, ignore_eos)",
              "", "| path | median (ms) | added (ms) | ratio vs raw | 95 % CI |", "|---|---|---|---|---|"]
    for name, values in times.items():
        ratio, low, high = ratio_ci(values, base)
        added = statistics.median(v - r for v, r in zip(values, base, strict=True))
        lines.append(f"| {name} | {statistics.median(values) * 1e3:,.1f} | {added * 1e3:,.2f} | {ratio:.4f} "
                     f"| {low:.4f} – {high:.4f} |")
        if name in GOALS:
            goals.append((f"{name} ≤ {GOALS[name]}× raw ({args.tokens}-token decoding, reference engine)",
                          f"{ratio:.4f}× (CI {low:.4f} – {high:.4f})", ratio <= GOALS[name]))
    lines += ["", f"{args.rounds} rounds, each path once per round in a fresh random order. The engine decodes "
              "one request at a time, so the three paths never overlap.", ""]
    return [*lines[:2], *goal_table(goals), *lines[2:]]


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--tiny", action="store_true", help="a test's size")
    parser.add_argument("--write", action="store_true", help="update docs/performance.md")
    args = parser.parse_args(argv)
    if args.tiny:
        args.rounds, args.tokens = 2, 4
    return args


def main(argv: list[str] | None = None) -> list[str]:
    args = parse(argv)
    return report("reference", "## Against real decoding (benchmarks/reference.py)", asyncio.run(run(args)),
                  write=args.write)


if __name__ == "__main__":
    main()
