"""The composition root: one job = versions → options → EnvConfig → tokenizer → environment →
orchestrator, every check before the first episode.

    prepare_orchestrator  shared by the Miles binding (`adapter.miles`) and the CLI, so both
                          refuse the same things with the same messages
    run_rollouts          the CLI's `rollout`/`demo` job: the engine checked first (reachable,
                          SGLang, vocabulary), then one train batch

Where code lives: `adapter/cli.py` parses arguments and maps errors to exit codes;
`adapter/commands.py` turns parsed arguments into `Settings` and calls a job here; jobs call
the generation seam (`adapter.generations`), preflight (`adapter.preflight`), the bundled
fixtures (`adapter.bundled`) and present results with `adapter.results`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from adapter.config import load_env_config
from adapter.errors import ConfigurationError
from adapter.generations import installed
from adapter.hooks import RolloutHooks
from adapter.identity import renderer_identity
from adapter.preflight import check_engine, check_vocab, resolve_tokenizer
from adapter.rollout import Orchestrator, TrainOutput
from adapter.settings import Settings
from adapter.validation import EnvFacts, validate

logger = logging.getLogger(__name__)


def prepare_orchestrator(
    settings: Settings,
    *,
    engine_url: str | Callable[[], str],
    hooks: RolloutHooks | None = None,
    tokenizer_path: str | None = None,
    flags: Mapping[str, str] | None = None,
) -> Orchestrator:
    """Versions, trainer options, the EnvConfig, the tokenizer and the taskset, all checked
    before any episode runs; then the orchestrator for the installed Verifiers generation.
    `flags` names the options in errors (`adapter.validation.FlagNames`; default: Miles' flags)."""
    generation = installed()
    validate(settings, flags=flags)
    config = load_env_config(settings.verifiers_config)
    source = (tokenizer_path or settings.sglang_tokenizer_path or settings.hf_checkpoint
              or settings.renderer_model_name)
    if not source:
        raise ConfigurationError("--hf-checkpoint (or --model) must name the policy: its tokenizer renders prompts")
    generation.check_config(config)
    model = settings.renderer_model_name or renderer_model_for(source)
    local_tokenizer = resolve_tokenizer(source)
    backend = generation.load(config.data)
    validate(settings, EnvFacts(task_count=len(backend.tasks), has_group_reward=backend.has_group_reward), flags=flags)
    return Orchestrator(
        settings=settings,
        backend=backend,
        engine_url=engine_url,
        model=model,
        env_id=config.env_id,
        tokenizer_path=local_tokenizer,
        hooks=hooks or RolloutHooks(),
        use_miles_router=settings.use_miles_router,
    )


def renderer_model_for(checkpoint: str) -> str:
    """The registered model id whose renderer formats prompts for `checkpoint`, decided now
    (an ambiguous path fails here, before any episode); unregistered checkpoints keep their
    own name and get Renderers' template fallback, which cannot parse tool calls."""
    identity = renderer_identity(checkpoint)
    if identity is None:
        logger.warning("no registered renderer matches %r: Renderers falls back to the chat template "
                       "(no tool or reasoning parsing); pass --renderer-model-name to pick one", checkpoint)
        return checkpoint
    return identity


async def run_rollouts(
    settings: Settings,
    *,
    engine_url: str,
    tokenizer_path: str | None = None,
    flags: Mapping[str, str] | None = None,
    hooks: RolloutHooks | None = None,
) -> TrainOutput:
    validate(settings, flags=flags)  # the cheap checks first: options and the config file, then the engine
    load_env_config(settings.verifiers_config)
    info = await check_engine(engine_url)
    orchestrator = prepare_orchestrator(settings, engine_url=engine_url, tokenizer_path=tokenizer_path, flags=flags,
                                        hooks=hooks)
    _check_vocab(info, orchestrator)
    return await orchestrator.train(rollout_id=0)


async def run_prepared(orchestrator: Orchestrator, engine_url: str) -> TrainOutput:
    """The engine half of a job whose orchestrator was prepared before its engine existed (the
    demo starts its own engine only once every check that needs none has passed)."""
    _check_vocab(await check_engine(engine_url), orchestrator)
    return await orchestrator.train(rollout_id=0)


def _check_vocab(info: Mapping[str, Any], orchestrator: Orchestrator) -> None:
    if "vocab_size" in info and orchestrator.tokenizer_path:
        from renderers.base import load_tokenizer

        check_vocab(info, len(load_tokenizer(orchestrator.tokenizer_path)), tokenizer=orchestrator.tokenizer_path)
