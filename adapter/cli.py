"""`vf-sglang`: the command line. Each subcommand is a thin call into the package.

Errors the user can act on (`VfSglangError`) print as one line on stderr with exit status 2;
anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from adapter import __version__
from adapter.errors import VfSglangError


def _versions(_: argparse.Namespace) -> int:
    from adapter.versions import installed_decision

    decision = installed_decision()
    print(f"verifiers: {decision.verifiers or 'not installed'}")
    print(f"renderers: {decision.renderers or 'not installed'}")
    if decision.supported:
        print(f"generation: {decision.generation}")
        return 0
    print(f"refused: {decision.reason}")
    return 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vf-sglang",
        description="Run Verifiers V1 environments against an SGLang-served policy and turn "
        "the traces into Miles-shaped Sample groups.",
    )
    parser.add_argument("--version", action="version", version=f"vf-sglang {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    versions = commands.add_parser(
        "versions",
        help="print the installed verifiers/renderers and the API generation they map to",
    )
    versions.set_defaults(run=_versions)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return run(args)
    except VfSglangError as exc:
        print(f"vf-sglang: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
