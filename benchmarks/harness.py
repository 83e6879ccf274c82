"""What a real episode costs in CPU, with and without the harness program's bytecode, in `vf-sglang demo`.

    uv run python -m benchmarks.harness --write    # about 4 minutes on 2 cores (the tiny model cached)

Verifiers runs each episode's harness (the null harness: a uv script importing openai and mcp)
as its own process. Where PYTHONDONTWRITEBYTECODE is set (these machines, most containers) and
the script's environment holds no bytecode, every such process compiles openai and mcp again.
The adapter's harness preparation sets UV_COMPILE_BYTECODE=1 for Verifiers' `uv sync --script`
(`adapter.episodes.harness_uv.prepared_env`), so the environment is compiled once.

Two configurations, each with a harness uv cache of its own (a fresh XDG_CACHE_HOME; the tiny
model's cache is shared through VF_SGLANG_CACHE), both under PYTHONDONTWRITEBYTECODE=1:
  without   UV_COMPILE_BYTECODE=0 in the environment (the user's choice, which the adapter keeps)
  with      the adapter's default
Each: one warm-up demo (fills its harness cache), then `demo --groups 1` and `--groups 5` (4
episodes a group), alternating configurations. The CPU of a run is user + sys of the demo's
whole process tree (every harness, tool server and the engine, reaped by it). The marginal
episode CPU is (CPU at 5 groups − CPU at 1 group) / 16: start-up and the engine's load cancel.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from adapter.episodes.caches import user_cache_dir
from benchmarks.common import machine, report

CONFIGS = {"without": {"UV_COMPILE_BYTECODE": "0"}, "with": {}}
N = 4  # the demo's rollouts per group


@dataclass(frozen=True)
class DemoRun:
    config: str
    groups: int
    cpu_s: float
    wall_s: float


def _tree_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def demo(config: str, groups: int, root: Path, model_cache: Path) -> DemoRun:
    """One `vf-sglang demo` in its own process; the CPU of its reaped process tree."""
    env = {k: v for k, v in os.environ.items() if k not in ("UV_COMPILE_BYTECODE", "UV_CACHE_DIR")}
    env.update({"PYTHONDONTWRITEBYTECODE": "1", "XDG_CACHE_HOME": str(root / config),
                "VF_SGLANG_CACHE": str(model_cache), **CONFIGS[config]})
    argv = [sys.executable, "-m", "adapter.cli", "demo", "--groups", str(groups), "--n", str(N), "--quiet",
            "--out", str(root / f"{config}-{groups}.jsonl")]
    before, started = _tree_cpu(), time.monotonic()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"demo ({config}, {groups} groups) exited {done.returncode}: {done.stderr[-2000:]}")
    return DemoRun(config, groups, _tree_cpu() - before, time.monotonic() - started)


def run(*, tiny: bool) -> list[str]:
    small, large = (1, 2) if tiny else (1, 5)
    model_cache = Path(os.environ.get("VF_SGLANG_CACHE") or user_cache_dir())
    header = machine()
    with tempfile.TemporaryDirectory(prefix="vf-sglang-harness-bench-") as tmp:
        root = Path(tmp)
        for config in CONFIGS:  # warm-up: fills each configuration's harness cache (and builds the model once)
            demo(config, 1, root, model_cache)
        runs = [demo(config, groups, root, model_cache) for groups in (small, large) for config in CONFIGS]
    by = {(r.config, r.groups): r for r in runs}
    episodes = (large - small) * N
    per = {c: (by[c, large].cpu_s - by[c, small].cpu_s) / episodes for c in CONFIGS}
    lines = [f"Machine: {header}.", "",
             "| harness environment | demo CPU, 1 group (s) | demo CPU, "
             f"{large} groups (s) | CPU per episode (s) |", "|---|---|---|---|"]
    lines += [f"| {c} bytecode | {by[c, small].cpu_s:.1f} | {by[c, large].cpu_s:.1f} | {per[c]:.2f} |"
              for c in CONFIGS]
    lines += ["", f"Per episode (marginal, {large} vs {small} groups of {N}, PYTHONDONTWRITEBYTECODE=1): "
              f"**{per['without']:.2f} s → {per['with']:.2f} s** of CPU "
              f"({per['with'] / per['without']:.2f}×) with the adapter compiling the harness environment once."]
    return lines


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true", help="1 and 2 groups (a test's size)")
    parser.add_argument("--write", action="store_true", help="update docs/performance.md")
    args = parser.parse_args(argv)
    return report("harness", "## A real episode's CPU: the harness program's bytecode (benchmarks/harness.py)",
                  run(tiny=args.tiny), write=args.write)


if __name__ == "__main__":
    main()
