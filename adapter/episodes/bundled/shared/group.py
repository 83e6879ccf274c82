"""`group-v1`, for both generations: a per-rollout reward plus a group reward.

Four inline rows ask the model to say one given word. Scoring:
  * reward `says_word` (weight 1.0, per rollout): 1.0 iff the final reply contains the word
    (case-insensitive), else 0.0;
  * group reward `shortest` (weight 0.5, over the whole group): the eligible traces (those
    without an error; an empty reply counts, with length 0) with the shortest reply (characters,
    stripped) share a raw score of 1.0 equally (k tied winners get 1/k each); everyone else gets
    0.0. Stored as score x 0.5, so over a group the stored `shortest` values **sum to exactly
    0.5** whenever at least one trace has no error (0.0 otherwise: failed traces never win).

How the group reward reaches the traces is the generation's (`group_v1`): 0.2.x's
`@group_reward`, or in 0.3.x/0.4.0 an `Env` whose one episode attempts the task n times and
writes `shortest` in `finalize`. A group needs n >= 2.
"""

from __future__ import annotations

from collections.abc import Sequence

import verifiers.v1 as vf

__all__ = ["SHORTEST_TOTAL", "SHORTEST_WEIGHT", "WORDS", "GroupData", "SaysWord", "group_rows", "shortest_scores"]

WORDS: tuple[str, ...] = ("banana", "violet", "harbor", "pepper")
SHORTEST_WEIGHT = 0.5
SHORTEST_TOTAL = SHORTEST_WEIGHT  # what the stored `shortest` values sum to over a group


class GroupData(vf.TaskData):
    word: str


def group_rows() -> list[GroupData]:
    """The 4 rows, `idx` set (0.3.x needs it; 0.4.0 re-assigns the same value on iteration)."""
    return [
        GroupData(
            idx=i,
            name=f"group-{i}",
            prompt=[{"role": "user", "content": f"Say the word {word!r}. Reply with that word only."}],
            word=word,
        )
        for i, word in enumerate(WORDS)
    ]


def shortest_scores(lengths: Sequence[int | None]) -> list[float]:
    """Raw `shortest` scores of a group: reply lengths, None for an ineligible (failed) trace."""
    eligible = [n for n in lengths if n is not None]
    if not eligible:
        return [0.0] * len(lengths)
    best = min(eligible)
    winners = sum(1 for n in lengths if n == best)
    return [1.0 / winners if n == best else 0.0 for n in lengths]


class SaysWord(vf.Task[GroupData]):
    """The per-rollout reward; a generation's `GroupTask` (or `Env`) adds the group reward."""

    @vf.reward
    async def says_word(self, trace: vf.Trace) -> float:
        return 1.0 if self.data.word.lower() in trace.last_reply.lower() else 0.0
