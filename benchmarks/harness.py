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

    uv run python -m benchmarks.harness --runtimes --write    # Verifiers' subprocess runtime vs prefork (~25 min)

The harness runtimes side by side, in one run (section `harness-runtime`): `vf-sglang rollout` of
arith-v1 (one model turn) and echo-tool-v1 (a tool server per rollout) against the instant stub
engine (`benchmarks.stub`: no model), with `--harness-runtime subprocess` and `prefork`, at 1 and
11 groups of 4 after one warm-up run each (the harness uv cache; the zygotes' learned imports).
Reported: CPU-s per episode of the whole process tree at the margin (the CLI's reaped tree: every
harness program, tool server, zygote and probe; the stub is outside it), episodes per second at
the margin; then a whole run of 64 groups (256 episodes: one Miles rollout step of 32 prompts ×
8 samples, `--step-groups`) per taskset and runtime, start-up included, its episodes per second
by the clock; and the program start latency (p50, p99 over 60 runs, 4 at a time: from the runtime's
`run` to the first line after the null harness program's imports, `openai` and `mcp`, through
generation A's runtime classes).
"""

from __future__ import annotations

import argparse
import asyncio
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

ENVS = Path(__file__).resolve().parents[1] / "fixtures" / "envs"

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


RUNTIMES = ("subprocess", "prefork")
TASKSETS = ("arith-v1", "echo-tool-v1")
SIZES = (1, 11)  # groups of N: the margin is 40 episodes (8 moved the per-episode figure by tens of percent)
STEP_GROUPS = 64  # a whole run of 256 episodes: one Miles rollout step of 32 prompts × 8 samples
# Rollouts at once, every run: all 256 at once, Verifiers' subprocess runtime keeps 256 interpreters
# starting on 2 cores and runs past the tasksets' 120 s rollout timeout (groups dropped, exit 3).
MAX_IN_FLIGHT = 16
LATENCY_RUNS, LATENCY_CONCURRENCY = 60, 4
# What the null harness program imports before its first line of work (its PEP 723 deps).
START_PROBE = ("import argparse, asyncio, json, os, time\nfrom openai import AsyncOpenAI\nimport mcp\n"
               "print(time.time())\n")


@dataclass(frozen=True)
class RolloutRun:
    runtime: str
    taskset: str
    groups: int
    cpu_s: float
    wall_s: float


def rollout(runtime: str, taskset: str, groups: int, url: str, tokenizer: Path, out: Path) -> RolloutRun:
    """One `vf-sglang rollout` in its own process; the CPU of its reaped process tree."""
    argv = [sys.executable, "-m", "adapter.cli", "rollout", "--sglang-url", url, "--config",
            str(ENVS / f"{taskset}.toml"), "--model", "Qwen/Qwen3-0.6B", "--tokenizer", str(tokenizer),
            "--groups", str(groups), "--n", str(N), "--max-in-flight", str(MAX_IN_FLIGHT), "--quiet",
            "--harness-runtime", runtime, "--out", str(out)]
    before, started = _tree_cpu(), time.monotonic()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"rollout ({runtime}, {taskset}, {groups} groups) exited {done.returncode}: "
                         f"{done.stderr[-2000:]}")
    return RolloutRun(runtime, taskset, groups, _tree_cpu() - before, time.monotonic() - started)


async def _start_latencies(runtime_class: type, script: Path, runs: int) -> list[float]:
    from verifiers.v1.runtimes import SubprocessConfig

    from adapter.episodes.prefork import UV_SCRIPT_WRAPPERS

    argv = ["sh", "-c", next(iter(UV_SCRIPT_WRAPPERS)), "uv-script", str(Path(sys.executable).parent.parent),
            sys.executable, str(script)]
    slots = asyncio.Semaphore(LATENCY_CONCURRENCY)

    async def one(index: int) -> float:
        async with slots:
            runtime = runtime_class(SubprocessConfig(), f"vf-latency-{os.getpid()}-{index}")
            await runtime.start()
            try:
                started = time.time()
                result = await runtime.run(argv, {})
                return float(result.stdout.split()[0]) - started
            finally:
                await runtime.stop()

    return list(await asyncio.gather(*[one(i) for i in range(runs)]))


def start_latencies(root: Path) -> dict[str, list[float]]:
    """Seconds from `run` to the program's first line after its imports, per runtime (warm-up excluded)."""
    from verifiers.v1.runtimes import SubprocessRuntime

    from adapter.episodes import prefork
    from adapter.episodes.generations import union_runtime

    script = root / "start_probe.py"
    script.write_text(START_PROBE)
    pool = prefork.process_pool()
    union_runtime.install(pool)
    try:
        asyncio.run(_start_latencies(union_runtime.PreforkRuntime, script, LATENCY_CONCURRENCY))  # the zygote's start
        return {"subprocess": asyncio.run(_start_latencies(SubprocessRuntime, script, LATENCY_RUNS)),
                "prefork": asyncio.run(_start_latencies(union_runtime.PreforkRuntime, script, LATENCY_RUNS))}
    finally:
        union_runtime.uninstall()
        prefork.close_process_pool()


def run_runtimes(step_groups: int = STEP_GROUPS) -> list[str]:
    from adapter.reference.assets import install_qwen3_tokenizer
    from benchmarks.common import percentile
    from benchmarks.stub import running

    header = machine()
    with tempfile.TemporaryDirectory(prefix="vf-sglang-runtime-bench-") as tmp:
        root = Path(tmp)
        tokenizer = install_qwen3_tokenizer(root / "tokenizer")
        with running(delay=0.0) as (url, _):
            for runtime in RUNTIMES:  # warm-up: the harness uv cache, the zygotes' learned imports
                for taskset in TASKSETS:
                    rollout(runtime, taskset, 1, url, tokenizer, root / "warm.jsonl")
            runs = [rollout(runtime, taskset, groups, url, tokenizer, root / "out.jsonl")
                    for taskset in TASKSETS for groups in ((*SIZES, step_groups) if step_groups else SIZES)
                    for runtime in RUNTIMES]
        latency = start_latencies(root)
    by = {(r.runtime, r.taskset, r.groups): r for r in runs}
    small, large = SIZES
    episodes = (large - small) * N
    lines = [f"Machine: {header}.", "", f"`vf-sglang rollout` against the instant stub engine, {small} and {large} "
             f"groups of {N}, {MAX_IN_FLIGHT} rollouts at once; the margin is {episodes} episodes.", "",
             f"| taskset | runtime | CPU, {small} group (s) | CPU, {large} groups (s) | CPU per episode (s) | "
             f"wall, {small} / {large} groups (s) | episodes/s, {large} groups | episodes/s at the margin (wall) | "
             f"episodes/s, {os.cpu_count()} cores ÷ CPU per episode |",
             "|---|---|---|---|---|---|---|---|---|"]
    per: dict[tuple[str, str], tuple[float, float, float, float]] = {}
    for taskset in TASKSETS:
        for runtime in RUNTIMES:
            a, b = by[runtime, taskset, small], by[runtime, taskset, large]
            cpu = (b.cpu_s - a.cpu_s) / episodes
            whole = large * N / b.wall_s  # start-up included: what this machine did on the run
            margin = episodes / max(b.wall_s - a.wall_s, 1e-9)  # the same run's rate once started, by the clock
            bound = (os.cpu_count() or 1) / cpu  # the CPU-bound rate at the margin (start-up paid once)
            per[taskset, runtime] = (cpu, whole, margin, bound)
            lines.append(f"| {taskset} | {runtime} | {a.cpu_s:.1f} | {b.cpu_s:.1f} | {cpu:.3f} | {a.wall_s:.1f} / "
                         f"{b.wall_s:.1f} | {whole:.2f} | {margin:.2f} | {bound:.1f} |")
    lines += ["", *[f"{taskset}: **{per[taskset, 'subprocess'][0]:.2f} → {per[taskset, 'prefork'][0]:.3f} CPU-s per "
                    f"episode** ({per[taskset, 'subprocess'][0] / max(per[taskset, 'prefork'][0], 1e-9):.1f}× less); "
                    f"episodes per second {per[taskset, 'prefork'][1] / per[taskset, 'subprocess'][1]:.1f}× on the "
                    f"whole {large}-group run (start-up included), "
                    f"{per[taskset, 'prefork'][2] / per[taskset, 'subprocess'][2]:.1f}× at the margin by the clock, "
                    f"{per[taskset, 'prefork'][3] / per[taskset, 'subprocess'][3]:.1f}× CPU-bound at the margin."
                    for taskset in TASKSETS]]
    if step_groups:
        lines += ["", f"A whole run of {step_groups * N} episodes ({step_groups} groups of {N}: one Miles rollout step "
                  "of 32 prompts × 8 samples), start-up included, by the clock:", "",
                  f"| taskset | runtime | wall (s) | episodes/s | CPU (s) | CPU per episode, {small} → {step_groups} "
                  "groups (s) |", "|---|---|---|---|---|---|"]
        for taskset in TASKSETS:
            for runtime in RUNTIMES:
                run, first = by[runtime, taskset, step_groups], by[runtime, taskset, small]
                wide = (run.cpu_s - first.cpu_s) / ((step_groups - small) * N)  # a wider margin: start-up noise shrinks
                lines.append(f"| {taskset} | {runtime} | {run.wall_s:.1f} | {step_groups * N / run.wall_s:.2f} | "
                             f"{run.cpu_s:.1f} | {wide:.3f} |")
        lines.append("")
        for taskset in TASKSETS:
            ratio = by["subprocess", taskset, step_groups].wall_s / by["prefork", taskset, step_groups].wall_s
            lines.append(f"{taskset}: **{ratio:.1f}× the episodes per second** on the whole "
                         f"{step_groups * N}-episode run.")
    lines += ["", f"Program start latency ({LATENCY_RUNS} runs, {LATENCY_CONCURRENCY} at a time; to the first line "
              "after `openai` and `mcp` are imported):", "", "| runtime | p50 (s) | p99 (s) |", "|---|---|---|"]
    lines += [f"| {runtime} | {percentile(latency[runtime], 0.5):.3f} | {percentile(latency[runtime], 0.99):.3f} |"
              for runtime in RUNTIMES]
    return lines


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true", help="1 and 2 groups (a test's size)")
    parser.add_argument("--runtimes", action="store_true", help="the harness runtimes side by side instead")
    parser.add_argument("--write", action="store_true", help="update docs/performance.md")
    parser.add_argument("--step-groups", type=int, default=STEP_GROUPS,
                        help=f"with --runtimes: groups of the whole run measured too (default {STEP_GROUPS}; 0: none)")
    args = parser.parse_args(argv)
    if args.runtimes:
        return report("harness-runtime", "## Episodes that cost milliseconds: the harness runtimes "
                      "(benchmarks/harness.py --runtimes)", run_runtimes(args.step_groups), write=args.write)
    return report("harness", "## A real episode's CPU: the harness program's bytecode (benchmarks/harness.py)",
                  run(tiny=args.tiny), write=args.write)


if __name__ == "__main__":
    main()
