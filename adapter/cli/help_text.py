"""Help texts of the `vf-sglang` subcommands, and the one way a subcommand parser is made.

    add_command(commands, name, help)   a subparser with `allow_abbrev=False` (an abbreviated
                                        flag is an error, never silently another flag), the
                                        one-line summary, a one-paragraph description and an
                                        example, printed verbatim by `--help`
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CommandHelp:
    summary: str  # one line, in `vf-sglang --help`
    description: str  # one paragraph, at the top of `vf-sglang NAME --help`
    example: str  # a command line that works as printed


def add_command(commands: Any, name: str, text: CommandHelp) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(
        name, help=text.summary, description=text.description, epilog=f"example:\n  {text.example}",
        formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    return parser


DEMO_HELP = CommandHelp(
    summary="the main job on the embedded default: tiny model + reference engine + a bundled taskset "
            "through the whole pipeline; prints a table, writes JSONL",
    description="Build (once, cached by its recipe hash) a tiny Qwen3-shaped model, serve it with the\n"
                "reference engine (transformers on CPU speaking SGLang's /generate wire; not SGLang),\n"
                "run --groups × --n real Verifiers episodes of a bundled taskset through Renderers and\n"
                "the bridge, print one row per sample (reward, status, response tokens) with each\n"
                "group's reward mean/std, and write the Miles-shaped samples as JSONL. Seeded by\n"
                "default, so two runs print the same table.",
    example="vf-sglang demo --taskset arith-v1 --groups 3 --n 4 --out runs/demo-samples.jsonl",
)

ROLLOUT_HELP = CommandHelp(
    summary="grouped rollouts of an EnvConfig against a running SGLang server",
    description="Run --groups task groups of --n rollouts each of a Verifiers V1 EnvConfig against a\n"
                "running SGLang server (or router), through the same pipeline as `demo`, print the\n"
                "per-sample table and write the samples as JSONL. The engine, the tokenizer and every\n"
                "option are checked before the first episode. Behind the SGLang router, pass its policy\n"
                "with --router-policy (docs/router.md). Exit status 3: the batch is complete, but groups\n"
                "were dropped and replaced on the way (the summary line counts them by reason).",
    example="vf-sglang rollout --sglang-url http://127.0.0.1:30000 --config fixtures/envs/arith-v1.toml "
            "--model Qwen/Qwen3-0.6B --groups 2 --n 4",
)

ENGINE_HELP = CommandHelp(
    summary="the reference engine alone (SGLang's /generate wire on CPU)",
    description="Serve a model with the reference engine: transformers + torch on CPU behind the subset\n"
                "of SGLang's native HTTP API the adapter uses (/generate, /abort_request, /health,\n"
                "/get_model_info, /flush_cache). It is a test double for SGLang, not SGLang. Prints its\n"
                "URL once ready; serves until interrupted.",
    example="vf-sglang engine --port 30555   # then: vf-sglang rollout --sglang-url http://127.0.0.1:30555 ...",
)

VERSIONS_HELP = CommandHelp(
    summary="print the installed verifiers/renderers, the API generation they map to, and openai's fit",
    description="Print the installed verifiers and renderers releases and the Verifiers API generation\n"
                "the adapter drives them with, or the version gate's refusal and how to fix it\n"
                "(exit status 1; the fix is always a pair the version matrix proves). A verifiers newer\n"
                "than the newest known runs as the newest known generation only with\n"
                "VF_SGLANG_ALLOW_UNTESTED_VERIFIERS=1, untested, with a warning.\n"
                "Then the installed openai against the openai pins of the installed\n"
                "verifiers and sglang, and which verifiers releases fit beside that sglang in one\n"
                "environment (without sglang: the table for each SGLang release; the adapter needs none).\n"
                "A conflict with sglang's pin is information; an openai outside the installed verifiers'\n"
                "own requirement is a broken install (exit status 1).",
    example="vf-sglang versions",
)

SERVE_BRIDGE_HELP = CommandHelp(
    summary="serve Renderers' token-in/token-out API (/inference/v1/generate) on top of an SGLang server",
    description="Put an SGLang server behind Renderers' /inference/v1/generate API, for any Verifiers\n"
                "TrainClient: exact sampled token ids and logprobs, never re-tokenized. Prints its URL\n"
                "once it is ready; serves until interrupted.",
    example="vf-sglang serve-bridge --sglang-url http://127.0.0.1:30000 --model Qwen/Qwen3-0.6B "
            "--max-context-len 4096",
)

MILES_COMMAND_HELP = CommandHelp(
    summary="print the Miles training command that runs a Verifiers environment through the adapter",
    description="Print the Miles training command (ray job submit ... train.py ..., or the driver run\n"
                "directly for a non-http --ray-address). The rollout entry point and the workers'\n"
                "environment come from one merged environment: defaults, then the ambient environment,\n"
                "then --extra-env-vars (which wins); the ABI variable is the one the target Miles reads.",
    example="vf-sglang miles-command --config fixtures/envs/arith-v1.toml --hf-checkpoint /ckpt/Qwen3-0.6B "
            "--miles-version main -- --rollout-batch-size 8 --n-samples-per-prompt 4",
)

COMPAT_HELP = CommandHelp(
    summary="print the verifiers × renderers compatibility table",
    description="Print which verifiers × renderers releases the adapter serves (and which API generation)\n"
                "and which it refuses, with the reason; --write writes it as a markdown document.",
    example="vf-sglang compat --write --out docs/compatibility.md",
)

CHECK_HELP = CommandHelp(
    summary="preflight a live SGLang server: the adapter's wire checks as a table (exit 0 when they pass)",
    description="Run the live server checks (the same as `pytest -m live`) against an SGLang server or\n"
                "router before a long training run; with --config also one real episode group. Behind a\n"
                "router, --router-policy consistent_hashing makes the routing row required (one key must\n"
                "stick to one worker; docs/router.md).",
    example="vf-sglang check --sglang-url http://127.0.0.1:30000 --config fixtures/envs/arith-v1.toml "
            "--tokenizer /ckpt/Qwen3-0.6B",
)
