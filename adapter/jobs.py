"""Whole jobs on top of the orchestrator: prepare one (every check before any episode), run
grouped rollouts against an engine URL, and present the result (table, JSONL).

`prepare_orchestrator` is shared by the Miles binding and the CLI (`vf-sglang rollout`,
`vf-sglang demo`), so both refuse the same things with the same messages.
"""

from __future__ import annotations

import json
import logging
import math
import os
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from adapter.config import check_config_generation, load_env_config
from adapter.errors import ConfigurationError, EngineError
from adapter.identity import renderer_identity
from adapter.rollout import Orchestrator, RolloutHooks, TrainOutput
from adapter.settings import Settings
from adapter.sglang import SGLangClient, Timeouts
from adapter.validation import EnvFacts, validate
from adapter.versions import installed_decision, require_supported

logger = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURES = REPO_ROOT / "fixtures"


def bundled_sources() -> list[Path]:
    """The bundled taskset dirs for the installed Verifiers generation (B's own modules,
    which share names with A's, come first)."""
    if installed_decision().generation == "B":
        return [FIXTURES / "tasksets_b", FIXTURES / "tasksets"]
    return [FIXTURES / "tasksets"]


def bundled_config(name: str) -> Path:
    """A bundled EnvConfig in the shape of the installed Verifiers generation."""
    folder = FIXTURES / "envs" / ("b" if installed_decision().generation == "B" else "")
    path = folder / f"{name}.toml"
    if not path.exists():
        raise ConfigurationError(f"the bundled taskset {name!r} has no config for this verifiers release ({path})")
    return path


def add_env_sources(dirs: Sequence[str | os.PathLike[str]]) -> None:
    """Make taskset modules importable here and in the subprocesses Verifiers starts."""
    paths = [str(Path(d).resolve()) for d in dirs]
    for path in reversed(paths):
        if path not in sys.path:
            sys.path.insert(0, path)
    current = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([*paths, *current]))


def prepare_orchestrator(
    settings: Settings,
    *,
    engine_url: str | Callable[[], str],
    hooks: RolloutHooks | None = None,
    tokenizer_path: str | None = None,
) -> Orchestrator:
    """Versions, trainer options, the EnvConfig and the taskset, all checked before any
    episode runs; then the orchestrator for the installed Verifiers generation."""
    generation = require_supported()
    validate(settings)
    config = load_env_config(settings.verifiers_config)
    if not (settings.hf_checkpoint or settings.renderer_model_name):
        raise ConfigurationError("--hf-checkpoint (or --model) must name the policy: its tokenizer renders prompts")
    check_config_generation(config, generation)
    tokenizer_source = tokenizer_path or settings.sglang_tokenizer_path or settings.hf_checkpoint
    model = settings.renderer_model_name or renderer_model_for(str(tokenizer_source))
    backend = load_backend(generation, config.data)
    validate(settings, EnvFacts(task_count=len(backend.tasks), has_group_reward=backend.has_group_reward))
    return Orchestrator(
        settings=settings,
        backend=backend,
        engine_url=engine_url,
        model=model,
        env_id=config.env_id,
        tokenizer_path=tokenizer_source,
        hooks=hooks or RolloutHooks(),
        use_miles_router=settings.use_miles_router,
    )


def load_backend(generation: str, config_data: Any) -> Any:
    """The episode runner of the installed Verifiers API generation."""
    if generation == "A":
        from adapter.generations.a import GenerationA

        return GenerationA(config_data)
    from adapter.generations.b import GenerationB

    return GenerationB(config_data)


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


async def check_engine(url: str, *, timeout: float = 10.0) -> None:
    """One bounded `/health` probe, so an unreachable engine is one clear line."""
    engine = SGLangClient(url, timeouts=Timeouts(connect=timeout, read=timeout))
    try:
        await engine.get("/health")
    except EngineError as exc:
        raise ConfigurationError(f"cannot reach the engine at {url}: {exc}") from exc
    finally:
        await engine.aclose()


async def run_rollouts(settings: Settings, *, engine_url: str, tokenizer_path: str | None = None) -> TrainOutput:
    validate(settings)  # the cheap checks first: options and the config file, then the engine
    load_env_config(settings.verifiers_config)
    await check_engine(engine_url)
    orchestrator = prepare_orchestrator(settings, engine_url=engine_url, tokenizer_path=tokenizer_path)
    return await orchestrator.train(rollout_id=0)


def write_jsonl(path: Path, groups: list[list[Any]]) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [sample.to_dict() for group in groups for sample in group]
    with path.open("w") as handle:
        for row in rows:
            handle.write(json.dumps(row, default=str) + "\n")
    return len(rows)


def _scalar(reward: Any) -> float:
    return float(reward["reward"]) if isinstance(reward, dict) else float(reward)


def format_table(groups: list[list[Any]]) -> str:
    """group | sample | reward | status | response tokens, then each group's mean/std."""
    lines = [f"{'group':>5}  {'sample':>6}  {'reward':>7}  {'status':<10}  {'resp.tokens':>11}"]
    for group in groups:
        rewards = [_scalar(sample.reward) for sample in group]
        for sample, reward in zip(group, rewards, strict=True):
            lines.append(f"{sample.group_index:>5}  {sample.index:>6}  {reward:>7.3f}  "
                         f"{sample.status.value:<10}  {sample.response_length:>11}")
        std = statistics.pstdev(rewards) if len(rewards) > 1 else 0.0
        lines.append(f"{'':>5}  group {group[0].group_index} reward mean {statistics.fmean(rewards):.3f} "
                     f"std {std:.3f}" + ("" if math.isfinite(std) else " (!)"))
    return "\n".join(lines)
