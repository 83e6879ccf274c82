"""The RL loop: real SGLang on CPU → the adapter's Miles rollout function → the trainer → weight sync.

    run(config) -> RunRecord

One deterministic SGLang server (`e2e.sglang_cpu.serving`, seeded sampling) serves the tiny
Qwen3. The served directory is loaded again as weight version "0"; then each step k:

  1. `await VerifiersRolloutFn(...)(RolloutFnTrainInput(rollout_id=k, weight_version=k))`, the
     class ABI Miles calls, on a Miles-style namespace (`config.miles_args`) → groups of Samples;
  2. the trainer's fp32 recompute on the same weights → mismatch KL (also with each planted bug);
  3. Miles' grpo advantages per group_index → the PPO-style update (`trainer.PolicyTrainer`);
  4. the checkpoint in the served layout → `/update_weights_from_disk` as version str(k + 1).

Only the latest checkpoint is kept under `config.run_dir`. The loop records; `checks` judges.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from adapter.episodes.bundled import add_env_sources
from adapter.episodes.generations import installed
from adapter.miles.abi import abi_types
from adapter.miles.binding import VerifiersRolloutFn
from adapter.reference.tiny_plant import planted_masks
from adapter.samples.conversion import flatten
from e2e.rl_cpu.config import LANE_TASKSETS, RLConfig, control_runs, control_steps, env_config, miles_args
from e2e.rl_cpu.metrics import (
    PLANTED,
    TrainSample,
    group_advantages,
    mismatch_kl,
    reward_stats,
    surprisal,
    tool_turn_kl,
)
from e2e.rl_cpu.records import RunRecord, StepRecord, dump_step
from e2e.rl_cpu.sync import load_weights
from e2e.rl_cpu.trainer import PolicyTrainer, TrainerOptions, served_tensors
from e2e.sglang_cpu import serving
from e2e.tiny.variants import is_planted


def _train_samples(groups: list[list[Any]], plant: str | None) -> list[TrainSample]:
    samples = [TrainSample.from_miles(sample) for group in groups for sample in flatten(group)]
    return [PLANTED[plant](s) for s in samples] if plant else samples


def model_recipe(name: str) -> dict[str, Any]:
    """The tiny model's variant `name` (`config.MODELS`): "tool-rl" (`e2e.tiny.variants.tool_rl`,
    float32, planted copy heads: the echo-tool lane) or "arith-only" (`variants.arith_only`, bf16)."""
    from adapter.reference.tiny_model import RECIPE
    from e2e.tiny.variants import arith_only, tool_rl

    return {"tool-rl": tool_rl, "arith-only": arith_only}[name](RECIPE)


def serve_args(model_dir: Path) -> tuple[str, ...]:
    """SGLang flags for the checkpoint's dtype: a float32 checkpoint is served in float32 (the
    default flags say bfloat16), so SGLang and the fp32 trainer compute on the same numbers."""
    dtypes = {dtype for dtype, _ in served_tensors(model_dir).values()}
    return ("--dtype", "float32") if dtypes == {"F32"} else ()


class Loop:
    """One run's moving parts: the rollout function, the trainer, the server's address."""

    def __init__(self, config: RLConfig, *, url: str, model_dir: Path, record_dir: Path | None = None) -> None:
        generation = installed()
        add_env_sources([LANE_TASKSETS, generation.bundled_tasksets()])  # modules by name, here and in subprocesses
        args = miles_args(config, url=url, model_dir=model_dir, env_config=env_config(config.taskset, generation))
        constructor, self._train_input, *_ = abi_types()
        self.rollout = VerifiersRolloutFn(constructor(args=args, data_source=None))
        options = TrainerOptions(lr=config.lr, temperature=config.temperature, epochs=config.epochs,
                                 optimizer=config.optimizer)
        self.trainer = PolicyTrainer(model_dir, options, frozen=planted_masks if is_planted(model_dir) else None)
        self.config, self.url, self.record_dir = config, url, record_dir

    async def step(self, k: int) -> StepRecord:
        """Rollouts on weight version str(k), the checks' numbers, the update, version str(k + 1)."""
        t0 = time.monotonic()
        out = await self.rollout(self._train_input(rollout_id=k, weight_version=k))
        samples = _train_samples(out.samples, self.config.plant)
        t1 = time.monotonic()
        trainer_lps = self.trainer.logprobs(samples)  # on the weights SGLang served this step
        if self.record_dir is not None:
            dump_step(self.record_dir / f"step-{k}.json", samples, trainer_lps)
        stats = self.trainer.update(samples, group_advantages(samples))
        checkpoint = self.trainer.save(self.config.run_dir.resolve() / f"weights-{k + 1}")  # SGLang reads a
        # relative path as a hub repo id
        t2 = time.monotonic()
        load_weights(self.url, checkpoint, str(k + 1))
        shutil.rmtree(self.config.run_dir / f"weights-{k}", ignore_errors=True)  # SGLang has read k + 1
        t3 = time.monotonic()
        mean, std = reward_stats(samples)
        return StepRecord(
            step=k, reward_mean=mean, reward_std=std, mismatch_kl=mismatch_kl(samples, trainer_lps),
            planted_kl={name: mismatch_kl([bug(s) for s in samples], trainer_lps) for name, bug in PLANTED.items()},
            tool_turn_kl=tool_turn_kl(samples, trainer_lps), tool_turns=sum(0 in s.loss_mask for s in samples),
            surprisal=surprisal(samples),
            samples=len(samples), groups=len(out.samples), tokens=sum(s.trained_tokens for s in samples),
            weight_versions=[list(v) for v in dict.fromkeys(s.weight_versions for s in samples)],
            statuses=dict(Counter(s.status for s in samples)), loss=stats.loss, clip_fraction=stats.clip_fraction,
            grad_norm=stats.grad_norm, rollout_s=t1 - t0, train_s=t2 - t1, sync_s=t3 - t2, seconds=t3 - t0)


def run(config: RLConfig, *, record_dir: Path | None = None, progress: Any = print) -> RunRecord:
    """The whole run, server start-up included: the learning run, then (`config.control`) the
    lr-0 control on the same seeds from the same version-0 weights (`control_steps` only); the
    server is ended on the way out."""
    started, load_before = time.monotonic(), os.getloadavg()
    config.run_dir.mkdir(parents=True, exist_ok=True)
    from adapter.reference.tiny_model import build_tiny_model

    model_dir = build_tiny_model(progress=False, recipe=model_recipe(config.model))
    with serving(config.sglang_version, deterministic=True, model_dir=model_dir,
                 extra_args=serve_args(model_dir)) as server:
        progress(f"sglang {server.version} up in {server.startup_s:.0f} s at {server.url} (log {server.log_path})")
        steps = _run_steps(config, server, record_dir, progress, "learning")
        control = _run_control(config, server, progress, steps[0]) if config.control else []
        startup_s = server.startup_s
    return RunRecord(config=_jsonable(config), sglang_version=config.sglang_version, startup_s=startup_s,
                     total_s=time.monotonic() - started, cpus=os.cpu_count() or 0, load_before=load_before,
                     load_after=os.getloadavg(), steps=steps, control=control)


def _run_steps(config: RLConfig, server: Any, record_dir: Path | None, progress: Any, label: str) -> list[StepRecord]:
    """One run of `config.steps` steps from the served directory's weights, loaded as version "0"
    (a fresh rollout function: its seeds start over)."""
    load_weights(server.url, server.model_dir, "0")
    loop = Loop(config, url=server.url, model_dir=server.model_dir, record_dir=record_dir)
    progress(f"{label}: {config.steps} steps at lr {config.lr:g}")
    steps = asyncio.run(_steps(loop, config.steps, progress))
    shutil.rmtree(config.run_dir / f"weights-{config.steps}", ignore_errors=True)
    return steps


def _run_control(config: RLConfig, server: Any, progress: Any, first: StepRecord) -> list[StepRecord]:
    """The lr-0 control on the learning run's seeds, `control_steps` only. Its step 0 is `first`,
    the learning run's step 0 (`control_runs` says why); each later contiguous run of steps starting
    at s is a fresh rollout function resumed at rollout_id s (Miles' resume: its task cursor starts
    at s × batch, so step k samples the learning run's step-k seeds) on the served weights loaded
    as version str(s)."""
    control = replace(config, lr=0.0)
    progress(f"control, lr 0: steps {', '.join(map(str, control_steps(config)))} of {config.steps} (the flat "
             "check's windows; step 0 is the learning run's)")
    records = [first]
    for segment in control_runs(config):
        load_weights(server.url, server.model_dir, str(segment[0]))
        loop = Loop(control, url=server.url, model_dir=server.model_dir)
        records += asyncio.run(_steps(loop, segment, progress))
        shutil.rmtree(config.run_dir / f"weights-{segment[-1] + 1}", ignore_errors=True)
    return records


async def _steps(loop: Loop, count: int | list[int], progress: Any) -> list[StepRecord]:
    """The steps on one rollout function (its bridge and engine session held across them), closed
    at the end, on this loop."""
    steps: list[StepRecord] = []
    try:
        for k in range(count) if isinstance(count, int) else count:
            record = await loop.step(k)
            steps.append(record)
            progress(f"step {k}: reward {record.reward_mean:.3f} ± {record.reward_std:.3f}, "
                     f"KL {record.mismatch_kl:.2e}, {record.tokens} tokens, {record.seconds:.1f} s")
    finally:
        await loop.rollout.aclose()
    return steps


def _jsonable(config: RLConfig) -> dict[str, Any]:
    return {name: (str(value) if isinstance(value, Path) else value) for name, value in vars(config).items()}
