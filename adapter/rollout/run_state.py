"""What a resumed run needs to draw exactly what an uninterrupted run would: the task cursor, the
rollout-id counter and the group/sample counters of train and eval, with the taskset's identity
(its size and draw order) so a state is never applied to another run's tasks.

Pure: `RunState` is built from and applied to an `Orchestrator` (adapter.rollout.orchestrator);
reading and writing files is adapter.miles.checkpoint's job.
"""

from __future__ import annotations

import hashlib

from pydantic import BaseModel, ConfigDict, Field

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
