"""`python -m e2e.rl_cpu`: run the CPU RL loop against real SGLang, check it, report it.

    python -m e2e.rl_cpu [--steps N] [--lr X] ... [--write] [--plant BUG] [--record-steps DIR]
    python -m e2e.rl_cpu --from-run runs/rl-cpu/run.json [--write]     checks + report, no server

Writes `run.json`, `rl-cpu.md` and `rl-cpu.png` under --run-dir; with --write, also
docs/rl-cpu.md and docs/rl-cpu.png, but only when every check passed. Exit status 0 when every
check passed, 1 when one failed (each failure printed) or the run could not be made, 2 for
settings that cannot make a meaningful run. `--plant` applies a bug to every sample (the lane
must then fail: that is the check checking itself).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from adapter.reference.errors import TinyModelBuildError
from e2e.rl_cpu.checks import failures, thresholds
from e2e.rl_cpu.config import REPO, RLConfig
from e2e.rl_cpu.errors import RLCPUError
from e2e.rl_cpu.metrics import PLANTED
from e2e.rl_cpu.records import RunRecord
from e2e.rl_cpu.report import markdown, plot
from e2e.sglang_cpu.errors import SGLangCPUError

DOCS = REPO / "docs"
NAME = "rl-cpu"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m e2e.rl_cpu", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    defaults = RLConfig()
    for field in dataclasses.fields(RLConfig):
        if field.name in ("plant", "run_dir"):
            continue
        value, flag = getattr(defaults, field.name), f"--{field.name.replace('_', '-')}"
        if isinstance(value, bool):  # --control / --no-control
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=value, help=f"default {value}")
        else:
            parser.add_argument(flag, type=type(value), default=value, help=f"default {value}")
    parser.add_argument("--run-dir", type=Path, default=defaults.run_dir, help="checkpoints, run.json, the report")
    parser.add_argument("--plant", choices=sorted(PLANTED), default=None, help="apply a planted bug to every sample")
    parser.add_argument("--record-steps", type=Path, default=None, metavar="DIR",
                        help="write each step's samples and trainer log-probs as DIR/step-K.json (tests/rl_cpu/data)")
    parser.add_argument("--from-run", type=Path, default=None, metavar="RUN_JSON",
                        help="check and report a recorded run instead of running one")
    parser.add_argument("--write", action="store_true", help="also write docs/rl-cpu.{md,png} when the checks pass")
    return parser


def _config(args: argparse.Namespace) -> RLConfig:
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(RLConfig)}
    return RLConfig(**values)


def _report(run: RunRecord, failed: list[str], out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    plot(run, out_dir / f"{NAME}.png")
    (out_dir / f"{NAME}.md").write_text(markdown(run, failed, f"{NAME}.png"))


def _record(config: RLConfig, record_dir: Path | None) -> RunRecord:
    from e2e.rl_cpu.loop import run  # torch, transformers, the adapter: only when a run is made

    return run(config, record_dir=record_dir, progress=lambda line: print(line, flush=True))


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    config = _config(args)
    if problems := config.problems():
        print("\n".join(f"error: {p}" for p in problems), file=sys.stderr)
        return 2
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()}", flush=True)
    try:
        if args.from_run:
            run = RunRecord.from_json(args.from_run.read_text())
        else:
            run = _record(config, args.record_steps)
            (config.run_dir / "run.json").write_text(run.to_json())
    except (RLCPUError, SGLangCPUError, TinyModelBuildError, OSError) as exc:
        print(f"error: the RL run could not be made: {exc}", file=sys.stderr)
        return 1
    failed = failures(run, **thresholds(run.config))
    _report(run, failed, config.run_dir)
    print(markdown(run, failed, plot_name=None))
    print(f"machine load at the end: {os.getloadavg()}; report in {config.run_dir}", flush=True)
    if failed:
        print("\n".join(f"FAILED: {line}" for line in failed), file=sys.stderr)
        return 1
    if args.write:
        _report(run, failed, DOCS)
        print(f"wrote {DOCS / NAME}.md and {DOCS / NAME}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
