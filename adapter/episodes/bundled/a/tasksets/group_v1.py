"""`group-v1` for verifiers 0.2.x (generation A): rows and scoring are
`adapter.episodes.bundled.shared.group`'s; here the group reward is 0.2.x's `@group_reward`.

A task with a `@group_reward` needs n >= 2 (`Environment.episode` refuses n < 2); group
rewards are written into every trace only after all n rollouts finished. Importable by
module name: put `adapter/episodes/bundled/a/tasksets` on PYTHONPATH.
"""

from __future__ import annotations

import verifiers.v1 as vf

from adapter.episodes.bundled.shared.group import SHORTEST_WEIGHT, SaysWord, group_rows, shortest_scores

__all__ = ["GroupTask", "GroupTaskset"]


class GroupTask(SaysWord):
    @vf.group_reward(weight=SHORTEST_WEIGHT)
    async def shortest(self, traces: list[vf.Trace]) -> list[float]:
        return shortest_scores([None if t.has_error else len(t.last_reply) for t in traces])


class GroupTaskset(vf.Taskset[GroupTask]):
    def load(self) -> list[GroupTask]:
        return [GroupTask(row, self.config.task) for row in group_rows()]
