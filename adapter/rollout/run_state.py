"""Where a run is in its taskset, and what a resumed run needs to draw exactly what an
uninterrupted run would: the task cursor, the rollout-id counter and the group/sample counters of
train and eval, with the taskset's identity (its size and draw order) so a state is never applied
to another run's tasks.

    RunProgress(tasks, shuffle=, seed=)   the draw order and the counters of one rollout function
    progress.next_task(rollout_id, batch)  (task index, cursor position) of the next train group
    progress.take_rollout_ids(count)       the first of `count` new rollout ids
    progress.checkpoint(rollout_id)        a `RunState`; `progress.restore(state)` applies one
    Seeding(seed, asked=).base(position, n, facts)  the seed of rollout 0 of a group, or None

Pure: reading and writing files is adapter.miles.checkpoint's job.
"""

from __future__ import annotations

import hashlib
import logging
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from adapter.errors import ConfigurationError

if TYPE_CHECKING:
    from adapter.engine.session import EngineFacts

logger = logging.getLogger(__name__)

FORMAT = 1


class Counters(BaseModel):
    """The next group and sample index of train or eval (the orchestrator's own, and what a
    checkpoint keeps of them): frozen, so a checkpoint never shares a counter that moves on."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    group_index: int = Field(default=0, ge=0)
    sample_index: int = Field(default=0, ge=0)

    def advanced(self, *, groups: int = 0, samples: int = 0) -> Counters:
        return Counters(group_index=self.group_index + groups, sample_index=self.sample_index + samples)


class RunState(BaseModel):
    """One checkpoint of an orchestrator after `rollout_id`'s train call. `cursor` is None when no
    train call ran yet (the first call then starts at `rollout_id × rollout_batch_size`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: int = FORMAT
    rollout_id: int = Field(ge=0)
    cursor: int | None = Field(default=None, ge=0)
    rollout_ids: int = Field(ge=0)
    train: Counters
    eval: Counters
    tasks: int = Field(ge=0)
    order: str  # digest of the task draw order (size, shuffle, seed decide it)


def order_digest(order: list[int]) -> str:
    """A short digest of the draw order: two runs agree on it when their tasksets and shuffle agree."""
    return hashlib.sha256(",".join(map(str, order)).encode()).hexdigest()[:16]


@dataclass
class RunProgress:
    """See the module docstring. The cursor is global: it starts at `rollout_id × batch` on the
    first train call (unless `restore` set it) and only ever grows, so a task drawn again (a second
    pass, a replaced group) sits at a new position. Rollout ids come from one counter for train
    and eval, so they are unique across a run's calls."""

    tasks: int
    shuffle: bool = False
    seed: int = 0
    order: list[int] = field(init=False)
    cursor: int | None = None
    rollout_ids: int = 0  # the next rollout_id
    train: Counters = field(default_factory=Counters)
    eval: Counters = field(default_factory=Counters)

    def __post_init__(self) -> None:
        self.order = list(range(self.tasks))
        if self.shuffle:
            random.Random(self.seed).shuffle(self.order)

    def next_task(self, rollout_id: int, batch: int) -> tuple[int, int]:
        if self.cursor is None:
            self.cursor = rollout_id * batch
        position = self.cursor
        self.cursor += 1
        return self.order[position % len(self.order)], position

    def take_rollout_ids(self, count: int) -> int:
        first = self.rollout_ids
        self.rollout_ids += count
        return first

    def checkpoint(self, rollout_id: int) -> RunState:
        """What a resumed run needs after `rollout_id`'s train call."""
        return RunState(rollout_id=rollout_id, cursor=self.cursor, rollout_ids=self.rollout_ids,
                        train=self.train, eval=self.eval, tasks=len(self.order), order=order_digest(self.order))

    def restore(self, state: RunState) -> None:
        """Continue exactly where `state` was taken. A state from another taskset or draw order is a
        `ConfigurationError` (its tasks would differ)."""
        if (state.tasks, state.order) != (len(self.order), order_digest(self.order)):
            raise ConfigurationError(
                f"the saved rollout state is for a taskset of {state.tasks} tasks in another draw order "
                f"(this run has {len(self.order)}; --rollout-shuffle/--rollout-seed or the taskset changed): "
                "resume with the run's own EnvConfig and flags, or start afresh without --load")
        self.cursor, self.rollout_ids = state.cursor, state.rollout_ids
        self.train, self.eval = state.train, state.eval


@dataclass
class Seeding:
    """Rollout i of the group at cursor `position` samples with seed `seed + position × n + i`
    (Miles' rule: the global task cursor in train, the task's index in eval) when seeds are
    `asked` for (Miles' --sglang-enable-deterministic-inference), or when the engine's facts say
    it is deterministic (`/server_info`, when the job read them): a deterministic SGLang server
    given no `sampling_seed` samples every request alike, so n rollouts would be identical. A task
    that repeats in a batch or a later step therefore gets new seeds."""

    seed: int
    asked: bool = False
    _told: bool = False

    def base(self, position: int, n: int, facts: EngineFacts | None) -> int | None:
        if not self.asked:
            if facts is None or not facts.deterministic:
                return None
            if not self._told:
                self._told = True
                logger.warning(
                    "the SGLang server runs with --enable-deterministic-inference: unseeded, every rollout of a "
                    "group would sample the same tokens, so rollout i of the group at task-cursor position c is "
                    "seeded %d + c × n + i (set the base with --seed)", self.seed)
        return self.seed + position * n
