"""The rollout function's own checkpoint, beside Miles' (Miles calls `save(rollout_id)` and
`load(rollout_id)` on every checkpoint: `BaseRolloutFn`, #1845): one JSON file per rollout id,

    {--save}/rollout/vf_sglang_state_{rollout_id}.json     written by save
    {--load or --save}/rollout/vf_sglang_state_{rollout_id}.json   read by load

holding `adapter.rollout.run_state.RunState`. `load(None)` is a fresh start. A file that is
missing, unreadable or not a state is a `ResumeStateError` naming it: a resumed run never starts
silently from zero. Writes are atomic (a temporary file renamed over the old one).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from adapter.errors import ConfigurationError, ResumeStateError
from adapter.rollout.orchestrator import Orchestrator
from adapter.rollout.run_state import RunState


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
        raise ResumeStateError(
            f"no saved rollout state at {path}: Miles resumes rollout {rollout_id} but the rollout function's "
            f"checkpoint is missing (saved by `save({rollout_id})` beside Miles' own); point --load at the run's "
            "save directory, or start afresh without --load", path=path) from exc
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
    write_state(path, orchestrator.checkpoint(rollout_id))
    return path


def load(orchestrator: Orchestrator, args: Any, rollout_id: int | None) -> Path | None:
    if rollout_id is None:
        return None
    directory = getattr(args, "load", None) or getattr(args, "save", None)
    if not directory:
        raise ResumeStateError(f"load({rollout_id}): Miles gave neither --load nor --save to read the rollout "
                               "state from", path=None)
    path = state_path(directory, rollout_id)
    try:
        orchestrator.restore(read_state(path, rollout_id))
    except ResumeStateError:
        raise
    except ConfigurationError as exc:
        raise ResumeStateError(f"{path}: {exc}", path=path) from exc
    return path
