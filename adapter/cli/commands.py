"""The job subcommands of `vf-sglang`: `demo` (the main job, on the embedded reference
engine), `rollout` (the same pipeline against a real SGLang server) and `engine` (the
reference engine alone). Registered on the parser by `adapter.cli.entry`.

Flags are data: `JOB_FLAGS` says which `Settings` fields each job flag fills. `_settings`
builds `Settings` from it, with `flag_names` (its inverse) as the settings' own flag names, so
an error anywhere names what the user typed (`--groups`, `--n`), not the Miles
flag behind it. Cheap input checks (`adapter.cli.arguments`: model dir, tokenizer, port) run before
any slow work: before the tiny model is built and before an engine loads weights.

`--router-policy` (the policies Miles knows, `ROUTER_POLICIES`) is read as Miles'
`--sglang-router-policy` is: with consistent_hashing/manual every engine call of a trace carries
`X-SMG-Routing-Key` = the trace id. Before a `rollout`, the address is looked at once
(`adapter.cli.routing`): a router is described, and one met without `--router-policy` is warned
about. The exit status says how a job ended: 0 when every group was kept as it came,
`EXIT_DROPPED` (3) when the batch is complete but groups were dropped on the way (the summary
line counts them by reason), 2 for a refusal the user can act on.

`demo` is seeded by default (`--seed`, default `DEMO_SEED`): rollout i of the group at task-cursor
position c samples with seed `seed + c × n + i` (Miles' rule), which the reference engine feeds
to a per-request `torch.Generator`;
the engine decodes one request at a time (no batching), so what a rollout samples does not
depend on what else is in flight, and the table lists groups by task. Two runs print the same
table.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adapter.cli import interrupts
from adapter.cli.arguments import check_model_dir, check_port_free, check_tokenizer_dir
from adapter.cli.help_text import DEMO_HELP, ENGINE_HELP, ROLLOUT_HELP, add_command
from adapter.cli.progress import GroupProgress, progress_wanted
from adapter.cli.reference_engine import QWEN3, engine_app, tiny_model
from adapter.cli.results import dropped_groups, format_drops, format_table, in_task_order, write_jsonl
from adapter.cli.routing import router_notes
from adapter.config.settings import ROUTER_POLICIES, Settings
from adapter.engine.recording import CassetteRecorder, record_option, recorder_for
from adapter.engine.topology import Topology
from adapter.episodes.bundled import BUNDLED_IDS, add_env_sources
from adapter.episodes.generations import harness_runtime, installed
from adapter.episodes.prefork import DEFAULT_RUNTIME, RUNTIME_VAR, RUNTIMES, chosen

if TYPE_CHECKING:
    from adapter.rollout.job import Job
    from adapter.rollout.orchestrator import TrainOutput

logger = logging.getLogger(__name__)
BUNDLED = BUNDLED_IDS
DEMO_SEED = 0
EXIT_DROPPED = 3  # the batch is complete, but groups were dropped (and replaced) on the way

# the router-policy flag of every vf-sglang command (serve-bridge and check too)
ROUTER_FLAGS: dict[str, tuple[str, ...]] = {"--router-policy": ("sglang_router_policy",)}
# job flag → the `Settings` fields it fills (the only place this mapping is written)
JOB_FLAGS: dict[str, tuple[str, ...]] = {
    **ROUTER_FLAGS,
    "--groups": ("rollout_batch_size", "over_sampling_batch_size"),
    "--n": ("n_samples_per_prompt",),
    "--max-response-len": ("rollout_max_response_len",),
    "--max-context-len": ("rollout_max_context_len",),
    "--temperature": ("rollout_temperature",),
    "--seed": ("rollout_seed",),
    "--max-in-flight": ("sglang_server_concurrency",),
}
# what the command-specific flags fill
ROLLOUT_FLAGS = {"--config": ("verifiers_config",), "--model": ("renderer_model_name",),
                 "--tokenizer": ("hf_checkpoint",)}
DEMO_FLAGS = {"--taskset": ("verifiers_config",), "--model-dir": ("hf_checkpoint",)}


def flag_names(*tables: Mapping[str, tuple[str, ...]]) -> dict[str, str]:
    """`Settings` field → the flag that fills it (the inverse of the tables)."""
    return {field: flag for table in tables for flag, fields in table.items() for field in fields}


# `Settings` field → flag, for the commands that take only the router policy from the tables
ROUTER_FLAG = flag_names(ROUTER_FLAGS)


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")  # argparse's own rule


def _settings(args: argparse.Namespace, command_flags: Mapping[str, tuple[str, ...]], **fields: Any) -> Settings:
    """The job's settings, knowing the flags of the command that runs (its errors name them)."""
    values = {field: getattr(args, _dest(flag)) for flag, names in JOB_FLAGS.items() for field in names}
    if values["rollout_seed"] is None:
        del values["rollout_seed"]
    return Settings(**values, sglang_enable_deterministic_inference=args.seed is not None,
                    rollout_global_dataset=False, flag_names=flag_names(JOB_FLAGS, command_flags), **fields)


def _report(args: argparse.Namespace, result: TrainOutput, seconds: float) -> int:
    """Print the table and the summary line, write the samples; the exit status."""
    groups = in_task_order(result.groups)
    print(format_table(groups))
    count = write_jsonl(Path(args.out), groups)
    drops = dropped_groups(result.metrics)
    summary = format_drops(drops, result.drop_details)
    print(f"{count} samples in {len(groups)} groups, {seconds:.1f}s{summary}; samples written to "
          f"{Path(args.out).resolve()}")
    return EXIT_DROPPED if drops else 0


def _say(args: argparse.Namespace, line: str) -> None:
    if not args.quiet:
        print(line, flush=True)


def _look_at_router(args: argparse.Namespace, settings: Settings, topology: Topology) -> None:
    notes = router_notes(topology, settings)
    if notes.status:
        _say(args, notes.status)
    if notes.warning:
        logger.warning("vf-sglang: warning: %s", notes.warning)


async def _run(args: argparse.Namespace, settings: Settings, tokenizer: str | None,
               recorder: CassetteRecorder | None) -> TrainOutput:
    from adapter.rollout.hooks import RolloutHooks
    from adapter.rollout.job import prepare_job, run_lifetime, run_rollouts

    job = prepare_job(settings)  # options and the config file before the engine is asked
    # one engine session (one client, each fact read once) and all the run opens: closed once, on exit
    async with run_lifetime(settings, args.sglang_url, recorder=recorder) as lifetime:
        facts = await lifetime.engine.facts()
        _look_at_router(args, settings, facts.topology)
        with GroupProgress(args.groups, enabled=progress_wanted(args.quiet)) as progress:
            return await run_rollouts(job, lifetime=lifetime, tokenizer_path=tokenizer,
                                      hooks=RolloutHooks(on_group=progress))


def _rollout(args: argparse.Namespace) -> int:
    recorder = recorder_for(args)
    flag, source = ("--tokenizer", args.tokenizer) if args.tokenizer else ("--model", args.model)
    if Path(source).expanduser().is_dir():  # a hub id is resolved (bounded) by preflight instead
        check_tokenizer_dir(Path(source).expanduser(), flag=flag)
    add_env_sources([*args.env_source_dir, installed().bundled_tasksets()])
    settings = _settings(args, ROLLOUT_FLAGS, verifiers_config=args.config, renderer_model_name=args.model,
                         hf_checkpoint=args.tokenizer or args.model)
    _say(args, harness_runtime_line(args))
    started = time.monotonic()
    result = interrupts.run(_run(args, settings, args.tokenizer, recorder))  # its lifetime ends the zygotes too
    return _report(args, result, time.monotonic() - started)


async def _demo_async(args: argparse.Namespace, job: Job, model_dir: Path,
                      recorder: CassetteRecorder | None) -> TrainOutput:
    from adapter.bridge.serve import served
    from adapter.rollout.hooks import RolloutHooks
    from adapter.rollout.job import prepare_orchestrator, run_lifetime, run_prepared

    served_at: list[str] = []
    progress = GroupProgress(args.groups, enabled=progress_wanted(args.quiet))
    async with run_lifetime(job.settings, lambda: served_at[0], recorder=recorder) as lifetime:
        # Everything that needs no engine first (the taskset's own rules, e.g. group rewards with
        # --n 1), so a refused combination never waits for the model to load.
        orchestrator = prepare_orchestrator(job, lifetime=lifetime, tokenizer_path=str(model_dir),
                                            hooks=RolloutHooks(on_group=progress))
        async with served(engine_app(model_dir)) as url:  # torch: only once the job is known to be runnable
            served_at.append(url)
            _say(args, f"reference engine (not SGLang: transformers on CPU, SGLang's /generate wire) at {url}")
            with progress:
                return await run_prepared(orchestrator)


def _quiet_libraries() -> None:
    """transformers' own bars (loading, saving weights) off, as ours are."""
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # transformers lacks the annotation


def _demo(args: argparse.Namespace) -> int:
    started = time.monotonic()
    model_dir = check_model_dir(args.model_dir, flag="--model-dir") if args.model_dir else None
    settings = _settings(args, DEMO_FLAGS, verifiers_config=str(installed().bundled_config(args.taskset)),
                         renderer_model_name=QWEN3)
    from adapter.rollout.job import prepare_job

    job = prepare_job(settings)  # options and the config file before the model is built
    if not progress_wanted(args.quiet):
        _quiet_libraries()
    if model_dir is None:
        model_dir = tiny_model(progress=progress_wanted(args.quiet))
    _say(args, f"tiny Qwen3-shaped model: {model_dir}")
    _say(args, harness_runtime_line(args))
    add_env_sources([installed().bundled_tasksets()])
    recorder = recorder_for(args)
    result = interrupts.run(_demo_async(args, job.with_checkpoint(str(model_dir)), model_dir, recorder))
    return _report(args, result, time.monotonic() - started)


async def _engine_async(args: argparse.Namespace, model_dir: Path) -> None:
    from adapter.bridge.serve import served
    from adapter.engine.client import SGLangClient
    from adapter.engine.probe import check_engine

    async with served(engine_app(model_dir), host=args.host, port=args.port) as url, SGLangClient(url) as own:
        await check_engine(own)
        print(f"reference engine ready at {url} (model {model_dir})", flush=True)
        await asyncio.Event().wait()


def _engine(args: argparse.Namespace) -> int:
    model_dir = check_model_dir(args.model_dir, flag="--model-dir") if args.model_dir else None
    check_port_free(args.host, args.port)
    if model_dir is None:
        model_dir = tiny_model(progress=True)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_engine_async(args, model_dir))
    return 0


def _at_least(low: int) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        return value
    return parse


def _temperature(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value >= 0.0:
        raise argparse.ArgumentTypeError(f"must be 0 (greedy) or more, got {text}")
    return value


def _job_options(parser: argparse.ArgumentParser, *, groups: int, n: int, out: str, seed: int | None) -> None:
    parser.add_argument("--groups", type=_at_least(1), default=groups, help=f"task groups to keep (default {groups})")
    parser.add_argument("--n", type=_at_least(1), default=n, help=f"rollouts per task (default {n})")
    parser.add_argument("--out", default=out, help=f"JSONL file for the samples (default {out})")
    parser.add_argument("--max-response-len", type=_at_least(1), default=64, help="tokens per turn (default 64)")
    parser.add_argument("--max-context-len", type=_at_least(1), default=2048, help="context length (default 2048)")
    parser.add_argument("--temperature", type=_temperature, default=0.8, help="sampling temperature (default 0.8)")
    parser.add_argument("--seed", type=int, default=seed,
                        help=f"seed base: rollout i of the c-th group samples with seed + c×n + i (default {seed}"
                        + (", unseeded)" if seed is None else ")"))
    concurrency = Settings.sglang_server_concurrency  # Miles' default, one engine
    parser.add_argument("--max-in-flight", type=_at_least(1), default=concurrency,
                        help="rollouts running at once (each holds one engine request at a time); the others wait "
                        f"their turn (default {concurrency}: Miles' sglang_server_concurrency, one engine)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar and no status lines")
    add_harness_runtime(parser)
    add_router_policy(parser)
    record_option(parser)


def add_harness_runtime(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--harness-runtime", choices=RUNTIMES, default=None,
                        help=f"how each harness program and tool server starts: prefork (forked from a warm "
                             f"interpreter) or subprocess (Verifiers' own: a fresh one each); default "
                             f"${RUNTIME_VAR}, else {DEFAULT_RUNTIME}")


def harness_runtime_line(args: argparse.Namespace) -> str:
    """Apply `--harness-runtime` (through the one switch, the environment variable) and say which
    runtime the installed generation's episodes run with, and why."""
    if args.harness_runtime:
        os.environ[RUNTIME_VAR] = args.harness_runtime
    return harness_runtime(chosen())[1]


def add_router_policy(parser: argparse.ArgumentParser) -> None:
    """`--router-policy`, as Miles' `--sglang-router-policy` reads it."""
    parser.add_argument("--router-policy", choices=ROUTER_POLICIES, default=None,
                        help="the SGLang router's policy (its --policy); consistent_hashing/manual: every engine "
                        "call of an episode carries X-SMG-Routing-Key = its trace id (default: no routing key)")


def add_job_commands(commands: Any) -> None:
    demo = add_command(commands, "demo", DEMO_HELP)
    demo.add_argument("--taskset", choices=BUNDLED, default="arith-v1", help="bundled taskset (default arith-v1)")
    demo.add_argument("--model-dir", default=None, help="serve this model dir instead of the cached tiny model")
    _job_options(demo, groups=3, n=4, out="runs/demo-samples.jsonl", seed=DEMO_SEED)
    demo.set_defaults(run=_demo)

    rollout = add_command(commands, "rollout", ROLLOUT_HELP)
    rollout.add_argument("--sglang-url", required=True, help="the SGLang server or router")
    rollout.add_argument("--config", required=True, help="Verifiers V1 EnvConfig TOML")
    rollout.add_argument("--model", required=True, help="the served model's id (picks the renderer), e.g. " + QWEN3)
    rollout.add_argument("--tokenizer", default=None, help="local tokenizer/checkpoint dir (default: --model)")
    rollout.add_argument("--env-source-dir", action="append", default=[], help="taskset modules dir (repeatable)")
    _job_options(rollout, groups=2, n=4, out="runs/rollout-samples.jsonl", seed=None)
    rollout.set_defaults(run=_rollout)

    engine = add_command(commands, "engine", ENGINE_HELP)
    engine.add_argument("--host", default="127.0.0.1", help="address (default: loopback only)")
    engine.add_argument("--port", type=int, default=0, help="port (default: a free port)")
    engine.add_argument("--model-dir", default=None, help="model dir (default: the cached tiny model)")
    engine.set_defaults(run=_engine)
