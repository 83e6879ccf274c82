"""Trainer-neutral orchestration: train batches of kept groups, and eval over the taskset.

Consumes `Settings`, an episode backend (a generation shim: `tasks`, `has_group_reward`,
`serving()`, `run_group(...)`, `make_client(app, ...)`) and an engine address. Emits
`TrainOutput(groups, metrics)` — exactly `rollout_batch_size` groups of samples — or
`EvalOutput(data, metrics)` keyed by env id with aligned `rewards`/`truncated`/`samples`.

Train (CONTRACT.md §6): launch `over_sampling_batch_size` task groups at a time until enough
groups are kept; the task cursor starts at `rollout_id × rollout_batch_size` on the first call
(resume) and continues from there; dropped groups are counted by reason and replaced. A
refusal stops the run as soon as a group finishes: the bridge records the typed
`ConfigurationError` it answered (`BridgeState.refusal`) and this loop re-raises that object,
on every generation alike. Only `EpisodeError` (raised by the shims) drops a group; any other
exception is a bug and propagates at once. Too many drops in a row stop the run
(`RolloutStalledError`, naming the last message of each drop reason). On exit, pending
episodes are cancelled and the engine gets `abort_all`.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from adapter.bridge import BridgeState, create_app
from adapter.errors import ConfigurationError, EpisodeError, VfSglangError
from adapter.generations import EpisodeBackend
from adapter.metrics import TraceStats
from adapter.samples import GroupOutcome, assemble_group, trace_to_eval_entry
from adapter.settings import Settings
from adapter.sglang import SGLangClient

RewardHook = Callable[[list[Any]], Awaitable[Sequence[Any]]]
FilterHook = Callable[[list[Any]], tuple[bool, str | None]]


class RolloutStalledError(VfSglangError):
    """Every recent group was dropped: the run cannot make progress (drop counts attached)."""


@dataclass(frozen=True)
class RolloutHooks:
    """Trainer hooks: `reward` returns one reward per sample of a group (overrides the
    Verifiers reward); `keep` is the dynamic filter, returning (keep, reason)."""

    reward: RewardHook | None = None
    keep: FilterHook | None = None


@dataclass
class TrainOutput:
    groups: list[list[Any]]
    metrics: dict[str, float]


@dataclass
class EvalOutput:
    data: dict[str, dict[str, list[Any]]]
    metrics: dict[str, float]


@dataclass
class _Counters:
    group_index: int = 0
    sample_index: int = 0


@dataclass
class Orchestrator:
    settings: Settings
    backend: EpisodeBackend
    engine_url: str | Callable[[], str]
    model: str
    env_id: str
    tokenizer_path: str | None = None
    hooks: RolloutHooks = field(default_factory=RolloutHooks)
    use_miles_router: bool = False
    _cursor: int | None = None
    _order: list[int] = field(default_factory=list)
    _train: _Counters = field(default_factory=_Counters)
    _eval: _Counters = field(default_factory=_Counters)
    _bridge: BridgeState | None = None

    def _raise_refusal(self) -> None:
        """Re-raise the typed refusal the bridge answered, if any: resampling cannot help."""
        refusal = self._bridge.refusal if self._bridge is not None else None
        if refusal is not None:
            raise refusal

    def __post_init__(self) -> None:
        self._order = list(range(len(self.backend.tasks)))
        if self.settings.rollout_shuffle:
            random.Random(self.settings.rollout_seed).shuffle(self._order)

    @contextlib.asynccontextmanager
    async def _session(self, settings: Settings) -> AsyncIterator[tuple[Any, SGLangClient]]:
        engine = SGLangClient(self.engine_url, use_miles_router=self.use_miles_router)
        app = create_app(settings, engine, model=self.model)
        self._bridge = app.state.bridge
        client = self.backend.make_client(app, tokenizer_path=self.tokenizer_path,
                                          renderer_model_name=settings.renderer_model_name)
        try:
            async with self.backend.serving():
                yield client, engine
        finally:
            await client.close()
            await engine.aclose()

    def _next_task(self, rollout_id: int) -> int:
        if self._cursor is None:
            self._cursor = rollout_id * (self.settings.rollout_batch_size or 1)
        index = self._order[self._cursor % len(self._order)]
        self._cursor += 1
        return index

    def _seed_base(self, task_index: int, n: int) -> int | None:
        if not self.settings.sglang_enable_deterministic_inference:
            return None
        return self.settings.rollout_seed + task_index * n

    async def _run(self, task_index: int, client: Any, settings: Settings, semaphore: asyncio.Semaphore) -> list[Any]:
        n = settings.n_samples_per_prompt
        return await self.backend.run_group(
            task_index, n=n, client=client, model=self.model, settings=settings,
            seed_base=self._seed_base(task_index, n), semaphore=semaphore)

    async def _judge(self, traces: list[Any], stats: TraceStats) -> GroupOutcome:
        """Traces of one task → a kept group or a drop (reason), hooks applied."""
        stats.add(traces)
        n = self.settings.n_samples_per_prompt
        outcome = assemble_group(traces, n=n, group_index=self._train.group_index,
                                 first_index=self._train.sample_index, reward_key=self.settings.reward_key)
        if not outcome.kept:
            return outcome
        if self.hooks.reward is not None:
            rewards = list(await self.hooks.reward(outcome.samples))
            if len(rewards) != len(outcome.samples):
                return GroupOutcome([], "reward_hook_count",
                                    f"reward hook returned {len(rewards)} rewards for {len(outcome.samples)} samples")
            for sample, reward in zip(outcome.samples, rewards, strict=True):
                sample.reward = reward
        if self.hooks.keep is not None:
            keep, reason = self.hooks.keep(outcome.samples)
            if not keep:
                return GroupOutcome([], reason or "dynamic_filter", "dropped by the dynamic filter")
        self._train.group_index += 1
        self._train.sample_index += len(outcome.samples)
        return outcome

    async def train(self, rollout_id: int) -> TrainOutput:
        target = self.settings.rollout_batch_size
        if not target or target < 1:
            raise ConfigurationError("--rollout-batch-size must be set to at least 1 for training")
        batch = max(self.settings.over_sampling_batch_size or target, 1)
        stall_limit = max(32, 4 * target)
        kept: list[list[Any]] = []
        drops: Counter[str] = Counter()
        last_detail: dict[str, str] = {}  # drop reason → its most recent underlying message
        stats = TraceStats()
        semaphore = asyncio.Semaphore(self.settings.sglang_server_concurrency)
        async with self._session(self.settings) as (client, engine):
            pending: set[asyncio.Task[list[Any]]] = set()
            consecutive_drops = 0
            try:
                while len(kept) < target:
                    if len(kept) + len(pending) < target:  # not enough in flight: launch a batch
                        for _ in range(batch):
                            coro = self._run(self._next_task(rollout_id), client, self.settings, semaphore)
                            pending.add(asyncio.create_task(coro))
                    done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                    self._raise_refusal()
                    stop: BaseException | None = None
                    for task in done:
                        try:
                            outcome = await self._outcome(task, stats)
                        except Exception as exc:  # keep retrieving the others, then stop
                            stop = stop or exc
                            continue
                        if outcome.kept and len(kept) < target:
                            kept.append(outcome.samples)
                            consecutive_drops = 0
                        elif not outcome.kept:
                            reason = outcome.drop_reason or "unknown"
                            drops[reason] += 1
                            last_detail[reason] = outcome.detail
                            consecutive_drops += 1
                    if stop is not None:
                        raise stop
                    if consecutive_drops >= stall_limit:
                        raise RolloutStalledError(_stall_message(consecutive_drops, drops, last_detail))
            finally:
                await _cancel(pending, engine)
        metrics = {**stats.metrics(), **{f"rollout/drop/{reason}": float(c) for reason, c in drops.items()}}
        return TrainOutput(groups=kept, metrics=metrics)

    async def _outcome(self, task: asyncio.Task[list[Any]], stats: TraceStats) -> GroupOutcome:
        try:
            traces = task.result()
        except EpisodeError as exc:  # a failed episode is data (a dropped group); anything else is a bug
            return GroupOutcome([], exc.reason, str(exc))
        return await self._judge(traces, stats)

    async def evaluate(self) -> EvalOutput:
        """The whole taskset, n per eval prompt, `eval_*` overrides; lists aligned per trace."""
        settings = self.settings.for_eval()
        rewards: list[Any] = []
        truncated: list[bool] = []
        samples: list[Any] = []
        stats = TraceStats()
        semaphore = asyncio.Semaphore(settings.sglang_server_concurrency)
        async with self._session(settings) as (client, engine):
            tasks = {asyncio.create_task(self._run(i, client, settings, semaphore)): i
                     for i in range(len(self.backend.tasks))}
            try:
                groups = await asyncio.gather(*tasks)
            except EpisodeError:
                self._raise_refusal()
                raise
            finally:
                await _cancel({t for t in tasks if not t.done()}, engine)
        self._raise_refusal()
        for traces in groups:
            stats.add(traces)
            for trace in traces:
                entry = trace_to_eval_entry(trace, reward_key=settings.reward_key,
                                            group_index=self._eval.group_index, index=self._eval.sample_index)
                self._eval.sample_index += 1
                rewards.append(entry.reward)
                truncated.append(bool(trace.is_truncated))
                samples.append(entry)
            self._eval.group_index += 1
        data = {self.env_id: {"rewards": rewards, "truncated": truncated, "samples": samples}}
        return EvalOutput(data=data, metrics={f"eval/{k}": v for k, v in stats.metrics().items()})


def _stall_message(count: int, drops: Counter[str], last_detail: dict[str, str]) -> str:
    causes = "; ".join(f"{reason} ×{drops[reason]}: last: {last_detail.get(reason) or '(no detail)'}"
                       for reason in sorted(drops))
    return f"{count} groups in a row were dropped ({causes})"


async def _cancel(pending: set[asyncio.Task[Any]], engine: SGLangClient) -> None:
    """Cancel episodes still running and tell the engine to drop their requests."""
    if not pending:
        return
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    await engine.abort_all()
