"""`arith-v1`: graded single-turn arithmetic, offline (V1 API; the same module serves both
generations: `b/tasksets/arith_v1.py` is a symlink to this file).

Twelve inline rows ("What is 3 + 4? ..."), no dataset download, no tools. The model answers
in one turn; scoring reads the last integer in the final reply (reasoning inside `<think>`
is parsed out by Renderers and is not part of the reply):

  * reward `correct` (weight 1.0): 1.0 if that integer equals the answer, 0.5 if it is off
    by one, 0.0 otherwise or when the reply holds no integer;
  * metric `parsed`: 1.0 when the reply holds an integer at all.

Rewards therefore vary inside a group (right, close, wrong), so group-relative advantages
are non-zero. Importable by module name: put the generation's `adapter/episodes/bundled/<a|b>/tasksets` on
PYTHONPATH.
"""

from __future__ import annotations

import re

import verifiers.v1 as vf

__all__ = ["ROWS", "ArithData", "ArithTask", "ArithTaskset", "last_integer"]

# (left, operator, right): small enough for a 0.6B model, answers below 100.
ROWS: tuple[tuple[int, str, int], ...] = (
    (3, "+", 4),
    (7, "+", 5),
    (12, "+", 9),
    (20, "+", 22),
    (6, "*", 7),
    (8, "*", 3),
    (9, "*", 9),
    (4, "*", 12),
    (15, "-", 6),
    (30, "-", 17),
    (11, "+", 11),
    (5, "*", 5),
)
OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}
INTEGER = re.compile(r"-?\d[\d,]*")


def last_integer(text: str) -> int | None:
    """The last integer in `text` (thousands separators allowed), or None."""
    found = INTEGER.findall(text or "")
    if not found:
        return None
    return int(found[-1].replace(",", ""))


class ArithData(vf.TaskData):
    answer: int


class ArithTask(vf.Task[ArithData]):
    @vf.reward
    async def correct(self, trace: vf.Trace) -> float:
        got = last_integer(trace.last_reply)
        if got is None:
            return 0.0
        off = abs(got - self.data.answer)
        return 1.0 if off == 0 else 0.5 if off == 1 else 0.0

    @vf.metric
    async def parsed(self, trace: vf.Trace) -> float:
        return 0.0 if last_integer(trace.last_reply) is None else 1.0


class ArithTaskset(vf.Taskset[ArithTask]):
    def load(self) -> list[ArithTask]:
        return [
            ArithTask(
                ArithData(
                    idx=i,
                    name=f"arith-{i}",
                    prompt=f"What is {a} {op} {b}? Answer with just the number.",
                    answer=OPS[op](a, b),
                ),
                self.config.task,
            )
            for i, (a, op, b) in enumerate(ROWS)
        ]
