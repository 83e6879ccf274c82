"""Resume where it stopped: Miles calls the rollout function's `save(rollout_id)` on every
checkpoint and `load(start_rollout_id - 1)` on every start (#1845; adapter.miles.checkpoint). A
run with drops and over-sampling, checkpointed and resumed in a new process, draws exactly the
tasks and seeds an uninterrupted run draws; a fresh start reads nothing; a `--load` without the
adapter's state starts afresh with a warning; a corrupt or foreign state is a typed error naming
the file. The same start-up order through the class ABI, on real episodes: test_startup.py."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import pytest

from adapter.config.settings import Settings
from adapter.engine.session import EngineSession
from adapter.errors import ConfigurationError, ResumeStateError
from adapter.miles import checkpoint
from adapter.rollout.lifetime import RunLifetime
from adapter.rollout.orchestrator import Orchestrator
from conformance.engine import ScriptedEngine
from conformance.mocking import mock_host
from tests.fakes import FakeBackend
from tests.miles import resume_run
from tests.miles.resume_run import SETTINGS, TASKS

REPO = Path(__file__).resolve().parents[2]


def _process(directory: Path, first: int, last: int, load: int | None = None) -> list[dict]:
    command = [sys.executable, "-m", "tests.miles.resume_run", str(directory), str(first), str(last)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(command + ([] if load is None else [str(load)]), cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def test_a_resumed_run_draws_exactly_the_tasks_and_seeds_of_an_uninterrupted_run(tmp_path) -> None:
    straight = asyncio.run(resume_run.run(str(tmp_path / "straight"), 0, 3, None))  # saves after every step
    shutil.copytree(tmp_path / "straight", tmp_path / "resumed")  # the state after rollout 1 is Miles' load(1)
    resumed = _process(tmp_path / "resumed", 2, 3, load=1)  # a new process: nothing but the files carries over
    assert [step["draws"] for step in resumed] == [step["draws"] for step in straight[2:]]
    assert [step["groups"] for step in resumed] == [step["groups"] for step in straight[2:]]
    # the proof has teeth: drops and over-sampling pushed the cursor past rollout_id × batch
    assert sum(step["drops"] for step in straight[:2]) > 0
    assert sum(len(step["draws"]) for step in straight[:2]) > 2 * SETTINGS["rollout_batch_size"]
    fresh = asyncio.run(resume_run.run(str(tmp_path / "fresh"), 2, 3, None))  # what resuming without the state draws
    assert fresh[0]["draws"] != straight[2]["draws"]


def _orchestrator() -> Orchestrator:
    return Orchestrator(settings=Settings(**SETTINGS), backend=FakeBackend(list(TASKS)),
                        lifetime=RunLifetime(EngineSession("http://e")), model="m", env_id="resume")


def _saved(directory: Path, rollout_id: int, cursor: int) -> Orchestrator:
    saved = _orchestrator()
    saved.progress.cursor = cursor
    checkpoint.save(saved, Namespace(save=str(directory)), rollout_id)
    return saved


@pytest.mark.parametrize(("case", "saved_at", "args", "rollout_id", "restored"), [
    # Miles' start-up calls load(start_rollout_id - 1): a fresh run's is load(-1), and it reads nothing
    ("a fresh run: load(-1)", "load", {"save": "dir", "load": "dir"}, -1, False),
    ("load(None)", "load", {"save": "dir", "load": "dir"}, None, False),
    ("a fresh run without --save or --load", None, {"save": None, "load": None}, -1, False),
    # --start-rollout-id 3 alone: load(2); resume reads only --load, never --save
    ("--start-rollout-id 3 without --load", "save", {"save": "dir", "load": None}, 2, False),
    ("--load holding the state", "load", {"save": None, "load": "dir"}, 2, True),
])
def test_start_up_reads_a_state_only_from_load(tmp_path, case, saved_at, args, rollout_id, restored) -> None:
    if saved_at is not None:
        _saved(tmp_path, 2, cursor=17)
    orchestrator = _orchestrator()
    namespace = Namespace(**{key: str(tmp_path) if value else None for key, value in args.items()})
    path = checkpoint.load(orchestrator, namespace, rollout_id)
    assert (path == checkpoint.state_path(tmp_path, 2)) is restored, case
    assert orchestrator.progress.checkpoint(2).cursor == (17 if restored else None), case


async def test_a_fresh_start_draws_from_miles_rollout_id(tmp_path) -> None:
    """--start-rollout-id 3 without --load: load(2) reads nothing and rollout 3 draws from 3 × batch on."""
    engine, backend = ScriptedEngine(), FakeBackend(list(TASKS))
    orchestrator = Orchestrator(settings=Settings(**SETTINGS), backend=backend,
                                lifetime=RunLifetime(EngineSession(engine.url)), model="m", env_id="resume")
    assert checkpoint.load(orchestrator, Namespace(save=str(tmp_path), load=None), 2) is None
    with mock_host(engine.url, engine.handle):
        await orchestrator.train(3)
    order = orchestrator.progress.order
    first = 3 * SETTINGS["rollout_batch_size"]
    assert backend.calls[0][0] == order[first % len(order)]


def test_load_without_the_adapters_state_starts_afresh_with_a_warning_naming_the_file(tmp_path, caplog) -> None:
    """A base-model checkpoint, or a run saved before the adapter kept state: Miles goes on, so does the adapter."""
    orchestrator = _orchestrator()
    with caplog.at_level("WARNING", logger="adapter.miles.checkpoint"):
        assert checkpoint.load(orchestrator, Namespace(save=None, load=str(tmp_path)), 4) is None
    assert orchestrator.progress.checkpoint(4).cursor is None
    (warning,) = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert str(checkpoint.state_path(tmp_path, 4)) in warning
    assert "may repeat or be skipped" in warning


def test_save_without_save_directory_is_a_typed_error() -> None:
    with pytest.raises(ConfigurationError, match="--save"):
        checkpoint.save(_orchestrator(), Namespace(save=None, load=None), 0)


@pytest.mark.parametrize(("content", "message"), [
    ("{not json", "is corrupt"),
    ('{"format": 1, "rollout_id": 4}', "is corrupt"),
    ("[]", "is corrupt"),
])
def test_a_corrupt_state_is_a_typed_error_naming_the_file(tmp_path, content, message) -> None:
    path = checkpoint.state_path(tmp_path, 4)
    path.parent.mkdir(parents=True)
    path.write_text(content)
    with pytest.raises(ResumeStateError, match=message) as caught:
        checkpoint.load(_orchestrator(), Namespace(save=None, load=str(tmp_path)), 4)
    assert caught.value.path == path and str(path) in str(caught.value)


def test_a_state_from_another_taskset_or_draw_order_is_refused(tmp_path) -> None:
    checkpoint.save(_orchestrator(), Namespace(save=str(tmp_path)), 4)
    other = Orchestrator(settings=Settings(**{**SETTINGS, "rollout_seed": 7}), backend=FakeBackend(list(TASKS)),
                         lifetime=RunLifetime(EngineSession("http://e")), model="m", env_id="resume")
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
    first.orchestrator.progress.cursor, first.orchestrator.progress.rollout_ids = 17, 40
    first.save(3)
    second = binding.VerifiersRolloutFn(Namespace(args=args, data_source=None))
    second.load(3)
    assert second.orchestrator.progress.checkpoint(3) == first.orchestrator.progress.checkpoint(3)
    assert second.orchestrator.progress.checkpoint(3).cursor == 17
