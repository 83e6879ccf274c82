"""The lanes a change touches, by the paths it changed (the developer's loop).

    changed_paths(base) -> list[str]       committed since `base` (merge base), staged, unstaged, untracked
    affected(paths) -> dict[lane, path]     each lane a path touches, with the first such path (CI order)

`fast` and `lint` run for every change of code; the real-engine lanes only where their globs
(`tools.ci.lanes.LANES[...].paths`) match, e.g. the engine leg → sglang-cpu, `adapter/miles` or
`e2e/miles_cpu` → miles, the lock or the pins → the matrix and the canary.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from fnmatch import fnmatchcase
from pathlib import Path

from tools.ci.lanes import LANES, lane_order

REPO = Path(__file__).resolve().parents[2]


def _git(*args: str) -> list[str]:
    done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True, timeout=60)
    return [line for line in done.stdout.splitlines() if line]


def changed_paths(base: str = "main") -> list[str]:
    merge_base = _git("merge-base", base, "HEAD")[0]
    paths = (_git("diff", "--name-only", merge_base) + _git("diff", "--name-only", "--cached")
             + _git("ls-files", "--others", "--exclude-standard"))
    return sorted(set(paths))


def affected(paths: Iterable[str]) -> dict[str, str]:
    """Lane → the first changed path that touches it, in CI's order."""
    paths = list(paths)
    found: dict[str, str] = {}
    for lane in lane_order():
        hit = next((p for p in paths for glob in LANES[lane].paths if fnmatchcase(p, glob)), None)
        if hit is not None:
            found[lane] = hit
    return found
