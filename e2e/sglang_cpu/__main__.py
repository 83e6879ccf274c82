"""`python -m e2e.sglang_cpu`: pin, install and serve real SGLang on CPU.

    lock    --version V      re-derive requirements/sglang-V.{in,txt} from the wheel's metadata
    install --version V      build (or find) the version's cached venv; prints one JSON line
    serve   --version V [--deterministic] [--port 0] [--model DIR] [--startup-timeout S]
            [--log PATH] [-- EXTRA SGLANG ARGS]
                             start the server, print one JSON ready line
                             {"url", "pid", "version", "log", ...} and serve until SIGINT/SIGTERM;
                             then its whole process group is ended. Exit status 1 if the server
                             dies or does not come up (the log's tail goes to stderr).

stdout carries only those result lines; progress (uv's, SGLang's start-up) goes to stderr or
the server log.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from adapter.reference.errors import TinyModelBuildError
from e2e.sglang_cpu.errors import SGLangCPUError
from e2e.sglang_cpu.lock import lock
from e2e.sglang_cpu.paths import locked_versions
from e2e.sglang_cpu.server import DEFAULT_VERSION, STARTUP_TIMEOUT_S, serving
from e2e.sglang_cpu.venv import ensure_venv


class _Stopped(Exception):
    """SIGINT or SIGTERM arrived: end the server and exit 0."""


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):  # the cleanup runs once, uninterrupted
        signal.signal(sig, signal.SIG_IGN)
    raise _Stopped(signal.Signals(signum).name)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m e2e.sglang_cpu", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    for name, text in (("lock", "re-derive the pinned requirements of a version"),
                       ("install", "build or find the version's venv"), ("serve", "start a server")):
        sub = commands.add_parser(name, help=text)
        sub.add_argument("--version", default=DEFAULT_VERSION,
                         help=f"sglang version (default {DEFAULT_VERSION}; pinned: {', '.join(locked_versions())})")
        if name == "install":
            sub.add_argument("--force", action="store_true", help="rebuild even when the cached venv is complete")
        if name == "serve":
            sub.add_argument("--deterministic", action="store_true", help="--enable-deterministic-inference")
            sub.add_argument("--port", type=int, default=0, help="loopback port (default 0: a free one)")
            sub.add_argument("--model", type=Path, default=None, help="model directory (default: the tiny model)")
            sub.add_argument("--startup-timeout", type=float, default=STARTUP_TIMEOUT_S, metavar="S",
                             help=f"seconds to wait for /health 200 (default {STARTUP_TIMEOUT_S:.0f})")
            sub.add_argument("--log", type=Path, default=None, help="server log file (default: under the cache)")
    return parser


def _serve(args: argparse.Namespace, extra: Sequence[str]) -> int:
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _on_signal)
    try:
        with serving(args.version, deterministic=args.deterministic, model_dir=args.model, port=args.port,
                     log_path=args.log, startup_timeout_s=args.startup_timeout, extra_args=extra) as server:
            print(json.dumps(server.describe()), flush=True)
            pause = threading.Event()
            while server.process.poll() is None:
                pause.wait(1.0)
            print(f"sglang {server.version} exited with status {server.process.returncode}; "
                  f"log {server.log_path}", file=sys.stderr)
            return 1
    except _Stopped as stopped:
        print(f"{stopped}: the server's process group is ended", file=sys.stderr)
        return 0


def main(argv: Sequence[str] | None = None) -> int:
    raw = list(sys.argv[1:] if argv is None else argv)
    extra = raw[raw.index("--") + 1:] if "--" in raw else []
    args = _parser().parse_args(raw[:raw.index("--")] if "--" in raw else raw)
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s", stream=sys.stderr)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # not a line per /health poll
    try:
        if args.command == "lock":
            print(lock(args.version))
            return 0
        if args.command == "install":
            venv = ensure_venv(args.version, force=args.force)
            print(json.dumps({"version": venv.version, "venv": str(venv.path), "python": str(venv.python),
                              "built": venv.built, "seconds": round(venv.seconds, 1)}))
            return 0
        return _serve(args, extra)
    except (SGLangCPUError, TinyModelBuildError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
