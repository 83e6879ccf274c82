"""`group-v1`: a per-rollout reward plus a group reward (verifiers 0.2.0, V1 API).

Four inline rows ask the model to say one given word. Scoring:
  * reward `says_word` (weight 1.0, per rollout): 1.0 iff the final reply contains the word
    (case-insensitive), else 0.0;
  * group reward `shortest` (weight 0.5, over the whole group): the eligible traces — those
    without an error; an empty reply counts, with length 0 — with the shortest reply
    (characters, stripped) share a raw score of 1.0 equally (k tied winners get 1/k each);
    everyone else gets 0.0. Stored in `trace.rewards["shortest"]` as score x 0.5, so over a
    group the stored `shortest` values **sum to exactly 0.5** whenever at least one trace
    has no error (0.0 otherwise: failed traces, which Verifiers 0.2.0 also hands to group
    rewards, never win).

A task with a `@group_reward` needs n >= 2 (`Environment.episode` refuses n < 2); group
rewards are written into every trace only after all n rollouts finished. Importable by
module name: put `adapter/episodes/bundled/a/tasksets` on PYTHONPATH.
"""

from __future__ import annotations

import verifiers.v1 as vf

__all__ = ["SHORTEST_TOTAL", "WORDS", "GroupData", "GroupTask", "GroupTaskset"]

WORDS: tuple[str, ...] = ("banana", "violet", "harbor", "pepper")
SHORTEST_WEIGHT = 0.5
SHORTEST_TOTAL = SHORTEST_WEIGHT  # what the stored `shortest` values sum to over a group


class GroupData(vf.TaskData):
    word: str


class GroupTask(vf.Task[GroupData]):
    @vf.reward
    async def says_word(self, trace: vf.Trace) -> float:
        return 1.0 if self.data.word.lower() in trace.last_reply.lower() else 0.0

    @vf.group_reward(weight=SHORTEST_WEIGHT)
    async def shortest(self, traces: list[vf.Trace]) -> list[float]:
        lengths = [None if t.has_error else len(t.last_reply) for t in traces]
        eligible = [n for n in lengths if n is not None]
        if not eligible:
            return [0.0] * len(traces)
        best = min(eligible)
        winners = sum(1 for n in lengths if n == best)
        return [1.0 / winners if n == best else 0.0 for n in lengths]


class GroupTaskset(vf.Taskset[GroupTask]):
    def load(self) -> list[GroupTask]:
        return [
            GroupTask(
                GroupData(
                    idx=i,
                    name=f"group-{i}",
                    prompt=[{"role": "user", "content": f"Say the word {word!r}. Reply with that word only."}],
                    word=word,
                ),
                self.config.task,
            )
            for i, word in enumerate(WORDS)
        ]
