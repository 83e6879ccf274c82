"""Miles #1845's start-up and checkpoint order (head d2624723d), on miles-rl 0.0.2's own classes.

#1845 changes three things a rollout function sees; the driver (`e2e.miles_cpu.train`) applies all
three when `VF_SGLANG_MILES_STARTUP=pr1845`:

  * `RolloutExecutor.save/load` (0.0.2's `RolloutManager`) pass the call on to the class-based
    rollout function when the class path is on (`miles/ray/rollout/rollout_executor.py:235-245`):
    `RolloutManagerPR1845` below, 0.0.2's Ray actor class with exactly those two additions;
  * `create_training_models` calls `load(start_rollout_id - 1)` on every start, not only with the
    global dataset (`miles/ray/placement_group.py:194`);
  * train.py's checkpoint calls `rollout_executor.save(rollout_id)` on every save, not only with
    the global dataset (`train.py:94`).

Runs inside the Miles venv only (imports ray and miles).
"""

from __future__ import annotations

import os
from typing import Any

import ray
from miles.ray.rollout import RolloutManager

from e2e.miles_cpu import STARTUP_VAR


def enabled() -> bool:
    """Whether this driver runs #1845's order (the printed environment sets the variable)."""
    return os.environ.get(STARTUP_VAR) == "pr1845"


_Published: Any = RolloutManager.__ray_metadata__.modified_class.__ray_actor_class__  # 0.0.2's class itself


@ray.remote
class RolloutManagerPR1845(_Published):  # type: ignore[misc,valid-type]
    """0.0.2's RolloutManager with #1845's `RolloutExecutor.save/load`."""

    def save(self, rollout_id: int) -> None:
        super().save(rollout_id)
        if self.use_experimental_refactor:
            self.generate_rollout.save(rollout_id)

    def load(self, rollout_id: int | None = None) -> None:
        super().load(rollout_id)
        if self.use_experimental_refactor:
            self.generate_rollout.load(rollout_id)
