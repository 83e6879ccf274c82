"""`python3 -m tools.ci run [--write docs/ci.md] [--logs DIR]` (what `.ci/run` runs),
`python3 -m tools.ci changed [--base REF] [--run]` (the lanes a change touches) and
`python3 -m tools.ci stress LANE [--runs N] [--against hog|pair] [--write docs/ci.md]` (one lane, N
times, the machine busy beside it). Exit 1 when a lane fails (for stress: when any of its runs does,
or, against its pair, any partner's)."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path

from tools.ci import lane_docs
from tools.ci.affected import REPO, affected, changed_paths
from tools.ci.lanes import LANES, STAGES
from tools.ci.report import document, table
from tools.ci.runner import machine, run_lanes, run_stages
from tools.ci.stress import AGAINST, partner_runs, stress
from tools.ci.stress_doc import merge, row, run_table


def _runs(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a number of runs, 1 or more (not {text!r})")
    return int(text)


def _stress(args: argparse.Namespace) -> int:
    runs = stress(args.lane, runs=args.runs, against=args.against, logs=args.logs)
    by_lane = {args.lane: runs, **partner_runs(args.lane, runs)}  # pair: the partners' rows too
    print("\n" + "\n\n".join(run_table(lane, done) for lane, done in by_lane.items()))
    if args.write is not None:
        doc = args.write.read_text() if args.write.is_file() else None
        for lane, done in by_lane.items():
            doc = merge(doc, row(lane, done, datetime.now(UTC)))
        args.write.write_text(doc or "")
    return 0 if all(run.result.ok for done in by_lane.values() for run in done) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tools.ci")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="CI's lanes on their tracks, timed; the table printed last")
    run.add_argument("--write", type=Path, default=None, metavar="PATH", help="write the run's docs/ci.md here")
    run.add_argument("--logs", type=Path, default=REPO / "runs" / "ci", help="one log per lane (default runs/ci)")
    changed = sub.add_parser("changed", help="the lanes a change touches, by its paths")
    changed.add_argument("--base", default="main", help="compare against this ref's merge base (default main)")
    changed.add_argument("--run", action="store_true", help="run those lanes, one after another")
    changed.add_argument("--logs", type=Path, default=REPO / "runs" / "ci-changed")
    stressed = sub.add_parser("stress", help="one lane run again and again, the machine busy beside it")
    stressed.add_argument("lane", choices=list(LANES), metavar="LANE", help="a lane of tools/ci/lanes.py")
    stressed.add_argument("--runs", type=_runs, default=3, help="runs in a row (default 3)")
    stressed.add_argument("--against", choices=AGAINST, default="hog",
                          help="hog: one CPU-burning process per core (default); pair: the lanes CI runs beside it")
    stressed.add_argument("--write", type=Path, default=None, metavar="PATH",
                          help="write the lane's row into this file's Stress section (docs/ci.md)")
    stressed.add_argument("--logs", type=Path, default=REPO / "runs" / "ci-stress", help="run-K/<lane>.log per run")
    docs = sub.add_parser("docs", help="check the docs' lane tables against tools/ci/lanes.py (--write: rewrite)")
    docs.add_argument("--write", action="store_true", help="rewrite the stale tables")
    args = parser.parse_args(argv)

    if args.command == "docs":
        changed = lane_docs.write() if args.write else lane_docs.stale()
        for name in changed:
            print(f"{name}: {'rewritten' if args.write else 'stale (python3 -m tools.ci docs --write)'}")
        return 1 if changed and not args.write else 0

    if args.command == "stress":
        return _stress(args)
    if args.command == "run":
        results = run_stages(STAGES, args.logs)
        if args.write is not None:
            fast = args.logs / "fast.log"
            previous = args.write.read_text() if args.write.is_file() else None
            args.write.write_text(document(results, machine=machine(),
                                           fast_log=fast.read_text() if fast.is_file() else None, previous=previous))
    else:
        lanes = affected(changed_paths(args.base))
        if not lanes:
            print(f"no lane is touched by the changes since {args.base}")
            return 0
        for lane, path in lanes.items():
            print(f"{lane:<16} ({path})")
        if not args.run:
            return 0
        results = run_lanes(list(lanes), args.logs)
    print("\n" + table(results))
    return 0 if all(result.ok for result in results) else 1


if __name__ == "__main__":
    sys.exit(main())
