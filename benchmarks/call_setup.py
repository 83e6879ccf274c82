"""What a Miles train call pays to set up, before and after the rollout function held its engine
session and bridge open: measured side by side in one run.

Each round runs two train calls of one real episode each (arith-v1, n 1, on the installed Verifiers
generation, against the scripted engine served on loopback), in alternating order:

    reopened   the rollout function closed after the call (`aclose()`) and given a new lifetime
               over the same loaded env (`reopen`), so the next call opens everything again: a new
               engine connection pool, the bridge app and its client (generation B: a uvicorn
               server on a loopback port) and the env's `env.serving()`, which is what every call
               did before the engine session
    held       the call on an open rollout function (what every call after the first does now)

The difference of the medians is the per-call setup the held session saves; the `open` row is
that setup alone (the open and close of everything, no episode).

    uv run python -m benchmarks.call_setup --write     # the fast env's generation (A)
    .tox/contract-vf040/bin/python -m benchmarks.call_setup --write   # generation B
    uv run python -m benchmarks.call_setup --tiny      # the fast test's size
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from benchmarks.common import machine, median_ci, report


async def reopen(fn: Any) -> None:
    """Close the rollout function, then hand its orchestrator (the loaded env, its progress) a new
    lifetime around a session reopened from the old one: nothing the calls opened is kept."""
    import dataclasses

    from adapter.rollout.lifetime import RunLifetime

    old = fn.orchestrator
    session = old.engine
    await fn.aclose()
    fn.orchestrator = dataclasses.replace(old, lifetime=RunLifetime(session.reopened()))


async def _rounds(tokenizer_dir: str, rounds: int) -> dict[str, list[float]]:
    import uvicorn
    from renderers.base import load_tokenizer

    from adapter.bridge.serve import served
    from adapter.engine import transport
    from adapter.episodes.bundled import add_env_sources
    from adapter.episodes.generations import installed
    from adapter.miles.abi import abi_types
    from adapter.miles.binding import VerifiersRolloutFn
    from conformance.engine import ScriptedEngine, asgi_app
    from conformance.policies import TextPolicy

    generation = installed()
    add_env_sources([generation.bundled_tasksets()])
    made = {"pools": 0, "servers": 0}  # engine connection pools and uvicorn servers started
    make_pool, startup = transport.EngineTransport._session, uvicorn.Server.startup

    def counted_pool(self: Any) -> Any:
        made["pools"] += 1
        return make_pool(self)

    async def counted_startup(self: Any, *args: Any, **kwargs: Any) -> None:
        made["servers"] += 1
        await startup(self, *args, **kwargs)

    engine = ScriptedEngine(default=TextPolicy(load_tokenizer(tokenizer_dir), lambda prompt: "7"))
    constructor, train_input, _, _, _ = abi_types()
    seconds: dict[str, list[float]] = {"reopened": [], "held": [], "open": []}
    opened: dict[str, list[tuple[int, int]]] = {"reopened": [], "held": []}  # (pools, servers) per call
    async with served(asgi_app(engine)) as url:
        transport.EngineTransport._session = counted_pool  # type: ignore[method-assign]
        uvicorn.Server.startup = counted_startup  # type: ignore[method-assign]
        host, port = url.removeprefix("http://").split(":")
        args = SimpleNamespace(
            verifiers_config=str(generation.bundled_config("arith-v1")), hf_checkpoint=tokenizer_dir,
            renderer_model_name="Qwen/Qwen3-0.6B", rollout_global_dataset=False, rollout_batch_size=1,
            n_samples_per_prompt=1, rollout_max_response_len=16, rollout_max_context_len=1024,
            sglang_router_ip=host, sglang_router_port=int(port))
        fn = VerifiersRolloutFn(constructor(args=args, data_source=None))
        calls = iter(range(10_000))
        try:
            await fn(train_input(rollout_id=next(calls)))  # warm: imports, the tokenizer, the harness program
            for round_ in range(rounds):
                for kind in (("reopened", "held") if round_ % 2 == 0 else ("held", "reopened")):
                    if kind == "reopened":
                        await reopen(fn)
                    before, started = dict(made), time.perf_counter()
                    await asyncio.create_task(fn(train_input(rollout_id=next(calls))))
                    seconds[kind].append(time.perf_counter() - started)
                    opened[kind].append((made["pools"] - before["pools"], made["servers"] - before["servers"]))
                started = time.perf_counter()
                await reopen(fn)
                orchestrator = fn.orchestrator
                await orchestrator._open("train", orchestrator.settings, orchestrator.engine)
                seconds["open"].append(time.perf_counter() - started)
                await fn(train_input(rollout_id=next(calls)))  # untimed: its engine pool opens on first use
        finally:
            await fn.aclose()
            transport.EngineTransport._session, uvicorn.Server.startup = make_pool, startup  # type: ignore[method-assign]
    return seconds, opened


def run(args: argparse.Namespace) -> list[str]:
    from importlib.metadata import version

    from adapter.episodes.generations import installed

    seconds, opened = asyncio.run(_rounds(args.tokenizer, args.rounds))
    median = {kind: statistics.median(values) for kind, values in seconds.items()}
    saved, low, high = median_ci([r - h for r, h in zip(seconds["reopened"], seconds["held"], strict=True)])
    generation = installed().name

    def per_call(kind: str) -> str:
        pools, servers = (sum(column) / len(opened[kind]) for column in zip(*opened[kind], strict=True))
        return f"{pools:g} pool, {servers:g} server"

    bridge = "bridge served on loopback" if generation == "B" else "in-process bridge client"
    return [f"Machine: {machine()}. Generation {generation} (verifiers {version('verifiers')}, renderers "
            f"{version('renderers')}); {args.rounds} alternating rounds, medians.", "",
            "| per Miles train call (one arith-v1 episode) | seconds | opened per call (engine pools, uvicorn "
            "servers) |", "|---|---|---|",
            f"| reopened: engine pool, {bridge} and env serving opened for the call (before) | "
            f"{median['reopened']:.3f} | {per_call('reopened')} |",
            f"| held: the rollout function's open session and bridge (now, every call after the first) | "
            f"{median['held']:.3f} | {per_call('held')} |",
            f"| the open and close alone, no episode: the setup each call paid before | **{median['open']:.3f}** | |",
            "",
            f"Paired per round, reopened − held = {saved:+.3f} s (95 % CI {low:+.3f} to {high:+.3f}): the setup is "
            "small beside an episode whose harness is a subprocess, and the wall times vary by more than it. What "
            "the held session removes is the churn: a connection pool"
            f"{', a port and a uvicorn server' if generation == 'B' else ''} and the env's serving per call.", ""]


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--tokenizer", default=None,
                        help="a local Qwen3 tokenizer directory (default: the bundled one, copied to a temp dir)")
    parser.add_argument("--tiny", action="store_true", help="the fast test's size")
    parser.add_argument("--write", action="store_true", help="update docs/performance.md")
    args = parser.parse_args(argv)
    if args.tiny:
        args.rounds = 1
    from adapter.episodes.generations import installed
    from adapter.reference.assets import install_qwen3_tokenizer

    if args.tokenizer is None:
        args.tokenizer = str(install_qwen3_tokenizer(Path(tempfile.mkdtemp(prefix="vf-sglang-tokenizer-"))))

    return report(f"call-setup-{installed().name.lower()}",
                  f"## Per-call setup, generation {installed().name} (benchmarks/call_setup.py)", run(args),
                  write=args.write)


if __name__ == "__main__":
    main()
