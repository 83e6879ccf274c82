"""`python3 -m tools.ci stress LANE`: one lane run again and again with the machine busy beside it,
so a lane that passes only on an idle machine fails here, not in CI by luck.

    hog(cores) -> context                   one CPU-burning process per core, each in its own process
                                            group, killed (the whole group) on the way out, whatever
                                            happened inside: a failed run, an exception, Ctrl-C
    load_for(lane, against) -> Load         what runs beside the lane: `hog`, or `pair` (the tracks its CI
                                            stage runs beside it; a lane run alone falls back to the hog)
    stress(lane, runs, against, logs) -> list[StressRun]
    partner_runs(lane, runs) -> {partner: [StressRun]}   pair: each partner lane's own runs, made
                                            beside the stressed lane (a row of its own in docs/ci.md)

Each run is the runner's own: `run_lane` (the lane's tox call, timed, logged to
`logs/run-K/<lane>.log`) inside the hog, or `run_stage` with the lane's track first and its CI
partners' tracks beside it; in pair mode each partner's runs count as its own (a partner run
beside the lane is its CI load too).
Every run builds its lanes' envs anew (`runner.drop_envs`), as CI's clean checkout does, so a row
measures what CI runs (an env's first imports included), never a developer's warm one.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TextIO

from tools.ci.lanes import partners
from tools.ci.runner import Result, run_lane, run_stage

Against = Literal["hog", "pair"]
AGAINST: tuple[Against, ...] = ("hog", "pair")


@dataclass(frozen=True)
class Load:
    against: Against
    beside: tuple[tuple[str, ...], ...] = ()  # pair: the partner tracks, side by side
    hogs: int = 0  # hog: CPU-burning processes
    fallback: bool = False  # pair was asked for, the lane has no partner

    @property
    def label(self) -> str:
        if self.against == "pair":
            return "pair: " + " ‖ ".join(" + ".join(track) for track in self.beside)
        return f"hog ×{self.hogs}" + (" (no CI partner)" if self.fallback else "")


@dataclass(frozen=True)
class StressRun:
    load: Load
    result: Result  # the stressed lane's
    beside: tuple[Result, ...] = ()  # pair: the partner lanes'


def hog_argv() -> list[str]:
    """One process that keeps one core busy until it is killed or its parent is gone: a stress run
    ended by SIGTERM or SIGKILL (no `finally` runs) must not leave hogs burning under the next run."""
    program = "import os, sys\nparent = int(sys.argv[1])\nwhile os.getppid() == parent: pass"
    return [sys.executable, "-c", program, str(os.getpid())]  # named here: the hog may start after we die


@contextlib.contextmanager
def hog(cores: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(cores):
            procs.append(subprocess.Popen(hog_argv(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                          start_new_session=True))
        yield procs
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        for proc in procs:
            proc.wait()


def load_for(lane: str, against: Against) -> Load:
    """`pair`: the lane's CI partners; `hog` (or `pair` for a lane CI runs alone): one hog per core."""
    if against == "pair" and (tracks := partners(lane)):
        return Load("pair", beside=tracks)
    return Load("hog", hogs=os.cpu_count() or 1, fallback=against == "pair")


def run_once(lane: str, load: Load, logs: Path, *, stream: TextIO) -> StressRun:
    """One run of the lane beside its load (the lane's output streams; a partner's is printed after)."""
    if load.against == "pair":
        results = run_stage([(lane,), *load.beside], logs, stream=stream, fresh=True)
        return StressRun(load, results[0], tuple(results[1:]))
    with hog(load.hogs):
        return StressRun(load, run_lane(lane, logs, stream=stream, fresh=True))


def stress(lane: str, *, runs: int = 3, against: Against = "hog", logs: Path,
           stream: TextIO | None = None) -> list[StressRun]:
    """The lane `runs` times in a row, each beside its load; every run is made, failed or not."""
    stream = stream or sys.stdout
    load = load_for(lane, against)
    if load.fallback:
        stream.write(f"{lane} runs alone in CI's stages: no partner to pair it with, so the hog instead\n")
    done: list[StressRun] = []
    for number in range(1, runs + 1):
        stream.write(f"===== {lane}: run {number} of {runs}, beside {load.label} =====\n")
        stream.flush()
        done.append(run_once(lane, load, logs / f"run-{number}", stream=stream))
    return done


def partner_runs(lane: str, runs: list[StressRun]) -> dict[str, list[StressRun]]:
    """Pair runs, seen from each partner: it ran beside the stressed lane and the other partner
    tracks, a load as real as the lane's own. A partner a failure left unrun is not counted."""
    by_partner: dict[str, list[StressRun]] = {}
    for run in runs:
        if run.load.against != "pair":
            continue
        for result in run.beside:
            if result.status == "not run":
                continue
            others = tuple(track for track in run.load.beside if result.lane not in track)
            by_partner.setdefault(result.lane, []).append(StressRun(Load("pair", beside=((lane,), *others)), result))
    return by_partner
