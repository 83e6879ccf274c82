"""The stress command's table, for the terminal and as docs/ci.md's "## Stress" section.

    run_table(lane, runs) -> str          one line per run: wall, status, what ran beside it
    row(lane, runs, when) -> str          the lane's row: lane | load | runs passed | wall per run | date
    merge(doc, row) -> str                the doc with its Stress section holding `row` (replacing the
                                          lane's earlier row; other lanes' rows kept), added at the end
                                          when the doc has none
    carry(previous, doc) -> str           `doc` with `previous`'s Stress section (what `tools.ci run
                                          --write` does, so rewriting docs/ci.md keeps the stress table)

The section lies between BEGIN and END, generated whole; rows in CI's lane order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from tools.ci.lanes import lane_order
from tools.ci.stress import StressRun

BEGIN = "<!-- stress:begin -->"
END = "<!-- stress:end -->"
HEADER = ("| lane | load | runs passed | wall per run (s) | date |", "|---|---|---|---|---|")
PROSE = (
    "Written by `python3 -m tools.ci stress LANE [--runs N] [--against hog|pair] --write docs/ci.md`: the lane "
    "run N times in a row (default 3), each run beside a load: `hog`, one CPU-burning process per core; `pair`, "
    "the lanes its CI stage runs beside it (a lane CI runs alone gets the hog). Each run builds its lanes' envs "
    "anew (their tox envs removed first), as CI's clean checkout does. A lane that passes only on an "
    "idle machine fails here. One row per lane, its latest stress run; `.ci/run` keeps this section when it "
    "rewrites the file."
)


def passed(runs: Sequence[StressRun]) -> str:
    return f"{sum(run.result.ok for run in runs)}/{len(runs)}"


def _walls(runs: Sequence[StressRun]) -> str:
    return ", ".join(f"{run.result.seconds:.0f}" + ("" if run.result.ok else " (failed)") for run in runs)


def run_table(lane: str, runs: Sequence[StressRun]) -> str:
    lines = [f"{'run':>3}  {'wall':>8}  {'status':<16}  beside", f"{'-' * 3}  {'-' * 8}  {'-' * 16}  ------"]
    for number, run in enumerate(runs, 1):
        beside = run.load.label + "".join(f"; {r.lane} {r.status}" for r in run.beside)
        lines.append(f"{number:>3}  {run.result.seconds:>6.1f} s  {run.result.status:<16}  {beside}")
    lines.append(f"{lane}: {passed(runs)} runs passed")
    return "\n".join(lines)


def row(lane: str, runs: Sequence[StressRun], when: datetime) -> str:
    loads = " / ".join(dict.fromkeys(run.load.label for run in runs))
    return f"| {lane} | {loads} | {passed(runs)} | {_walls(runs)} | {when:%Y-%m-%d} |"


def _span(doc: str) -> tuple[int, int] | None:
    """Where the section lies in `doc` (markers included), if it has one."""
    start = doc.find(BEGIN)
    end = doc.find(END, start)
    return (start, end + len(END)) if start >= 0 and end >= 0 else None


def rows(doc: str) -> dict[str, str]:
    """The Stress section's rows in `doc`, by lane."""
    span = _span(doc)
    if span is None:
        return {}
    lines = doc[span[0]:span[1]].splitlines()
    return {line.split("|")[1].strip(): line for line in lines if line.startswith("| ") and line not in HEADER}


def section(by_lane: Mapping[str, str]) -> str:
    order = lane_order()

    def rank(lane: str) -> tuple[int, str]:
        return (order.index(lane) if lane in order else len(order), lane)

    return "\n".join([BEGIN, "## Stress: each lane run again and again, the machine busy beside it", "", PROSE, "",
                      *HEADER, *(by_lane[lane] for lane in sorted(by_lane, key=rank)), END])


def _place(doc: str, block: str) -> str:
    span = _span(doc)
    if span is not None:
        return doc[:span[0]] + block + doc[span[1]:]
    return (doc.rstrip("\n") + "\n\n" if doc.strip() else "") + block + "\n"


def merge(doc: str | None, new_row: str) -> str:
    doc = doc or ""
    by_lane = rows(doc)
    by_lane[new_row.split("|")[1].strip()] = new_row
    return _place(doc, section(by_lane))


def carry(previous: str | None, doc: str) -> str:
    if previous is None or _span(previous) is None:
        return doc
    return _place(doc, section(rows(previous)))
