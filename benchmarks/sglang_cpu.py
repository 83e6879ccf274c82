"""Bridge overhead against real SGLang on CPU: the unmodified PyPI release (`e2e.sglang_cpu`: the
tiny Qwen3, deterministic mode, the CPU flags) decoding 64 tokens per request.

The same paths, rounds and report as `benchmarks.reference` (raw: Miles' own httpx POST to
{engine}/generate; in-process: generation A's door; served: the serve-bridge process), with real
SGLang as the engine: started here as the `sglang_cpu_server` fixture starts it, or an already
running one (`--engine-url`, e.g. the sglang-cpu lane's server). Greedy with `ignore_eos`, so
every request decodes exactly `--tokens` tokens; the engine serves one request at a time.
Needs SGLang's cached venv (`python -m e2e.sglang_cpu install`; built when missing).

    uv run python -m benchmarks.sglang_cpu [--write] [--version 0.5.16] [--rounds N]
    uv run python -m benchmarks.sglang_cpu --tiny --engine-url http://127.0.0.1:30000
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
from collections.abc import Iterator

from adapter.engine.client import SGLangClient
from benchmarks.common import machine, report
from benchmarks.reference import decoding_parser, measure, parse_decoding, tables
from e2e.sglang_cpu import DEFAULT_VERSION, serving

TITLE = "## Against real SGLang on CPU (benchmarks/sglang_cpu.py)"
GOALS = {"in-process": 1.01, "served": 1.01}


@contextlib.contextmanager
def sglang_engine(args: argparse.Namespace) -> Iterator[tuple[str, str]]:
    """(url, where it came from): `--engine-url` as given, else real SGLang `--version` started
    as the fixture starts it (deterministic mode) and ended after the block."""
    if args.engine_url:
        yield args.engine_url.rstrip("/"), "an already running server (`--engine-url`)"
        return
    with serving(args.version, deterministic=True) as server:
        yield server.url, f"started by `e2e.sglang_cpu.serving` in {server.startup_s:.0f} s"


async def server_facts(url: str) -> tuple[str, str]:
    """(version, mode) as the server itself reports them (`SGLangClient.server_info`)."""
    engine = SGLangClient(url)
    try:
        info = await engine.server_info()
    finally:
        await engine.aclose()
    if info is None:
        raise RuntimeError(f"{url} answered no /server_info object: is it an SGLang server? (see its log)")
    mode = "deterministic" if info.get("enable_deterministic_inference") else "non-deterministic"
    return str(info.get("version")), f"{mode} mode"


async def run(args: argparse.Namespace) -> list[str]:
    """Start (or find) the engine, measure the three paths paired, and build the report."""
    started = machine()
    with sglang_engine(args) as (url, origin):
        version, mode = await server_facts(url)
        times = await measure(url, args)
    load = os.getloadavg()
    return [*tables(times, args, started=started, label=f"real SGLang {version} on CPU", goals=GOALS),
            f"SGLang {version}, {origin}, in {mode}: the tiny Qwen3 (`adapter.reference.tiny_model`) with the CPU "
            f"flags of `e2e/sglang_cpu/server.py`. Load average when the measurement ended: {load[0]:.2f} / "
            f"{load[1]:.2f} / {load[2]:.2f} (1/5/15 min).", ""]


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = decoding_parser(__doc__)
    parser.add_argument("--version", default=DEFAULT_VERSION, help="the SGLang release to start (0.5.23, 0.5.16)")
    parser.add_argument("--engine-url", default=None, help="a running SGLang server to use instead of starting one")
    return parse_decoding(parser, argv)


def main(argv: list[str] | None = None) -> list[str]:
    args = parse(argv)
    return report("sglang-cpu", TITLE, asyncio.run(run(args)), write=args.write)


if __name__ == "__main__":
    main()
