"""The run's table, for the terminal (printed last by `.ci/run`) and as `docs/ci.md`.

    table(results) -> str              lane | tox envs | wall | status, one line each, and the total
    document(results, ...) -> str      docs/ci.md: the table with each lane's claims, the fast lane's
                                       slowest tests (read from its log), the claims that moved, and
                                       the Stress section of the docs/ci.md it replaces, kept
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from tools.ci.lanes import LANES, MOVED, NOT_IN_CI, RESOLVED, STAGES, tracks_of
from tools.ci.runner import Result
from tools.ci.stress_doc import carry

REPO = Path(__file__).resolve().parents[2]
# The canary's `next` cell verdict (`python -m tools.canary run` writes it under its run dir): the
# newest pre-releases of verifiers and renderers, judged on every run, shown here, never gating.
CANARY_NEXT = Path("runs") / "canary" / "next.md"

_SLOWEST = re.compile(r"^=+ slowest (\d+) durations =+$")
_DURATION = re.compile(r"^(\d+\.\d+)s (call|setup|teardown) +(\S+)$")
_SUMMARY = re.compile(r"^=* ?(?P<line>(\d+ failed, )?\d+ passed.* in [\d.]+s.*?) ?=*$")


def _wall(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds:.0f} s ({seconds / 60:.1f} min)"


def run_wall(results: Sequence[Result]) -> float:
    """The run's wall time: its longest track (`tracks_of()`: each track's lanes one after
    another, the tracks side by side)."""
    by_lane = {result.lane: result.seconds for result in results}
    return max(sum(by_lane.get(lane, 0.0) for lane in track) for track in tracks_of())


def cpu(result: Result) -> str:
    """CPU seconds and the cores they kept busy on average (CPU / wall)."""
    if result.cpu_seconds is None or result.status == "not run" or result.seconds <= 0:
        return "—"
    return f"{result.cpu_seconds:.0f} s ({result.cpu_seconds / result.seconds:.1f} cores)"


def table(results: Sequence[Result]) -> str:
    width = max(len(result.lane) for result in results)
    lines = [f"{'lane':<{width}}  {'wall':>16}  {'cpu':>18}  status", f"{'-' * width}  {'-' * 16}  {'-' * 18}  ------"]
    lines += [f"{r.lane:<{width}}  {_wall(r.seconds) if r.status != 'not run' else '—':>16}  {cpu(r):>18}  {r.status}"
              for r in results]
    lines.append(f"{'total':<{width}}  {_wall(run_wall(results)):>16}  "
                 f"({'passed' if all(r.ok for r in results) else 'failed'}; tracks side by side)")
    return "\n".join(lines)


def slowest_tests(log: str, count: int = 10) -> list[tuple[float, str]]:
    """The `--durations` block pytest printed in a lane's log: (seconds, test id), slowest first."""
    found: list[tuple[float, str]] = []
    inside = False
    for line in log.splitlines():
        if _SLOWEST.match(line.strip()):
            inside, found = True, []
            continue
        match = _DURATION.match(line.strip()) if inside else None
        if match:
            found.append((float(match.group(1)), f"{match.group(3)} ({match.group(2)})"))
        elif inside and found:
            inside = False
    return sorted(found, reverse=True)[:count]


def pytest_summary(log: str) -> str | None:
    lines = [m.group("line") for line in log.splitlines() if (m := _SUMMARY.match(line.strip()))]
    return lines[-1] if lines else None


def document(results: Sequence[Result], *, machine: str, fast_log: str | None, when: datetime | None = None,
             previous: str | None = None) -> str:
    """docs/ci.md from a run; `previous` is the file it replaces (its Stress section is carried over)."""
    when = when or datetime.now(UTC)
    stages = " → ".join(" ‖ ".join(" + ".join(track) for track in stage) for stage in STAGES)
    out = [
        "# CI: lanes, their time, their claims",
        "",
        f"Written by `.ci/run` (`python3 -m tools.ci run --write docs/ci.md`) from its run of "
        f"{when:%Y-%m-%d %H:%M} UTC on {machine}: **{_wall(run_wall(results))}** in all "
        f"({'every lane passed' if all(r.ok for r in results) else 'a lane failed'}). CI runs two tracks side by "
        "side for the whole run, each lane after the one before it on its track: track i is the i-th track (‖) "
        "of every stage below, its lanes (+) one after another; a stage names the lanes CI means to overlap (what "
        "`stress --against pair` runs beside a lane), and no lane waits for the other track to end a stage. "
        "`.ci/run` prints the same table last. "
        "CPU is user + system time of the lane's process tree as reaped (servers and Ray workers count where "
        "their parent waited for them); CPU / wall is how many cores the lane kept busy.",
        "",
        f"Stages: {stages}",
        "",
        "| lane | tox envs | wall | CPU (cores busy) | status | claims it proves |",
        "|---|---|---|---|---|---|",
    ]
    for result in results:
        lane = LANES[result.lane]
        wall = _wall(result.seconds) if result.status != "not run" else "—"
        claims = "<br>".join(f"• {claim}" for claim in lane.claims)
        out.append(f"| {result.lane} | {', '.join(f'`{env}`' for env in lane.envs)} | {wall} | {cpu(result)} | "
                   f"{result.status} | {claims} |")
    if fast_log:
        summary = pytest_summary(fast_log)
        slow = slowest_tests(fast_log)
        out += ["", "## The fast lane (the README's test command)", ""]
        if summary:
            out += [f"`{summary}` (pytest-xdist, one worker per core plus one)", ""]
        if slow:
            out += ["Its ten slowest tests:", "", "| seconds | test |", "|---|---|"]
            out += [f"| {seconds:.1f} | `{test}` |" for seconds, test in slow]
    next_file = REPO / CANARY_NEXT
    if next_file.is_file():
        out += ["", "## Verifiers as it is about to be (the canary's `next` cell, not gating)", "",
                next_file.read_text().strip()]
    out += ["", "## What a run resolves: pinned or fresh, never a warm cache's", "",
            "| what | how |", "|---|---|"]
    out += [f"| {what} | {how} |" for what, how in RESOLVED]
    out += ["", "## Claims that moved", "", "| claim | where it lives now |", "|---|---|"]
    out += [f"| {claim} | {where} |" for claim, where in MOVED]
    out += ["", "## tox envs CI does not run", "", "| env | why |", "|---|---|"]
    out += [f"| {env} | {why} |" for env, why in NOT_IN_CI.items()]
    out += ["", "The developer's loop: `python3 -m tools.ci changed --run` runs the lanes a change touches "
            "(by its paths against `main`; `--base REF` for another). `python3 -m tools.ci stress LANE` runs "
            "one lane again and again with the machine busy beside it (the Stress section, when there is one)."]
    return carry(previous, "\n".join(out) + "\n")
