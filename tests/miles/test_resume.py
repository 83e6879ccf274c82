"""Resume where it stopped: Miles calls the rollout function's `save(rollout_id)` on every
checkpoint and `load(rollout_id)` when a run resumes (adapter.miles.checkpoint). A run with drops
and over-sampling, checkpointed and resumed in a new process, draws exactly the tasks and seeds
an uninterrupted run draws; a state that is missing or corrupt is a typed error naming the file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import pytest

from adapter.config.settings import Settings
from adapter.engine.session import EngineSession
from adapter.errors import ResumeStateError
from adapter.miles import checkpoint
from adapter.rollout.orchestrator import Orchestrator
from tests.fakes import FakeBackend
from tests.miles.resume_run import SETTINGS, TASKS

REPO = Path(__file__).resolve().parents[2]


def _process(directory: Path, first: int, last: int, load: int | None = None) -> list[dict]:
    command = [sys.executable, "-m", "tests.miles.resume_run", str(directory), str(first), str(last)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(command + ([] if load is None else [str(load)]), cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def test_a_resumed_run_draws_exactly_the_tasks_and_seeds_of_an_uninterrupted_run(tmp_path) -> None:
    straight = _process(tmp_path / "straight", 0, 3)
    _process(tmp_path / "resumed", 0, 1)  # checkpoints after rollouts 0 and 1, then the process ends
    resumed = _process(tmp_path / "resumed", 2, 3, load=1)  # a new process: Miles' load(1)
    assert [step["draws"] for step in resumed] == [step["draws"] for step in straight[2:]]
    assert [step["groups"] for step in resumed] == [step["groups"] for step in straight[2:]]
    # the proof has teeth: drops and over-sampling pushed the cursor past rollout_id × batch
    assert sum(step["drops"] for step in straight[:2]) > 0
    assert sum(len(step["draws"]) for step in straight[:2]) > 2 * SETTINGS["rollout_batch_size"]
    fresh = _process(tmp_path / "fresh", 2, 3)  # what resuming without the state would draw
    assert fresh[0]["draws"] != straight[2]["draws"]


def _orchestrator() -> Orchestrator:
    return Orchestrator(settings=Settings(**SETTINGS), backend=FakeBackend(list(TASKS)), engine=EngineSession("http://e"),
                        model="m", env_id="resume")


def test_load_none_is_a_fresh_start(tmp_path) -> None:
    orchestrator = _orchestrator()
    assert checkpoint.load(orchestrator, Namespace(save=None, load=None), None) is None
    assert orchestrator.checkpoint(0).cursor is None


@pytest.mark.parametrize(("content", "message"), [
    (None, "no saved rollout state at"),
    ("{not json", "is corrupt"),
    ('{"format": 1, "rollout_id": 4}', "is corrupt"),
    ("[]", "is corrupt"),
])
def test_a_missing_or_corrupt_state_is_a_typed_error_naming_the_file(tmp_path, content, message) -> None:
    path = checkpoint.state_path(tmp_path, 4)
    if content is not None:
        path.parent.mkdir(parents=True)
        path.write_text(content)
    with pytest.raises(ResumeStateError, match=message) as caught:
        checkpoint.load(_orchestrator(), Namespace(save=None, load=str(tmp_path)), 4)
    assert caught.value.path == path and str(path) in str(caught.value)


def test_a_state_from_another_taskset_or_draw_order_is_refused(tmp_path) -> None:
    checkpoint.save(_orchestrator(), Namespace(save=str(tmp_path)), 4)
    other = Orchestrator(settings=Settings(**{**SETTINGS, "rollout_seed": 7}), backend=FakeBackend(list(TASKS)),
                         engine=EngineSession("http://e"), model="m", env_id="resume")
    with pytest.raises(ResumeStateError, match="another draw order"):
        checkpoint.load(other, Namespace(load=str(tmp_path)), 4)


def test_a_state_is_rollout_ids_own(tmp_path) -> None:
    checkpoint.save(_orchestrator(), Namespace(save=str(tmp_path)), 4)
    os.replace(checkpoint.state_path(tmp_path, 4), checkpoint.state_path(tmp_path, 5))
    with pytest.raises(ResumeStateError, match="rollout 4's, not 5's"):
        checkpoint.load(_orchestrator(), Namespace(load=str(tmp_path)), 5)


def test_the_class_abi_saves_and_loads_through_its_orchestrator(tmp_path, monkeypatch) -> None:
    """Miles' `BaseRolloutFn.save/load` (#1845) reach the checkpoint: what save wrote, load restores."""
    from adapter.miles import binding

    made = []

    def build(args, data_source=None, **_):
        made.append(_orchestrator())
        return made[-1]

    monkeypatch.setattr(binding, "build_orchestrator", build)
    args = Namespace(save=str(tmp_path), load=str(tmp_path))
    first = binding.VerifiersRolloutFn(Namespace(args=args, data_source=None))
    first.orchestrator._cursor, first.orchestrator._rollout_ids = 17, 40
    first.save(3)
    second = binding.VerifiersRolloutFn(Namespace(args=args, data_source=None))
    second.load(3)
    assert second.orchestrator.checkpoint(3) == first.orchestrator.checkpoint(3)
    assert second.orchestrator.checkpoint(3).cursor == 17
