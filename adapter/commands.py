"""The job subcommands of `vf-sglang`: `demo` (the main job, on the embedded reference
engine), `rollout` (the same pipeline against a real SGLang server) and `engine` (the
reference engine alone). Registered on the parser by `adapter.cli`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any

from adapter.bundled import BUNDLED_IDS, add_env_sources
from adapter.generations import installed
from adapter.jobs import run_rollouts
from adapter.recording import record_option, start_recording
from adapter.results import format_table, write_jsonl
from adapter.settings import Settings

QWEN3 = "Qwen/Qwen3-0.6B"
BUNDLED = BUNDLED_IDS


def _settings(args: argparse.Namespace, *, config: Path, model: str, hf_checkpoint: str) -> Settings:
    return Settings(
        verifiers_config=str(config), rollout_batch_size=args.groups, n_samples_per_prompt=args.n,
        over_sampling_batch_size=args.groups, rollout_max_response_len=args.max_response_len,
        rollout_max_context_len=args.max_context_len, rollout_temperature=args.temperature,
        rollout_seed=args.seed, sglang_enable_deterministic_inference=args.seed is not None,
        renderer_model_name=model, hf_checkpoint=hf_checkpoint, rollout_global_dataset=False,
    )


def _report(args: argparse.Namespace, groups: list[list[Any]], seconds: float) -> None:
    print(format_table(groups))
    count = write_jsonl(Path(args.out), groups)
    print(f"{count} samples in {len(groups)} groups, {seconds:.1f}s; written to {args.out}")


def _rollout(args: argparse.Namespace) -> int:
    start_recording(args)
    add_env_sources([*args.env_source_dir, installed().bundled_tasksets()])
    settings = _settings(args, config=Path(args.config), model=args.model, hf_checkpoint=args.tokenizer or args.model)
    started = time.monotonic()
    result = asyncio.run(run_rollouts(settings, engine_url=args.sglang_url, tokenizer_path=args.tokenizer))
    _report(args, result.groups, time.monotonic() - started)
    return 0


async def _demo_async(args: argparse.Namespace, model_dir: Path) -> list[list[Any]]:
    from adapter.serve import served
    from e2e.engine import create_engine_app

    async with served(create_engine_app(model_dir, model_id=QWEN3)) as url:
        print(f"reference engine (not SGLang: transformers on CPU, SGLang's /generate wire) at {url}")
        settings = _settings(args, config=installed().bundled_config(args.taskset), model=QWEN3,
                             hf_checkpoint=str(model_dir))
        result = await run_rollouts(settings, engine_url=url, tokenizer_path=str(model_dir))
        return result.groups


def _demo(args: argparse.Namespace) -> int:
    from e2e.engine import build_tiny_model

    started = time.monotonic()
    model_dir = Path(args.model_dir) if args.model_dir else build_tiny_model()
    print(f"tiny Qwen3-shaped model: {model_dir}")
    add_env_sources([installed().bundled_tasksets()])
    start_recording(args)
    groups = asyncio.run(_demo_async(args, model_dir))
    _report(args, groups, time.monotonic() - started)
    return 0


async def _engine_async(args: argparse.Namespace, model_dir: Path) -> None:
    from adapter.preflight import check_engine
    from adapter.serve import served
    from e2e.engine import create_engine_app

    async with served(create_engine_app(model_dir, model_id=QWEN3), host=args.host, port=args.port) as url:
        await check_engine(url)
        print(f"reference engine ready at {url} (model {model_dir})", flush=True)
        await asyncio.Event().wait()


def _engine(args: argparse.Namespace) -> int:
    from e2e.engine import build_tiny_model

    model_dir = Path(args.model_dir) if args.model_dir else build_tiny_model()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_engine_async(args, model_dir))
    return 0


def _job_options(parser: argparse.ArgumentParser, *, groups: int, n: int, out: str) -> None:
    parser.add_argument("--groups", type=int, default=groups, help=f"task groups to keep (default {groups})")
    parser.add_argument("--n", type=int, default=n, help=f"rollouts per task (default {n})")
    parser.add_argument("--out", default=out, help=f"JSONL file for the samples (default {out})")
    parser.add_argument("--max-response-len", type=int, default=64, help="tokens per turn (default 64)")
    parser.add_argument("--max-context-len", type=int, default=2048, help="context length (default 2048)")
    parser.add_argument("--temperature", type=float, default=0.8, help="sampling temperature (default 0.8)")
    parser.add_argument("--seed", type=int, default=None, help="seed base: rollout i samples with seed+i")
    record_option(parser)


def add_job_commands(commands: Any) -> None:
    demo = commands.add_parser("demo", help="the main job on the embedded default: tiny model + reference engine "
                               "+ a bundled taskset through the whole pipeline; prints a table, writes JSONL")
    demo.add_argument("--taskset", choices=BUNDLED, default="arith-v1", help="bundled taskset (default arith-v1)")
    demo.add_argument("--model-dir", default=None, help="serve this model dir instead of the cached tiny model")
    _job_options(demo, groups=3, n=4, out="runs/demo-samples.jsonl")
    demo.set_defaults(run=_demo)

    rollout = commands.add_parser("rollout", help="grouped rollouts of an EnvConfig against a running SGLang server")
    rollout.add_argument("--sglang-url", required=True, help="the SGLang server or router")
    rollout.add_argument("--config", required=True, help="Verifiers V1 EnvConfig TOML")
    rollout.add_argument("--model", required=True, help="the served model's id (picks the renderer), e.g. " + QWEN3)
    rollout.add_argument("--tokenizer", default=None, help="local tokenizer/checkpoint dir (default: --model)")
    rollout.add_argument("--env-source-dir", action="append", default=[], help="taskset modules dir (repeatable)")
    _job_options(rollout, groups=2, n=4, out="runs/rollout-samples.jsonl")
    rollout.set_defaults(run=_rollout)

    engine = commands.add_parser("engine", help="the reference engine alone (SGLang's /generate wire on CPU)")
    engine.add_argument("--host", default="127.0.0.1", help="address (default: loopback only)")
    engine.add_argument("--port", type=int, default=0, help="port (default: a free port)")
    engine.add_argument("--model-dir", default=None, help="model dir (default: the cached tiny model)")
    engine.set_defaults(run=_engine)
