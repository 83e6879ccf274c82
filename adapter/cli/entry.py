"""`vf-sglang`: the command line. Each subcommand is a thin call into the package.

Errors the user can act on (`VfSglangError`, a server that cannot listen) print as one line on
stderr with exit status 2; anything else is a bug and keeps its traceback. Every parser has
`allow_abbrev=False` (`adapter.cli.help_text.add_command`).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from adapter import __version__
from adapter.cli.check import add_check_command
from adapter.cli.commands import add_job_commands, add_router_policy
from adapter.cli.help_text import (
    COMPAT_HELP,
    MILES_COMMAND_HELP,
    SERVE_BRIDGE_HELP,
    VERSIONS_HELP,
    add_command,
)
from adapter.cli.interrupts import Interrupted
from adapter.config.settings import Settings
from adapter.engine.recording import record_option
from adapter.errors import VfSglangError
from adapter.miles.flavor import FLAVORS
from adapter.miles.launcher import DEFAULT_RAY_ADDRESS, DEFAULT_TRAIN_SCRIPT


def _versions(_: argparse.Namespace) -> int:
    from adapter.versions import breaks
    from adapter.versions.coinstall import installed_check
    from adapter.versions.gate import installed_decision

    decision = installed_decision()
    print(f"verifiers: {decision.verifiers or 'not installed'}")
    print(f"renderers: {decision.renderers or 'not installed'}")
    if decision.supported and decision.generation is not None:
        from adapter.episodes.generations import harness_runtime
        from adapter.episodes.prefork import chosen

        print(f"generation: {decision.generation}{decision.prerelease_note}")
        if decision.warning:
            print(f"warning: {decision.warning}")
        print(harness_runtime(chosen(), decision.verifiers)[1])
    else:
        print(f"refused: {decision.reason}")
    # openai against the installed verifiers' and sglang's pins: a conflict with sglang's alone is
    # information (exit 0: the adapter never imports sglang); an openai outside the installed
    # verifiers' own requirement is a broken install of what the adapter drives (exit 1).
    check = installed_check()
    for line in check.lines():
        print(line)
    for line in breaks.lines():
        print(line)
    broken = check.broken_reason
    if broken is not None:
        print(f"broken: {broken}")
    return 0 if decision.supported and broken is None else 1


async def _serve_bridge_async(args: argparse.Namespace) -> int:
    from adapter.bridge.handler import create_app
    from adapter.bridge.serve import served
    from adapter.cli.commands import ROUTER_FLAG
    from adapter.cli.routing import router_notes
    from adapter.config.settings import Settings
    from adapter.engine.client import SGLangClient, Timeouts
    from adapter.engine.recording import recorder_for, wrap_of

    settings = Settings(
        rollout_max_context_len=args.max_context_len,
        rollout_max_prompt_len=args.max_prompt_len,
        rollout_max_response_len=args.max_response_len,
        sglang_router_policy=args.router_policy,
        session_lru_size=args.session_lru_size,
        flag_names=ROUTER_FLAG,
    )
    engine = SGLangClient(args.sglang_url, timeouts=Timeouts(read=args.read_timeout), max_in_flight=args.max_in_flight,
                          wrap_transport=wrap_of(recorder_for(args)))
    try:
        # the same look at the engine address that rollout and check take: a router is described
        # (workers, the retry flag the adapter expects), one met without --router-policy warned about
        notes = router_notes(await engine.discover(), settings)
        for line in (notes.status, notes.warning and f"warning: {notes.warning}"):
            if line:
                print(f"vf-sglang: {line}", file=sys.stderr, flush=True)
        app = create_app(settings, engine, model=args.model)
        async with served(app, host=args.host, port=args.port) as url:
            print(f"vf-sglang bridge ready at {url} (engine {args.sglang_url})", flush=True)
            await asyncio.Event().wait()  # until interrupted
    finally:
        await engine.aclose()
    return 0


def _serve_bridge(args: argparse.Namespace) -> int:
    from adapter.bridge.serve import run_event_loop
    from adapter.cli.arguments import check_port_free
    from adapter.errors import ServeError

    check_port_free(args.host, args.port)  # one line naming --port, before uvicorn logs its own
    try:
        return run_event_loop(_serve_bridge_async(args))
    except KeyboardInterrupt:
        return 0
    except ServeError as exc:
        print(f"vf-sglang: error: {exc}", file=sys.stderr)
        return 2


def _positive_seconds(text: str) -> float:
    """A timeout flag: a finite number of seconds above 0 (nan, inf, 0 and negatives refused)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds above 0, got {text}")
    return value


def _add_serve_bridge(commands: Any) -> None:
    serve = add_command(commands, "serve-bridge", SERVE_BRIDGE_HELP)
    serve.add_argument("--sglang-url", required=True, help="the SGLang server or router, e.g. http://127.0.0.1:30000")
    record_option(serve)
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    serve.add_argument("--port", type=int, default=0, help="port to listen on (default: a free port)")
    serve.add_argument("--model", default=None, help="the model id episodes use; with --max-context-len it is "
                       "advertised on /v1/models so Renderers refuses overlong prompts before the engine")
    serve.add_argument("--max-context-len", type=int, default=None, help="the engine's context length")
    serve.add_argument("--max-prompt-len", type=int, default=None, help="cap on each session's first prompt")
    serve.add_argument("--max-response-len", type=int, default=None, help="cap on tokens per turn")
    add_router_policy(serve)
    serve.add_argument("--read-timeout", type=_positive_seconds, default=600.0,
                       help="seconds one /generate attempt may take, whole body included (finite, > 0)")
    concurrency = Settings.sglang_server_concurrency  # Miles' default, one engine
    serve.add_argument("--max-in-flight", type=int, default=concurrency,
                       help=f"engine requests on the wire at once; more wait their turn (default: {concurrency}, "
                       "Miles' sglang_server_concurrency for one engine)")
    serve.add_argument("--session-lru-size", type=int, default=10_000,
                       help="sessions remembered for the first-turn prompt cap (default: 10000)")
    serve.set_defaults(run=_serve_bridge)


def _miles_command(args: argparse.Namespace) -> int:
    from adapter.miles.launcher import miles_command, parse_env_vars

    miles_args = list(args.miles_args)
    if miles_args[:1] == ["--"]:
        miles_args = miles_args[1:]
    launch = miles_command(
        config=args.config, hf_checkpoint=args.hf_checkpoint, miles_args=miles_args,
        env_source_dirs=args.env_source_dir, extra_env_vars=parse_env_vars(args.extra_env_vars),
        miles_version=args.miles_version, train_script=args.train_script, python=args.python,
        ray_address=args.ray_address,
    )
    for source in launch.added_sources:
        print(f"vf-sglang: added the bundled tasksets directory {source} to the workers' PYTHONPATH",
              file=sys.stderr)
    print(launch.shell())
    return 0


def _add_miles_command(commands: Any) -> None:
    cmd = add_command(commands, "miles-command", MILES_COMMAND_HELP)
    cmd.add_argument("--config", required=True, help="the Verifiers V1 EnvConfig TOML")
    cmd.add_argument("--hf-checkpoint", required=True, help="the policy checkpoint (HF format)")
    cmd.add_argument("--env-source-dir", action="append", default=[],
                     help="a directory with the environment's taskset modules (repeatable); put on PYTHONPATH")
    cmd.add_argument("--extra-env-vars", default=None,
                     help='extra worker environment, JSON ({"K": "V"}) or K=V,K2=V2; wins over the ambient one')
    cmd.add_argument("--miles-version", choices=FLAVORS, default=None,
                     help="the Miles the job runs: main (MILES_USE_LEGACY_ROLLOUT_V1) or the published "
                     "miles-rl 0.0.2 (MILES_EXPERIMENTAL_ROLLOUT_REFACTOR); default: the importable Miles")
    cmd.add_argument("--train-script", default=DEFAULT_TRAIN_SCRIPT,
                     help=f"Miles' train.py (default: {DEFAULT_TRAIN_SCRIPT}, Miles' image)")
    cmd.add_argument("--python", default="python3", help="the interpreter that runs it (default: python3)")
    cmd.add_argument("--ray-address", default=DEFAULT_RAY_ADDRESS,
                     help="an http(s):// Ray dashboard (the command is `ray job submit`), or a cluster address "
                     f"(auto, HOST:PORT: the driver runs directly with RAY_ADDRESS); default {DEFAULT_RAY_ADDRESS}")
    cmd.add_argument("miles_args", nargs=argparse.REMAINDER, help="-- then any further Miles arguments")
    cmd.set_defaults(run=_miles_command)


def _compat(args: argparse.Namespace) -> int:
    from adapter.cli.compat import DOC_NAME, render_doc, render_table

    if args.write:
        out = Path(args.out) if args.out else Path.cwd() / DOC_NAME
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(render_doc(existing=out.read_text() if out.is_file() else None))
        print(f"wrote {out}")
    else:
        print(render_table())
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vf-sglang",
        description="Run Verifiers V1 environments against an SGLang-served policy and turn "
        "the traces into Miles-shaped Sample groups.",
        allow_abbrev=False,
    )
    parser.add_argument("--version", action="version", version=f"vf-sglang {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    versions = add_command(commands, "versions", VERSIONS_HELP)
    versions.set_defaults(run=_versions)
    _add_serve_bridge(commands)
    _add_miles_command(commands)
    add_job_commands(commands)
    add_check_command(commands)
    compat = add_command(commands, "compat", COMPAT_HELP)
    compat.add_argument("--write", action="store_true",
                        help="write the table as a markdown document (to --out, default ./docs/compatibility.md)")
    compat.add_argument("--out", default=None,
                        help="where --write writes (default: docs/compatibility.md under the working directory)")
    compat.set_defaults(run=_compat)
    return parser


# The adapter itself never needs torch (tokenizers only; the reference engine brings its own).
# Without torch, transformers prints an advisory on import that no vf-sglang user can act on.
QUIET_TRANSFORMERS = {"TRANSFORMERS_NO_ADVISORY_WARNINGS": "1"}


def main(argv: Sequence[str] | None = None) -> int:
    from adapter.errors import ServeError

    for name, value in QUIET_TRANSFORMERS.items():
        os.environ.setdefault(name, value)
    args = build_parser().parse_args(argv)
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return run(args)
    except (VfSglangError, ServeError) as exc:  # the user can act on these
        print(f"vf-sglang: error: {exc}", file=sys.stderr)
        return 2
    except Interrupted as exc:
        print(f"vf-sglang: {exc}", file=sys.stderr)
        return exc.exit_status


if __name__ == "__main__":
    sys.exit(main())
