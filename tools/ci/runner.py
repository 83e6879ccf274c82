"""Run lanes, timed: `uvx --with tox-uv tox -e ENVS` per lane, on tracks side by side.

    run_stages(stages, logs) -> list[Result]    the stages' tracks joined (`tracks_of`), side by side;
                                                a failed lane stops every track at its next lane
    run_lanes(names, logs) -> list[Result]      one track, one after another (the developer's loop)

Each lane's output goes to `logs/<lane>.log`; the first track also streams it. A
lane's wall time is measured around its tox call (environment creation included), its CPU time
(user + system) from the kernel's account of the tox process and every descendant it reaped
(`os.wait4`): servers and Ray workers a lane ends count when their parent waited for them. CPU
over wall says how many of the machine's cores a lane kept busy, so which lanes can share a stage.
A lane never run (a lane failed before it) is reported with status "not run".
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from tools.ci.affected import REPO
from tools.ci.lanes import LANES, tracks_of

TOX_WORKDIR = REPO / ".tox"  # tox.ini keeps tox's default work dir
# Every lane's process gets the lanes of its run (comma-separated): the canary leaves a cell whose
# newest set is exactly a matrix cell's pins to that cell when the matrix runs in the same run.
CI_LANES_ENV = "VF_SGLANG_CI_LANES"

Status = str  # "passed", "failed (exit N)", "not run"


@dataclass(frozen=True)
class Result:
    lane: str
    seconds: float
    status: Status
    log: Path | None
    cpu_seconds: float | None = None  # user + system of the lane's reaped process tree

    @property
    def ok(self) -> bool:
        return self.status == "passed"


def tox_argv(lane: str) -> list[str]:
    uvx = shutil.which("uvx") or "uvx"
    return [uvx, "--with", "tox-uv", "tox", "-e", ",".join(LANES[lane].envs)]


# What a lane leaves in the checkout that CI's clean checkout does not have and the lane's next run
# would read: lint's mypy and ruff caches (with them, a second lint run took 3.5 s instead of 69 s).
CHECKOUT_CACHES: dict[str, tuple[str, ...]] = {"lint": (".mypy_cache", ".ruff_cache")}


def drop_envs(lane: str, workdir: Path = TOX_WORKDIR) -> list[Path]:
    """Remove the lane's tox envs and the caches it left in the checkout (`CHECKOUT_CACHES`), so
    its next call builds them as on CI's clean checkout. Not `tox -r`: tox-uv recreates with `uv
    sync --reinstall`, which extracts every wheel into uv's cache again (measured: eleven
    recreations of the torch lanes' envs filled the disk; `uv cache prune` then removed 43.6 GiB
    of orphaned archive entries)."""
    candidates = [workdir / env for env in LANES[lane].envs]
    candidates += [workdir.parent / cache for cache in CHECKOUT_CACHES.get(lane, ())]
    dropped = [path for path in candidates if path.exists()]
    for path in dropped:
        shutil.rmtree(path)
    return dropped


def run_lane(lane: str, logs: Path, *, stream: TextIO | None, fresh: bool = False,
             lanes_in_run: Sequence[str] = ()) -> Result:
    """One lane's tox call; its output to `logs/<lane>.log` (and to `stream`, live); `fresh`:
    its envs built anew first (`drop_envs`), timed with the lane; `lanes_in_run`: every lane of the
    run it is part of, told to the lane's processes (`CI_LANES_ENV`)."""
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{lane}.log"
    started = time.monotonic()
    if fresh:
        drop_envs(lane)
    argv = tox_argv(lane)
    env = {**os.environ, CI_LANES_ENV: ",".join(lanes_in_run or (lane,))}
    with log.open("w") as out, subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                                stdin=subprocess.DEVNULL, text=True, bufsize=1, env=env) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            out.write(line)
            if stream is not None:
                stream.write(line)
                stream.flush()
        _, wait_status, usage = os.wait4(proc.pid, 0)
        code = proc.returncode = os.waitstatus_to_exitcode(wait_status)
    return Result(lane, time.monotonic() - started, "passed" if code == 0 else f"failed (exit {code})", log,
                  cpu_seconds=usage.ru_utime + usage.ru_stime)


def _track(lanes: Sequence[str], logs: Path, stream: TextIO | None, into: list[Result], *, fresh: bool,
           failed: threading.Event, lanes_in_run: Sequence[str]) -> None:
    """The lanes one after another, until one fails here or on another track (`failed`): the rest
    would only pile failures on the first, so they are reported "not run"."""
    for index, lane in enumerate(lanes):
        if failed.is_set():
            into.extend(Result(rest, 0.0, "not run", None) for rest in lanes[index:])
            return
        result = run_lane(lane, logs, stream=stream, fresh=fresh, lanes_in_run=lanes_in_run)
        into.append(result)
        if not result.ok:
            failed.set()


def run_stage(tracks: Sequence[Sequence[str]], logs: Path, *, stream: TextIO = sys.stdout,
              fresh: bool = False, failed: threading.Event | None = None) -> list[Result]:
    """The tracks side by side, each lane after the one before it on its track; the first track
    streams, the others' logs are printed after. A failed lane ends every track at its next lane
    (`failed` is set then)."""
    results: list[list[Result]] = [[] for _ in tracks]
    failed = failed or threading.Event()
    lanes_in_run = [lane for track in tracks for lane in track]
    threads = [threading.Thread(target=_track, args=(track, logs, stream if i == 0 else None, results[i]),
                                kwargs={"fresh": fresh, "failed": failed, "lanes_in_run": lanes_in_run})
               for i, track in enumerate(tracks)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for track, done in zip(tracks[1:], results[1:], strict=True):
        stream.write(f"----- {', '.join(track)} (run beside {', '.join(tracks[0])}) -----\n")
        for result in done:
            if result.log is not None:
                stream.write(result.log.read_text())
        stream.flush()
    return [result for done in results for result in done]


def run_stages(stages: Sequence[Sequence[Sequence[str]]], logs: Path, *, stream: TextIO = sys.stdout) -> list[Result]:
    """Every stage's tracks joined into CI's tracks (`tracks_of`), run side by side; the results in
    the stages' order (a failed lane stops every track at its next lane)."""
    done = {result.lane: result for result in run_stage(tracks_of(stages), logs, stream=stream)}
    return [done[lane] for stage in stages for track in stage for lane in track]


def run_lanes(lanes: Sequence[str], logs: Path, *, stream: TextIO = sys.stdout) -> list[Result]:
    return run_stage([list(lanes)], logs, stream=stream)


def machine() -> str:
    return f"{os.cpu_count() or '?'} cores"
