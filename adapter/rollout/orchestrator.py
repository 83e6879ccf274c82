"""Trainer-neutral orchestration: train batches of kept groups, and eval over the taskset.

Consumes `Settings`, an episode backend (a generation shim: `tasks`, `has_group_reward`,
`serving()`, `sized_serving(n)`, `connect(app, ...)`, `run_group(...)`) and the rollout
function's `RunLifetime` (adapter.rollout.lifetime: the engine session, and what the calls hold
open; its builder closes it, never the orchestrator). Emits `TrainOutput(groups, metrics)`:
exactly `rollout_batch_size` groups, an entry a `Sample` or a nested `list[Sample]` for a
multi-branch trace (adapter.samples.conversion); or `EvalOutput(data, metrics)` keyed by env id
with aligned `rewards` (numeric or None)/`truncated`/`samples`.

Rollout ids, the task cursor and the counters are `progress` (adapter.rollout.run_state: one
rollout-id counter for train and eval; a resumed run continues its saved cursor); seeds follow
the cursor (`Seeding`). In-flight episodes are bounded by `Settings.max_in_flight`.

Train (docs/contract.md §6): launch `over_sampling_batch_size` task groups at a time until enough
are kept; dropped groups are counted by reason and replaced. A refusal the bridge answered
(`BridgeState.refusal`) or a bug in its own code (`internal_error`) stops the run as soon as a
group finishes, on every generation alike. Only `EpisodeError` (raised by the shims) drops a
group; any other exception is a bug and propagates at once. Too many drops in a row stop the run
(`RolloutStalledError`, naming the last message of each drop reason). On exit, pending episodes
are cancelled, the engine gets `abort_all` and model calls still waiting on it are cut.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from adapter.bridge.handler import BridgeState, create_app
from adapter.config.limits import renderer_pool_size
from adapter.config.settings import Settings
from adapter.engine.client import SGLangClient
from adapter.engine.proxies import bypass_proxies_for_loopback
from adapter.engine.session import EngineSession
from adapter.episodes.generations import EpisodeBackend
from adapter.errors import ConfigurationError, EpisodeError, RolloutStalledError, TrainerSampleError
from adapter.rollout.hooks import RolloutHooks, score
from adapter.rollout.lifetime import RunLifetime, a_call
from adapter.rollout.run_state import RunProgress, Seeding
from adapter.samples.conversion import (
    GroupOutcome,
    assemble_group,
    eval_reward_value,
    trace_to_eval_entry,
    uniform_depth,
)
from adapter.samples.metrics import CallStats

logger = logging.getLogger(__name__)

# The drop reason of a group the dynamic filter rejected (its own reason is the detail).
FILTERED = "dynamic_filter"


@dataclass
class TrainOutput:
    groups: list[list[Any]]
    metrics: dict[str, float]
    drop_details: dict[str, str] = field(default_factory=dict)  # per drop reason, the last group's detail


@dataclass
class EvalOutput:
    data: dict[str, dict[str, list[Any]]]
    metrics: dict[str, float]


@dataclass
class Orchestrator:
    settings: Settings
    backend: EpisodeBackend
    lifetime: RunLifetime  # the run's engine session and everything the calls hold open; its builder closes it
    model: str
    env_id: str
    tokenizer_path: str | None = None
    # The registered model whose renderer formats prompts, decided by `rollout.job` (explicit, or
    # inferred from the tokenizer/checkpoint: `adapter.episodes.identity`); None: `settings.renderer_model_name`.
    renderer_model_name: str | None = None
    hooks: RolloutHooks = field(default_factory=RolloutHooks)
    progress: RunProgress = field(init=False)  # task cursor, rollout ids, counters (adapter.rollout.run_state)
    seeding: Seeding = field(init=False)
    _bridge: BridgeState | None = None

    def __post_init__(self) -> None:
        bypass_proxies_for_loopback()  # once: the served bridge and the harness' calls stay direct
        self.progress = RunProgress(len(self.backend.tasks), shuffle=self.settings.rollout_shuffle,
                                    seed=self.settings.rollout_seed)
        self.seeding = Seeding(self.settings.rollout_seed, asked=self.settings.sglang_enable_deterministic_inference)

    @property
    def engine(self) -> EngineSession:
        return self.lifetime.engine

    def _raise_what_stops_the_run(self) -> None:
        """Re-raise the typed refusal the bridge answered, if any: resampling cannot help. Then
        any bug in the bridge's own code (`InternalBridgeError`, its cause chained): a bug stops
        the run rather than turning into dropped, resampled groups."""
        if self._bridge is None:
            return
        if self._bridge.refusal is not None:
            raise self._bridge.refusal
        if self._bridge.internal_error is not None:
            raise self._bridge.internal_error

    async def _open(self, kind: str, settings: Settings, engine: EngineSession) -> tuple[Any, BridgeState]:
        """The bridge and its client for `kind` calls to `engine`, after the env's serving (and its
        serving for this group size: generation B's group-reward envs): each opened on first use
        and held by the lifetime."""
        await self.lifetime.hold("serving", self.backend.serving)
        n = settings.n_samples_per_prompt
        await self.lifetime.hold(("sized", n), lambda: self.backend.sized_serving(n))
        client, bridge = await self.lifetime.hold(("bridge", kind, engine.url),
                                                  lambda: self._bridge_client(settings, engine))
        self._bridge = bridge
        return client, bridge

    @contextlib.asynccontextmanager
    async def _bridge_client(self, settings: Settings, engine: EngineSession) -> AsyncIterator[tuple[Any, BridgeState]]:
        app = create_app(settings, engine.client, model=self.model)
        async with self.backend.connect(
                app, tokenizer_path=self.tokenizer_path,
                renderer_model_name=self.renderer_model_name or settings.renderer_model_name,
                pool_size=renderer_pool_size(settings.max_in_flight)) as client:
            yield client, app.state.bridge

    async def _run(self, task_index: int, client: Any, settings: Settings, semaphore: asyncio.Semaphore, *,
                   position: int) -> list[Any]:
        n = settings.n_samples_per_prompt
        return await self.backend.run_group(
            task_index, n=n, client=client, model=self.model, settings=settings,
            seed_base=self.seeding.base(position, n, self.engine.known), semaphore=semaphore)

    async def _judge(self, traces: list[Any], call: CallStats) -> GroupOutcome:
        """Traces of one task → a kept group or a drop (reason), hooks applied."""
        call.see(traces)
        n, progress = self.settings.n_samples_per_prompt, self.progress
        outcome = assemble_group(traces, n=n, group_index=progress.train.group_index,
                                 first_index=progress.train.sample_index, first_rollout_id=progress.rollout_ids,
                                 reward_key=self.settings.reward_key, stats=call.engine.get)
        if not outcome.kept:
            return outcome
        if self.settings.use_dynamic_global_batch_size and any(isinstance(e, list) for e in outcome.samples):
            raise TrainerSampleError(
                "a multi-branch rollout (compaction or sub-agents: its samples share a rollout_id) cannot be "
                "trained with --use-dynamic-global-batch-size: Miles treats such a batch as compact and computes "
                "no dynamic batch size for it, then asserts in convert_samples_to_train_data; drop "
                "--use-dynamic-global-batch-size or use a harness that keeps one branch")
        problem = await score(self.hooks.reward, outcome.samples)
        if problem is not None:
            return GroupOutcome([], "reward_hook_count", problem)
        progress.take_rollout_ids(len(outcome.samples))
        progress.train = progress.train.advanced(groups=1, samples=len(outcome.flat))
        call.converted.append(outcome.samples)
        if self.hooks.keep is not None:
            keep, reason = self.hooks.keep(outcome.samples)
            if not keep:
                return GroupOutcome(outcome.samples, FILTERED, reason or "")
        return outcome

    @a_call
    async def train(self, rollout_id: int, *, weight_version: int | None = None) -> TrainOutput:
        """`rollout_batch_size` kept groups. `weight_version` (Miles' train input) is only
        logged: each sample records the engine's own versions per turn (`weight_versions`)."""
        logger.debug("rollout %d: engine weight version %s", rollout_id, weight_version)
        target = self.settings.rollout_batch_size
        if not target or target < 1:
            raise ConfigurationError("--rollout-batch-size must be set to at least 1 for training")
        batch = max(self.settings.over_sampling_batch_size or target, 1)
        stall_limit = max(32, 4 * target)
        kept: list[list[Any]] = []
        drops: Counter[str] = Counter()
        last_detail: dict[str, str] = {}  # drop reason → its most recent underlying message
        filtered: Counter[str] = Counter()
        semaphore = asyncio.Semaphore(self.settings.max_in_flight)
        client, bridge = await self._open("train", self.settings, self.engine)
        engine, session_stats = bridge.engine, bridge.stats
        call = CallStats(engine=session_stats)
        pending: set[asyncio.Task[list[Any]]] = set()
        consecutive_drops = 0
        try:
            while len(kept) < target:
                if len(kept) + len(pending) < target:  # not enough in flight: launch a batch
                    for _ in range(batch):
                        task_index, position = self.progress.next_task(rollout_id, target)
                        coro = self._run(task_index, client, self.settings, semaphore, position=position)
                        pending.add(asyncio.create_task(coro))
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                self._raise_what_stops_the_run()
                stop: BaseException | None = None
                for task in done:
                    try:
                        outcome = await self._outcome(task, call)
                    except Exception as exc:  # keep retrieving the others, then stop
                        stop = stop or exc
                        continue
                    if outcome.kept and len(kept) < target:
                        kept.append(outcome.samples)
                        if self.hooks.on_group is not None:
                            self.hooks.on_group(outcome.samples)
                        consecutive_drops = 0
                    elif outcome.drop_reason == FILTERED:
                        filtered[outcome.detail] += 1
                        consecutive_drops += 1
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
        if self.hooks.sample_filter is not None:
            self.hooks.sample_filter(kept)
        if self.hooks.all_samples is not None:
            self.hooks.all_samples(call.converted)
        metrics = {**call.metrics(), **{f"rollout/drop/{reason}": float(c) for reason, c in drops.items()},
                   **{f"rollout/dynamic_filter/drop_{reason}": float(c) for reason, c in filtered.items() if reason}}
        return TrainOutput(groups=uniform_depth(kept), metrics=metrics, drop_details=dict(last_detail))

    async def _outcome(self, task: asyncio.Task[list[Any]], call: CallStats) -> GroupOutcome:
        try:
            traces = task.result()
        except EpisodeError as exc:  # a failed episode is data (a dropped group); anything else is a bug
            return GroupOutcome([], exc.reason, str(exc))
        return await self._judge(traces, call)

    @a_call
    async def evaluate(self, *, engine_url: str | Callable[[], str] | None = None) -> EvalOutput:
        """The whole taskset, n per eval prompt, `eval_*` overrides; lists aligned per trace.
        `rewards` hold the number the eval reward key (else the reward key) picks, else the
        scalar; None for an errored trace without it. `engine_url` overrides the engine (a
        snapshot eval's own router)."""
        settings = self.settings.for_eval()
        semaphore = asyncio.Semaphore(settings.max_in_flight)
        session = self.engine if engine_url is None else self.lifetime.engine_for(
            engine_url() if callable(engine_url) else engine_url)
        client, bridge = await self._open("eval", settings, session)
        engine, session_stats = bridge.engine, bridge.stats
        tasks = {asyncio.create_task(self._run(i, client, settings, semaphore, position=i)): i
                 for i in range(len(self.backend.tasks))}
        try:
            groups = await asyncio.gather(*tasks)
        except EpisodeError:
            self._raise_what_stops_the_run()
            raise
        finally:
            await _cancel({t for t in tasks if not t.done()}, engine)
        self._raise_what_stops_the_run()
        call, progress = CallStats(engine=session_stats), self.progress
        pairs: list[tuple[Any, Any]] = []
        for traces in groups:
            call.see(traces)
            for trace in traces:
                entry = trace_to_eval_entry(
                    trace, reward_key=settings.reward_key, group_index=progress.eval.group_index,
                    index=progress.eval.sample_index, rollout_id=progress.take_rollout_ids(1),
                    stats=session_stats.get(trace.id))
                progress.eval = progress.eval.advanced(samples=1)
                pairs.append((trace, entry))
            progress.eval = progress.eval.advanced(groups=1)
        samples = [entry for _, entry in pairs]
        problem = await score(self.hooks.reward, samples)
        if problem is not None:
            raise ConfigurationError(f"eval: {problem}")
        rewards = [eval_reward_value(s.reward, key=settings.reward_key, trace=t) for t, s in pairs]
        truncated = [bool(t.is_truncated) for t, _ in pairs]
        data: dict[str, dict[str, list[Any]]] = {
            self.env_id: {"rewards": rewards, "truncated": truncated, "samples": samples}}
        return EvalOutput(data=data, metrics={f"eval/{k}": v for k, v in call.metrics().items()})


def _stall_message(count: int, drops: Counter[str], last_detail: dict[str, str]) -> str:
    causes = "; ".join(f"{reason} ×{drops[reason]}: last: {last_detail.get(reason) or '(no detail)'}"
                       for reason in sorted(drops))
    return f"{count} groups in a row were dropped ({causes})"


async def _cancel(pending: set[asyncio.Task[Any]], engine: SGLangClient) -> None:
    """Cancel episodes still running, tell the engine to drop their requests, and end the model
    calls still waiting on it (they run in the servers' handler tasks, not the episodes')."""
    if not pending:
        return
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    await engine.abort_all()
    engine.cut_in_flight()
