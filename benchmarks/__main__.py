"""Every benchmark in one run: overhead (instant stub), trace → Sample conversion, load (Miles-scale concurrency), a
train call's setup (the installed generation), where
torch is installed (the `demo` group) the reference engine and a real episode's CPU in the demo
with and without the harness program's bytecode, and with `--sglang` real SGLang on
CPU (its venv is built on first use) — each section of docs/performance.md written by this one
invocation with `--write`. (The router benchmark needs smg: `benchmarks.router_load`.)

    uv run python -m benchmarks --write             # about 8 minutes on two busy cores
    uv run python -m benchmarks --write --sglang    # and real SGLang 0.5.23 (about 6 minutes more)
    uv run python -m benchmarks --tiny              # every scenario at a test's size
"""

from __future__ import annotations

import argparse
import importlib.util

from benchmarks import call_setup, conversion, harness, load, overhead, reference, sglang_cpu


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true", help="every scenario at a test's size")
    parser.add_argument("--write", action="store_true", help="update docs/performance.md")
    parser.add_argument("--sglang", action="store_true", help="also the real-SGLang benchmark (benchmarks.sglang_cpu)")
    args = parser.parse_args(argv)
    flags = [flag for flag, on in (("--tiny", args.tiny), ("--write", args.write)) if on]
    lines = [*overhead.main(flags), *conversion.main(flags), *load.main(flags), *call_setup.main(flags)]
    if importlib.util.find_spec("torch") is None:
        print("reference engine, harness: skipped (need torch: the `demo` dependency group)")
    else:
        lines += [*reference.main(flags), *harness.main(flags)]
    if args.sglang:
        lines += sglang_cpu.main(flags)
    return lines


if __name__ == "__main__":
    main()
