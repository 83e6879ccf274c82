"""One process of the resume proof (tests/miles/test_resume.py): an orchestrator over a scripted
backend (drops and over-sampling) runs train steps FIRST..LAST, loading rollout LOAD's saved state
first when given and saving after each step as Miles does, then prints each step's draws as JSON:

    python -m tests.miles.resume_run DIR FIRST LAST [LOAD]
"""

from __future__ import annotations

import asyncio
import json
import sys
from argparse import Namespace

from adapter.config.settings import Settings
from adapter.engine.session import EngineSession
from adapter.miles import checkpoint
from adapter.rollout.lifetime import RunLifetime
from adapter.rollout.orchestrator import Orchestrator
from conformance.engine import ScriptedEngine
from conformance.mocking import mock_host
from tests.fakes import FakeBackend

# "raise": the episode fails, its group is dropped and replaced.
TASKS = ["ok", "raise", "ok", "ok", "ok", "raise", "ok", "raise", "ok", "ok", "ok"]
SETTINGS = {"rollout_batch_size": 2, "n_samples_per_prompt": 2, "over_sampling_batch_size": 3,
            "sglang_enable_deterministic_inference": True, "rollout_seed": 1000, "rollout_shuffle": True}


async def run(directory: str, first: int, last: int, load: int | None) -> list[dict[str, object]]:
    engine = ScriptedEngine()
    backend = FakeBackend(list(TASKS))
    orchestrator = Orchestrator(settings=Settings(**SETTINGS), backend=backend,
                                lifetime=RunLifetime(EngineSession(engine.url)), model="m", env_id="resume")
    args = Namespace(save=directory, load=directory)
    checkpoint.load(orchestrator, args, load)
    steps = []
    with mock_host(engine.url, engine.handle):
        for rollout_id in range(first, last + 1):
            before = len(backend.calls)
            result = await orchestrator.train(rollout_id)
            checkpoint.save(orchestrator, args, rollout_id)
            steps.append({"rollout_id": rollout_id,
                          "draws": [[task, seed] for task, _, seed in backend.calls[before:]],
                          "drops": result.metrics.get("rollout/drop/episode_error", 0.0),
                          "groups": [sorted({s.group_index for s in group}) for group in result.groups]})
    return steps


if __name__ == "__main__":
    directory, first, last = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    load = int(sys.argv[4]) if len(sys.argv) > 4 else None
    print(json.dumps(asyncio.run(run(directory, first, last, load))))
