"""Progress of a CLI job, one step per finished group, on stderr.

    GroupProgress(total, enabled=...)   a context manager; call it with each kept group
                                        (`RolloutHooks.on_group`); shows "groups k/N" and the
                                        last group's reward mean/std
    progress_wanted(quiet)              True when stderr is a terminal and --quiet is off

A rich bar when enabled; nothing at all otherwise (a pipe, a log file, --quiet), so captured
output holds only the job's own lines. Never touches stdout, which carries the result table.
"""

from __future__ import annotations

import statistics
import sys
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from adapter.samples.conversion import flatten


def progress_wanted(quiet: bool) -> bool:
    return not quiet and sys.stderr.isatty()


def _reward(sample: Any) -> float:
    reward = sample.reward
    return float(reward["reward"]) if isinstance(reward, dict) else float(reward)


class GroupProgress:
    """Counts finished groups against `total` (see the module docstring)."""

    def __init__(self, total: int, *, enabled: bool, label: str = "groups", console: Console | None = None) -> None:
        self.done = 0
        self._progress: Progress | None = None
        if enabled:
            self._progress = Progress(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                TextColumn("{task.fields[last]}"), console=console or Console(stderr=True), transient=True,
            )
            self._task = self._progress.add_task(label, total=total, last="")

    def __enter__(self) -> GroupProgress:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if self._progress is not None:
            self._progress.stop()

    def __call__(self, group: list[Any]) -> None:
        self.done += 1
        if self._progress is None:
            return
        rewards = [_reward(sample) for sample in flatten(group)]  # multi-branch entries are nested
        std = statistics.pstdev(rewards) if len(rewards) > 1 else 0.0
        last = f"last group: reward mean {statistics.fmean(rewards):.3f} std {std:.3f}"
        self._progress.update(self._task, advance=1, last=last)
