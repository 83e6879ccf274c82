"""`python3 -m tools.ci run [--write docs/ci.md] [--logs DIR]` (what `.ci/run` runs) and
`python3 -m tools.ci changed [--base REF] [--run]` (the lanes a change touches). Exit 1 when a
lane fails."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tools.ci.affected import REPO, affected, changed_paths
from tools.ci.lanes import STAGES
from tools.ci.report import document, table
from tools.ci.runner import machine, run_lanes, run_stages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tools.ci")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="CI's stages, timed; the table printed last")
    run.add_argument("--write", type=Path, default=None, metavar="PATH", help="write the run's docs/ci.md here")
    run.add_argument("--logs", type=Path, default=REPO / "runs" / "ci", help="one log per lane (default runs/ci)")
    changed = sub.add_parser("changed", help="the lanes a change touches, by its paths")
    changed.add_argument("--base", default="main", help="compare against this ref's merge base (default main)")
    changed.add_argument("--run", action="store_true", help="run those lanes, one after another")
    changed.add_argument("--logs", type=Path, default=REPO / "runs" / "ci-changed")
    args = parser.parse_args(argv)

    if args.command == "run":
        results = run_stages(STAGES, args.logs)
        if args.write is not None:
            fast = args.logs / "fast.log"
            args.write.write_text(document(results, machine=machine(),
                                           fast_log=fast.read_text() if fast.is_file() else None))
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
