"""The composition root: one job = versions → options → EnvConfig → tokenizer → environment →
orchestrator, every check before the first episode.

    prepare_job           options, versions and the EnvConfig, checked once into a `Job`
    run_lifetime          the run's owner (adapter.rollout.lifetime) around its one `EngineSession`
                          (one client per engine address, its facts read once); its builder closes it
    prepare_orchestrator  shared by the Miles binding (`adapter.miles.binding`) and the CLI, so both
                          refuse the same things with the same messages
    run_rollouts          the CLI's `rollout`/`check` job: the engine checked first (reachable,
                          SGLang, vocabulary), then one train batch

Where code lives: `adapter/cli/entry.py` parses arguments and maps errors to exit codes;
`adapter/cli/commands.py` turns parsed arguments into `Settings` and calls a job here; jobs call
the generation seam (`adapter.episodes.generations`), preflight (`adapter.engine.probe`), the bundled
fixtures (`adapter.episodes.bundled`) and present results with `adapter.cli.results`.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from adapter.config.env_config import EnvConfigFile, load_env_config
from adapter.config.rules import EnvFacts, validate
from adapter.config.settings import Settings
from adapter.engine.probe import check_vocab, resolve_tokenizer
from adapter.engine.session import EngineSession
from adapter.episodes.generations import GenerationSpec, installed
from adapter.episodes.identity import explicit_advice, infer_identity
from adapter.errors import ConfigurationError
from adapter.rollout.hooks import RolloutHooks
from adapter.rollout.lifetime import RunLifetime
from adapter.rollout.orchestrator import Orchestrator, TrainOutput

if TYPE_CHECKING:
    from adapter.engine.recording import CassetteRecorder

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Job:
    """A job whose options and EnvConfig passed every check that needs no engine and no
    tokenizer: made once by `prepare_job`, then handed on (never validated again)."""

    settings: Settings
    config: EnvConfigFile
    generation: GenerationSpec

    def with_checkpoint(self, checkpoint: str) -> Job:
        """The same job on a checkpoint decided after the checks (the demo's tiny model)."""
        return dataclasses.replace(self, settings=dataclasses.replace(self.settings, hf_checkpoint=checkpoint))


def prepare_job(settings: Settings) -> Job:
    """Versions, trainer options and the EnvConfig, checked once (errors name options by
    `settings.flag`: Miles' flags unless a `vf-sglang` command built the settings)."""
    generation = installed()
    validate(settings)
    config = load_env_config(settings.verifiers_config)
    generation.check_config(config)
    return Job(settings, config, generation)


def prepare_orchestrator(
    job: Job | Settings,
    *,
    lifetime: RunLifetime,
    hooks: RolloutHooks | None = None,
    tokenizer_path: str | None = None,
) -> Orchestrator:
    """The tokenizer and the taskset, checked before any episode runs (a `Settings` is first
    prepared into a `Job`); then the orchestrator for the installed Verifiers generation, on the
    run's `lifetime`, which also undoes what loading the environment changed when it closes."""
    job = job if isinstance(job, Job) else prepare_job(job)
    settings = job.settings
    source = (tokenizer_path or settings.sglang_tokenizer_path or settings.hf_checkpoint
              or settings.renderer_model_name)
    if not source:
        raise ConfigurationError("--hf-checkpoint (or --model) must name the policy: its tokenizer renders prompts")
    identity = renderer_model_for(settings, tokenizer_path=tokenizer_path)
    model = settings.renderer_model_name or identity or source
    local_tokenizer = resolve_tokenizer(source)
    backend = job.generation.load(job.config.data)
    try:
        validate(settings, EnvFacts(task_count=len(backend.tasks), has_group_reward=backend.has_group_reward))
    except ConfigurationError:  # only the rules that need the loaded environment are new here
        backend.release()
        raise
    lifetime.on_close(backend.release)
    return Orchestrator(
        settings=settings,
        backend=backend,
        lifetime=lifetime,
        model=model,
        renderer_model_name=identity,
        env_id=job.config.env_id,
        tokenizer_path=local_tokenizer,
        hooks=hooks or RolloutHooks(),
    )


def run_lifetime(settings: Settings, url: str | Callable[[], str], *,
                 recorder: CassetteRecorder | None = None) -> RunLifetime:
    """The run's owner around its one engine session, the client sized to the run's in-flight bound;
    `url` may be a callable read per call (Miles fills the router address in after building us)."""
    return RunLifetime(EngineSession(url, use_miles_router=settings.use_miles_router,
                                     max_in_flight=settings.max_in_flight, recorder=recorder))


def renderer_model_for(settings: Settings, *, tokenizer_path: str | None = None) -> str | None:
    """The model id whose renderer formats prompts, decided now (an ambiguous path fails here,
    before any episode): the explicit option as given; else the first source that names a
    registered model (`adapter.episodes.identity.infer_identity`): the tokenizer that is loaded
    (`tokenizer_path`, else `sglang_tokenizer_path`), then `hf_checkpoint`, by path, then what
    those directories' own files say. None: nothing names one, and Renderers falls back to the
    chat template, which cannot parse tool calls (warned here, with what was tried)."""
    if settings.renderer_model_name:
        return settings.renderer_model_name
    tokenizer = (("the tokenizer", tokenizer_path) if tokenizer_path
                 else (settings.flag("sglang_tokenizer_path"), settings.sglang_tokenizer_path))
    inferred = infer_identity([tokenizer, (settings.flag("hf_checkpoint"), settings.hf_checkpoint)],
                              explicit_flag=settings.flag("renderer_model_name"))
    if inferred.model_id is None:
        logger.warning("no registered renderer matches the tokenizer or checkpoint (tried: %s): Renderers falls "
                       "back to the chat template (no tool or reasoning parsing); %s", inferred.describe(),
                       explicit_advice(settings))
    else:
        logger.info("renderer identity %s, from %s", inferred.model_id, inferred.source)
    return inferred.model_id


async def run_rollouts(
    job: Job | Settings,
    *,
    lifetime: RunLifetime,
    tokenizer_path: str | None = None,
    hooks: RolloutHooks | None = None,
) -> TrainOutput:
    """The cheap checks first (options and the config file), then the engine, then one batch. What
    the batch opened stays with `lifetime`, for its builder to close."""
    job = job if isinstance(job, Job) else prepare_job(job)
    await lifetime.engine.facts()  # reachable, SGLang: before the tokenizer and the taskset load
    orchestrator = prepare_orchestrator(job, lifetime=lifetime, tokenizer_path=tokenizer_path, hooks=hooks)
    return await run_prepared(orchestrator)


async def run_prepared(orchestrator: Orchestrator) -> TrainOutput:
    """The engine half of a job: its facts (read once by its session; the demo's engine starts
    only once every check that needs none has passed), the vocabulary checked, then one batch."""
    facts = await orchestrator.engine.facts()
    _check_vocab(facts.model_info, orchestrator)
    return await orchestrator.train(rollout_id=0)


def _check_vocab(info: Mapping[str, Any], orchestrator: Orchestrator) -> None:
    if "vocab_size" in info and orchestrator.tokenizer_path:
        from renderers.base import load_tokenizer

        check_vocab(info, len(load_tokenizer(orchestrator.tokenizer_path)), tokenizer=orchestrator.tokenizer_path)
