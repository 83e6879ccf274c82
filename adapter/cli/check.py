"""`vf-sglang check`: a preflight against a live SGLang server, before a long training run.

Consumes: `--sglang-url URL` (a server or router), optionally `--tokenizer DIR` (the model's
checkpoint or tokenizer directory: its `config.json` gives the model's context length), `--config
env.toml` (run one real episode group through the whole pipeline), `--router-policy` (the router's
policy, as the jobs take it: it decides whether the routing row is required, and the episode
group routes by it) and `--record DIR` (a cassette of every exchange). Emits: a table, one row
per check of `adapter.cli.server_checks` (the same implementation as `pytest -m live`), and the
exit status: 0 only when every required check passes; 1 when one fails or the address is not an
SGLang server (said in one line). Behind a router, the engine line names the worker the facts
were read from, and a missing `--router-policy` is warned about (`adapter.cli.routing`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from adapter.cli import interrupts
from adapter.cli.commands import ROUTER_FLAG, add_harness_runtime, add_router_policy, harness_runtime_line
from adapter.cli.help_text import CHECK_HELP, add_command
from adapter.cli.routing import router_notes
from adapter.cli.server_checks import CheckResult, ServerFacts, read_facts, run_checks
from adapter.config.settings import Settings
from adapter.engine.client import RetryPolicy, SGLangClient, Timeouts
from adapter.engine.probe import MODEL_INFO_PATHS, SGLANG_MODEL_INFO_KEYS
from adapter.engine.recording import CassetteRecorder, record_option, recorder_for, wrap_of
from adapter.errors import VfSglangError

MARKS = {"pass": "ok", "fail": "FAIL", "skip": "skip"}


def model_context_length(directory: str | None) -> int | None:
    """`max_position_embeddings` from DIR/config.json (None when there is no such file)."""
    config = Path(directory) / "config.json" if directory else None
    if config is None or not config.exists():
        return None
    value = json.loads(config.read_text()).get("max_position_embeddings")
    return value if isinstance(value, int) else None


def format_results(results: list[CheckResult]) -> str:
    width = max(len(r.name) for r in results)
    rows = [f"{'check':<{width}}  result  detail"]
    for r in results:
        rows.append(f"{r.name:<{width}}  {MARKS[r.status]:<6}  {r.detail}{'' if r.required else ' (informs only)'}")
    return "\n".join(rows)


async def episode_check(args: argparse.Namespace, facts: ServerFacts, recorder: CassetteRecorder | None) -> CheckResult:
    """One real episode group (n=2) of `--config` through the adapter, as `vf-sglang rollout` runs it."""
    from adapter.episodes.bundled import add_env_sources
    from adapter.episodes.generations import installed
    from adapter.rollout.job import run_lifetime, run_rollouts

    name = f"one episode group of {Path(args.config).name}"
    model = str((facts.model_info or {}).get("model_path"))
    settings = Settings(
        verifiers_config=str(args.config), rollout_batch_size=1, n_samples_per_prompt=2, over_sampling_batch_size=1,
        rollout_max_response_len=64, rollout_max_context_len=facts.context_length,
        renderer_model_name=model, hf_checkpoint=args.tokenizer or model, rollout_global_dataset=False,
        sglang_router_policy=args.router_policy, flag_names=ROUTER_FLAG,
    )  # fmt: skip
    add_env_sources([installed().bundled_tasksets()])
    try:
        async with run_lifetime(settings, args.sglang_url, recorder=recorder) as lifetime:
            result = await run_rollouts(settings, lifetime=lifetime, tokenizer_path=args.tokenizer)
    except VfSglangError as exc:
        return CheckResult(name, "fail", f"{type(exc).__name__}: {exc}")
    samples = [sample for group in result.groups for sample in group]
    if not samples:
        return CheckResult(name, "fail", "no group came back")
    rewards = ", ".join(f"{getattr(s, 'reward', None)}" for s in samples)
    return CheckResult(name, "pass", f"{len(result.groups)} group, {len(samples)} samples, rewards {rewards}")


async def run(args: argparse.Namespace, recorder: CassetteRecorder | None = None) -> int:
    engine = SGLangClient(args.sglang_url, timeouts=Timeouts(connect=10.0, read=args.timeout),
                          retry=RetryPolicy(max_attempts=1), wrap_transport=wrap_of(recorder))
    try:
        facts = await read_facts(engine)
        if not facts.speaks_sglang:
            print(f"{args.sglang_url} is not an SGLang server: GET {' / '.join(MODEL_INFO_PATHS)} answered "
                  f"{facts.model_info!r:.200} (SGLang answers {' and '.join(SGLANG_MODEL_INFO_KEYS)}): pass the "
                  "SGLang server's (or its router's) URL with --sglang-url")
            return 1
        print(f"engine: {facts.describe()}")
        if facts.topology is not None:
            warning = router_notes(facts.topology, Settings(sglang_router_policy=args.router_policy,
                                                            flag_names=ROUTER_FLAG)).warning
            if warning:
                print(f"warning: {warning}")
        results = await run_checks(engine, facts, model_max=model_context_length(args.tokenizer),
                                   tokenizer=args.tokenizer, router_policy=args.router_policy)
    finally:
        await engine.aclose()
    if args.config:
        print(harness_runtime_line(args))
        results.append(await episode_check(args, facts, recorder))  # its lifetime ends the zygotes too
    print(format_results(results))
    failed = [r.name for r in results if r.required and r.status == "fail"]
    print(f"FAILED: {', '.join(failed)}" if failed else "all required checks passed")
    return 1 if failed else 0


def _check(args: argparse.Namespace) -> int:
    return interrupts.run(run(args, recorder_for(args)))


def add_check_command(commands: Any) -> None:
    check = add_command(commands, "check", CHECK_HELP)
    check.add_argument("--sglang-url", required=True, help="the SGLang server or router, e.g. http://127.0.0.1:30000")
    check.add_argument("--config", default=None, help="a Verifiers V1 EnvConfig TOML: also run one episode group")
    check.add_argument("--tokenizer", default=None, help="the model's local checkpoint/tokenizer dir")
    check.add_argument("--timeout", type=float, default=120.0, help="seconds per engine call (default 120)")
    add_router_policy(check)
    add_harness_runtime(check)
    record_option(check)
    check.set_defaults(run=_check)
