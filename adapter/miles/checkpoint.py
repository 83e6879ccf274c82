"""The rollout function's own checkpoint, beside Miles' (Miles calls `save(rollout_id)` on every
checkpoint and `load(start_rollout_id - 1)` on every start: `BaseRolloutFn`, #1845): one JSON file
per rollout id, holding `adapter.rollout.run_state.RunState`:

    {--save}/rollout/vf_sglang_state_{rollout_id}.json     written by save
    {--load}/rollout/vf_sglang_state_{rollout_id}.json     read by load

The start-up contract, as Miles' own data source keeps it (resume reads only `--load`):

    load(None) or a negative id (a fresh run: load(-1))     a fresh start; nothing is read
    no --load (e.g. --start-rollout-id K alone)             a fresh start at Miles' rollout id
    --load, the state file there                            restored exactly
    --load, no state file (a base model, a run saved        a fresh start at Miles' rollout id,
      before the adapter kept state)                          with a warning naming the file
    --load, a corrupt state or another run's                `ResumeStateError` naming the file
    save without --save                                     `ConfigurationError`

Writes are atomic (a temporary file renamed over the old one).
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from adapter.errors import ConfigurationError, ResumeStateError
from adapter.rollout.orchestrator import Orchestrator
from adapter.rollout.run_state import RunState

logger = logging.getLogger(__name__)


def state_path(directory: str | os.PathLike[str], rollout_id: int) -> Path:
    return Path(directory) / "rollout" / f"vf_sglang_state_{rollout_id}.json"


def write_state(path: Path, state: RunState) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.name}.", delete=False) as handle:
        handle.write(state.model_dump_json(indent=1))
    os.replace(handle.name, path)


def read_state(path: Path, rollout_id: int) -> RunState:
    try:
        text = path.read_text()
    except FileNotFoundError as exc:
        raise ResumeStateError(f"the saved rollout state {path} vanished while it was read", path=path) from exc
    except OSError as exc:
        raise ResumeStateError(f"the saved rollout state {path} cannot be read: {exc}", path=path) from exc
    try:
        state = RunState.model_validate_json(text)
    except ValidationError as exc:
        raise ResumeStateError(f"the saved rollout state {path} is corrupt: {exc.errors()[0]['msg']} "
                               f"at {'.'.join(map(str, exc.errors()[0]['loc'])) or 'the top'}", path=path) from exc
    if state.rollout_id != rollout_id:
        raise ResumeStateError(f"the saved rollout state {path} is rollout {state.rollout_id}'s, not {rollout_id}'s",
                               path=path)
    return state


def save(orchestrator: Orchestrator, args: Any, rollout_id: int) -> Path:
    directory = getattr(args, "save", None)
    if not directory:
        raise ConfigurationError(f"save({rollout_id}): Miles gave no --save directory to keep the rollout state in: "
                                 "pass --save DIR (Miles' checkpoint directory), where load finds it on resume")
    path = state_path(directory, rollout_id)
    write_state(path, orchestrator.progress.checkpoint(rollout_id))
    return path


def load(orchestrator: Orchestrator, args: Any, rollout_id: int | None) -> Path | None:
    """Restore `rollout_id`'s state from `--load` (module docstring: the start-up contract); the
    path restored, or None for a fresh start."""
    if rollout_id is None or rollout_id < 0:
        return None
    directory = getattr(args, "load", None)
    if not directory:
        return None
    path = state_path(directory, rollout_id)
    if not path.exists():
        logger.warning(
            "load(%d): no saved rollout state at %s (a base-model checkpoint, or a run saved before the adapter "
            "kept its state): starting afresh at rollout %d, so tasks drawn before the checkpoint may repeat or be "
            "skipped", rollout_id, path, rollout_id + 1)
        return None
    try:
        orchestrator.progress.restore(read_state(path, rollout_id))
    except ResumeStateError:
        raise
    except ConfigurationError as exc:
        raise ResumeStateError(f"{path}: {exc}", path=path) from exc
    return path
