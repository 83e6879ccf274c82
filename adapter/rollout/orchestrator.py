"""Trainer-neutral orchestration: train batches of kept groups, and eval over the taskset.

Consumes `Settings`, an episode backend (a generation shim: `tasks`, `has_group_reward`,
`serving()`, `connect(app, ...)`, `run_group(...)`) and an `EngineSession` (one client per engine
address, its facts read once: adapter.engine.session). Emits
`TrainOutput(groups, metrics)` — exactly `rollout_batch_size` groups; a group entry is a
`Sample`, or a nested `list[Sample]` for a multi-branch trace (adapter.samples.conversion) — or
`EvalOutput(data, metrics)` keyed by env id with aligned `rewards`/`truncated`/`samples`,
`rewards` numeric or None (Miles averages them).

Every rollout (trace) takes an int `rollout_id` from one counter per orchestrator, so ids are
unique across train and eval calls of a run (only the siblings of a multi-branch rollout carry
it: adapter.samples.sample_type.identity_fields). Seeds follow the global task cursor
(`_seed_base`). In-flight episodes are bounded by `Settings.max_in_flight` (Miles' bound); the
renderer pool by `renderer_pool_size`.

Train (docs/contract.md §6): launch `over_sampling_batch_size` task groups at a time until enough
groups are kept; the task cursor starts at `rollout_id × rollout_batch_size` on the first call
and continues from there (a run resumed from a checkpoint continues its saved cursor instead:
`checkpoint`/`restore`, adapter.rollout.run_state); dropped groups are counted by reason and replaced. A
refusal stops the run as soon as a group finishes: the bridge records the typed
`ConfigurationError` it answered (`BridgeState.refusal`) and this loop re-raises that object,
on every generation alike; a bug in the bridge's own code (`BridgeState.internal_error`) stops
it the same way. Only `EpisodeError` (raised by the shims) drops a group; any other
exception is a bug and propagates at once. Too many drops in a row stop the run
(`RolloutStalledError`, naming the last message of each drop reason). On exit, pending
episodes are cancelled and the engine gets `abort_all`.

Lifetime: the first call opens the env's serving, then the bridge app and its client (generation
B: served on a loopback port) for its kind (train or eval) and engine; they stay open across
calls, held by one task (`adapter.rollout.held`), until `aclose()`, or interpreter exit for an
orchestrator whose loop still runs (`close_all`).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import random
import weakref
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from adapter.bridge.handler import BridgeState, create_app
from adapter.config.settings import Settings
from adapter.engine.client import SGLangClient
from adapter.engine.proxies import bypass_proxies_for_loopback
from adapter.engine.session import EngineSession
from adapter.episodes.generations import EpisodeBackend
from adapter.errors import ConfigurationError, EpisodeError, RolloutStalledError, TrainerSampleError
from adapter.rollout.held import HeldContexts
from adapter.rollout.hooks import RolloutHooks, score
from adapter.rollout.run_state import Counters, RunState, order_digest
from adapter.samples.conversion import (
    GroupOutcome,
    assemble_group,
    eval_reward_value,
    trace_to_eval_entry,
    uniform_depth,
)
from adapter.samples.metrics import CallStats

logger = logging.getLogger(__name__)

# Renderer slots beyond the CPU cores add tokenizer copies (memory, start-up time), not speed.
RENDERER_POOL_CAP = 16


def renderer_pool_size(max_in_flight: int) -> int:
    """Renderer slots for `max_in_flight` concurrent requests: one each, up to the CPU cores
    (tokenizers release the GIL, so slots run in parallel) and `RENDERER_POOL_CAP`."""
    return max(1, min(max_in_flight, os.cpu_count() or 1, RENDERER_POOL_CAP))


# Every orchestrator not yet garbage-collected: `close_all()` closes those still open at exit.
_OPEN: weakref.WeakSet[Orchestrator] = weakref.WeakSet()

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


@dataclass(eq=False)  # identity: held in a WeakSet until closed
class Orchestrator:
    settings: Settings
    backend: EpisodeBackend
    engine: EngineSession  # built once by the job or the Miles binding: one client, facts read once
    model: str
    env_id: str
    tokenizer_path: str | None = None
    # The registered model whose renderer formats prompts, decided by `rollout.job` (explicit, or
    # inferred from the tokenizer/checkpoint: `adapter.episodes.identity`); None: `settings.renderer_model_name`.
    renderer_model_name: str | None = None
    hooks: RolloutHooks = field(default_factory=RolloutHooks)
    _cursor: int | None = None
    _order: list[int] = field(default_factory=list)
    _train: Counters = field(default_factory=Counters)
    _eval: Counters = field(default_factory=Counters)
    _rollout_ids: int = 0  # the next rollout_id: one counter for train and eval
    _bridge: BridgeState | None = None
    # What stays open between calls, in one holder task: the env's serving (and its sized serving
    # per group size, `_sized`), then one bridge and its client per (train|eval, engine address);
    # other engines (a snapshot eval's router) by URL.
    _held: HeldContexts = field(default_factory=lambda: HeldContexts("vf-sglang rollout function"))
    _bridges: dict[tuple[str, str], tuple[Any, BridgeState]] = field(default_factory=dict)
    _engines: dict[str, EngineSession] = field(default_factory=dict)
    _sized: set[int] = field(default_factory=set)
    _seeding_told: bool = False

    @property
    def bridge(self) -> BridgeState | None:
        """The bridge of the running (or last) train/eval call: its sessions and engine stats."""
        return self._bridge

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

    def __post_init__(self) -> None:
        bypass_proxies_for_loopback()  # once: the served bridge and the harness' calls stay direct
        self._order = list(range(len(self.backend.tasks)))
        if self.settings.rollout_shuffle:
            random.Random(self.settings.rollout_seed).shuffle(self._order)
        _OPEN.add(self)

    def _engine_for(self, engine_url: str | Callable[[], str] | None) -> EngineSession:
        """The run's engine, or another address's own session (made once per URL)."""
        if engine_url is None:
            return self.engine
        url = (engine_url() if callable(engine_url) else engine_url).rstrip("/")
        if url == self.engine.url:
            return self.engine
        if url not in self._engines:
            self._engines[url] = self.engine.sibling(url)
        return self._engines[url]

    async def _open(self, kind: str, settings: Settings, engine: EngineSession) -> tuple[Any, BridgeState]:
        """The bridge and its client for `kind` calls to `engine`: opened on the first call, then
        held (with the env's serving) until `aclose()`. A call on another event loop than the one
        that opened them reopens them there (their connections belonged to that loop)."""
        if not self._held.usable():
            if self._bridges:
                logger.warning("the rollout function is called on a new event loop: its bridge and the env's "
                               "serving are opened again there (close it with aclose() on the loop that used it)")
            self._bridges, self._sized = {}, set()
            await self._held.enter(self._engines_open())  # entered first, exited last
            await self._held.enter(self.backend.serving())
        n = settings.n_samples_per_prompt
        if n not in self._sized:  # a group-reward env served again for another n (generation B)
            sized = self.backend.sized_serving(n)
            if sized is not None:
                await self._held.enter(sized)
            self._sized.add(n)
        key = (kind, engine.url)
        if key not in self._bridges:
            app = create_app(settings, engine.client, model=self.model)
            client = await self._held.enter(self.backend.connect(
                app, tokenizer_path=self.tokenizer_path,
                renderer_model_name=self.renderer_model_name or settings.renderer_model_name,
                pool_size=renderer_pool_size(settings.max_in_flight)))
            self._bridges[key] = (client, app.state.bridge)
        client, bridge = self._bridges[key]
        self._bridge = bridge
        return client, bridge

    @property
    def held_loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop the held bridges live on (None: nothing held)."""
        return self._held.loop

    @contextlib.asynccontextmanager
    async def _engines_open(self) -> AsyncIterator[None]:
        """The engine sessions' connections, closed with the rest of what the calls held (also
        when their loop ends without `aclose()`: its end cancels the holder, which exits this)."""
        try:
            yield
        finally:
            engines, self._engines = [*self._engines.values(), self.engine], {}
            for engine in engines:
                await engine.aclose()

    async def aclose(self) -> None:
        """Close what the calls held open: the bridges and their clients, the env's serving, the
        engine sessions. The rollout function is done; a later call opens everything again."""
        try:
            await self._held.aclose()
        finally:
            self._bridges, self._sized = {}, set()
            await self.engine.aclose()  # its facts may have been read before any call held anything

    def _server_deterministic(self) -> bool:
        """The engine said (`/server_info`, when the job read its facts) that it samples
        deterministically; under Miles its --sglang-enable-deterministic-inference says so instead."""
        facts = self.engine.known
        if self.settings.sglang_enable_deterministic_inference or facts is None or not facts.deterministic:
            return False
        if not self._seeding_told:
            self._seeding_told = True
            logger.warning(
                "the SGLang server runs with --enable-deterministic-inference: unseeded, every rollout of a group "
                "would sample the same tokens, so rollout i of the group at task-cursor position c is seeded "
                "%d + c × n + i (set the base with --seed)", self.settings.rollout_seed)
        return True

    def checkpoint(self, rollout_id: int) -> RunState:
        """What a resumed run needs after `rollout_id`'s train call (adapter.rollout.run_state)."""
        return RunState(rollout_id=rollout_id, cursor=self._cursor, rollout_ids=self._rollout_ids,
                        train=self._train, eval=self._eval,
                        tasks=len(self._order), order=order_digest(self._order))

    def restore(self, state: RunState) -> None:
        """Continue exactly where `state` was taken: the next train call draws the task and seed an
        uninterrupted run would have drawn next. A state from another taskset or draw order is a
        `ConfigurationError` (its tasks would differ)."""
        if (state.tasks, state.order) != (len(self._order), order_digest(self._order)):
            raise ConfigurationError(
                f"the saved rollout state is for a taskset of {state.tasks} tasks in another draw order "
                f"(this run has {len(self._order)}; --rollout-shuffle/--rollout-seed or the taskset changed): "
                "resume with the run's own EnvConfig and flags, or start afresh without --load")
        self._cursor = state.cursor
        self._rollout_ids = state.rollout_ids
        self._train = state.train
        self._eval = state.eval

    def _next_task(self, rollout_id: int) -> tuple[int, int]:
        """(task index, cursor position) of the next train group. The cursor is global: it starts
        at `rollout_id × rollout_batch_size` on the first call (unless `restore` set it) and only ever grows, so a
        task drawn again (a second pass, a replaced group) sits at a new position."""
        if self._cursor is None:
            self._cursor = rollout_id * (self.settings.rollout_batch_size or 1)
        position = self._cursor
        self._cursor += 1
        return self._order[position % len(self._order)], position

    def _seed_base(self, position: int, n: int) -> int | None:
        """Rollout i of the group at `position` samples with seed `rollout_seed + position × n + i`
        (Miles' rule: the global task cursor in train, the task's index in eval) when seeds are
        asked for, or when the server is deterministic: a deterministic SGLang server given no
        `sampling_seed` samples every request alike, so n rollouts would be identical. A task that
        repeats in a batch or a later step therefore gets new seeds."""
        if not (self.settings.sglang_enable_deterministic_inference or self._server_deterministic()):
            return None
        return self.settings.rollout_seed + position * n

    async def _run(self, task_index: int, client: Any, settings: Settings, semaphore: asyncio.Semaphore, *,
                   position: int) -> list[Any]:
        n = settings.n_samples_per_prompt
        return await self.backend.run_group(
            task_index, n=n, client=client, model=self.model, settings=settings,
            seed_base=self._seed_base(position, n), semaphore=semaphore)

    def _take_rollout_ids(self, count: int) -> int:
        first = self._rollout_ids
        self._rollout_ids += count
        return first

    async def _judge(self, traces: list[Any], call: CallStats) -> GroupOutcome:
        """Traces of one task → a kept group or a drop (reason), hooks applied."""
        call.see(traces)
        n = self.settings.n_samples_per_prompt
        outcome = assemble_group(traces, n=n, group_index=self._train.group_index,
                                 first_index=self._train.sample_index, first_rollout_id=self._rollout_ids,
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
        self._take_rollout_ids(len(outcome.samples))
        self._train = self._train.advanced(groups=1, samples=len(outcome.flat))
        call.converted.append(outcome.samples)
        if self.hooks.keep is not None:
            keep, reason = self.hooks.keep(outcome.samples)
            if not keep:
                return GroupOutcome(outcome.samples, FILTERED, reason or "")
        return outcome

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
                        task_index, position = self._next_task(rollout_id)
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

    async def evaluate(self, *, engine_url: str | Callable[[], str] | None = None) -> EvalOutput:
        """The whole taskset, n per eval prompt, `eval_*` overrides; lists aligned per trace.
        `rewards` hold the number the eval reward key (else the reward key) picks, else the
        scalar; None for an errored trace without it. `engine_url` overrides the engine (a
        snapshot eval's own router)."""
        settings = self.settings.for_eval()
        semaphore = asyncio.Semaphore(settings.max_in_flight)
        client, bridge = await self._open("eval", settings, self._engine_for(engine_url))
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
        call = CallStats(engine=session_stats)
        pairs: list[tuple[Any, Any]] = []
        for traces in groups:
            call.see(traces)
            for trace in traces:
                entry = trace_to_eval_entry(trace, reward_key=settings.reward_key, group_index=self._eval.group_index,
                                            index=self._eval.sample_index, rollout_id=self._take_rollout_ids(1),
                                            stats=session_stats.get(trace.id))
                self._eval = self._eval.advanced(samples=1)
                pairs.append((trace, entry))
            self._eval = self._eval.advanced(groups=1)
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


def close_all(timeout: float = 30.0) -> None:
    """At interpreter exit: close every orchestrator still holding a bridge open on an event loop
    that still runs in another thread (Miles' background loop, the legacy ABI's loop). One on a
    finished loop cannot be reached any more; its resources end with the process."""
    for orchestrator in list(_OPEN):
        loop = orchestrator.held_loop
        if loop is None or loop.is_closed() or not loop.is_running():
            continue
        try:
            asyncio.run_coroutine_threadsafe(orchestrator.aclose(), loop).result(timeout)
        except Exception as exc:  # at exit: say so, and go on closing the others
            logger.warning("closing a rollout function at exit failed: %s: %s", type(exc).__name__, exc)


atexit.register(close_all)


async def close_on_this_loop() -> None:
    """Close every orchestrator holding something open on the running loop: for a caller whose
    loop ends before the interpreter (a test's), as `close_all` does at exit for loops that run on."""
    loop = asyncio.get_running_loop()
    for orchestrator in list(_OPEN):
        if orchestrator.held_loop is loop:
            await orchestrator.aclose()
