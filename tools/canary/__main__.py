"""`python -m tools.canary {run,bump}`: the canary lane's command line (see tools/canary/__init__.py).

    run  [--write] [--find-links DIR] [--cell NAME] [--no-schema] [--exitfirst] [--run-dir DIR]
    bump PACKAGE [VERSION]
    pins [--cell ENV]... [--check]
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from tools.canary import bump as bumping
from tools.canary import pins as pinning
from tools.canary.cells import DEPENDENCIES, PRERELEASE, RESOLVE, SchemaCell, contract_cells
from tools.canary.releases import ResolveError, newest
from tools.canary.report import NEXT_FILE, Canary, next_verdict, render_section
from tools.canary.runner import REPO, CellResult, run_contract_cell, run_schema_cell
from tools.ci.runner import CI_LANES_ENV


def resolve_newest(find_links: Sequence[Path]) -> dict[str, str]:
    found = {key: newest(spec, find_links=find_links) for key, spec in RESOLVE.items()}
    found |= {key: newest(spec, find_links=find_links, prerelease=True) for key, spec in PRERELEASE.items()}
    found |= {f"dep:{name}": newest(name, find_links=find_links) for name in DEPENDENCIES}
    print("canary: newest published: " + ", ".join(f"{k} {v}" for k, v in found.items()), flush=True)
    return found


def run(args: argparse.Namespace) -> int:
    links = [Path(p).absolute() for p in args.find_links]
    try:
        found = resolve_newest(links)
    except ResolveError as exc:
        print(f"canary: error: {exc}", file=sys.stderr)
        return 2
    run_dir = Path(args.run_dir).absolute()
    beside = pinning.sets_beside(os.environ.get(CI_LANES_ENV, ""))
    results = []
    for cell in contract_cells(found, held=pinning.held_test_tools()):
        if args.cell and cell.name not in args.cell:
            continue
        print(f"canary: cell {cell.name}: verifiers {cell.verifiers}, renderers {cell.renderers}: {cell.verdict}",
              flush=True)
        result = run_contract_cell(cell, run_dir, find_links=links, exitfirst=args.exitfirst, beside=beside)
        results.append((cell, result))
        judged = f"the same {len(result.installed)} packages as {result.judged_by}'s pins: judged by that matrix cell"
        print(f"canary: cell {cell.name}: {judged if result.judged_by else result.outcome}", flush=True)
    schema = SchemaCell(found["sglang"])
    schema_result = (run_schema_cell(schema.sglang, run_dir, find_links=links) if args.schema
                     else CellResult(f"sglang-{schema.sglang}", None))
    canary = Canary(datetime.date.today().isoformat(), found, results, (schema, schema_result))
    section = render_section(canary)
    print(section)
    (run_dir / "report.md").write_text(section + "\n")
    (run_dir / NEXT_FILE).write_text(next_verdict(canary) + "\n")  # docs/ci.md shows it (tools.ci.report)
    if args.write:
        bumping.write_newest_section(section)
    failures = canary.gating_failures()
    for failure in failures:
        print(f"canary: FAIL {failure}", file=sys.stderr)
    return 1 if failures else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.canary", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run_cmd = sub.add_parser("run", help="resolve the newest releases, run the cells, report")
    run_cmd.add_argument("--write", action="store_true", help="write docs/compatibility.md's newest-published section")
    run_cmd.add_argument("--find-links", action="append", default=[], metavar="DIR",
                         help="also look for releases in DIR (a planted local wheel is then the newest)")
    run_cmd.add_argument("--cell", action="append", default=[], help="run only the contract cells named (repeatable)")
    run_cmd.add_argument("--no-schema", dest="schema", action="store_false", help="skip the sglang schema checks")
    run_cmd.add_argument("--exitfirst", action="store_true", help="stop each cell at its first failing check")
    run_cmd.add_argument("--run-dir", default=str(REPO / "runs" / "canary"))
    run_cmd.set_defaults(run=run)
    bump_cmd = sub.add_parser("bump", help="move one package's pin, regenerate docs/compatibility.md, name the lanes")
    bump_cmd.add_argument("package", choices=sorted(bumping.BY_NAME))
    bump_cmd.add_argument("version", nargs="?", help="default: the newest published")
    bump_cmd.set_defaults(run=bumping.main)
    pins_cmd = sub.add_parser("pins", help="write the matrix cells' transitive pins (e2e/pins/<cell>.txt)")
    pins_cmd.add_argument("--cell", action="append", default=[], help="only the cells named (repeatable)")
    pins_cmd.add_argument("--check", action="store_true", help="write nothing; exit 1 when a file misses a direct dep")
    pins_cmd.set_defaults(run=pinning.main)
    args = parser.parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
