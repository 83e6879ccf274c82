"""In-flight bound as Miles sizes it (docs/contract.md §8.3) and the renderer pool sized for it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from adapter.config import limits
from adapter.config.limits import renderer_pool_size
from adapter.config.settings import Settings
from adapter.engine.session import EngineSession
from adapter.rollout.lifetime import RunLifetime
from adapter.rollout.orchestrator import Orchestrator
from tests.fakes import FakeBackend


@pytest.mark.parametrize(
    ("concurrency", "gpus", "per_engine", "bound"),
    [
        (512, None, 1, 512),  # Miles' defaults, one engine
        (512, 8, 2, 2048),  # four engines
        (64, 4, 4, 64),  # one 4-GPU engine
        (1, 1, 8, 1),  # never below one request
    ],
    ids=["defaults", "four_engines", "one_tp4_engine", "floor"],
)
def test_max_in_flight_is_concurrency_times_engines(concurrency, gpus, per_engine, bound) -> None:
    args = SimpleNamespace(sglang_server_concurrency=concurrency, rollout_num_gpus=gpus,
                           rollout_num_gpus_per_engine=per_engine)
    assert Settings.from_args(args).max_in_flight == bound


@pytest.mark.parametrize(("bound", "cores", "size"), [(512, 8, 8), (2, 8, 2), (512, 64, limits.RENDERER_POOL_CAP),
                                                      (512, None, 1)],
                         ids=["cores", "bound", "cap", "unknown_cores"])
def test_renderer_pool_has_a_slot_per_request_up_to_cores_and_cap(bound, cores, size, monkeypatch) -> None:
    monkeypatch.setattr(limits.os, "cpu_count", lambda: cores)
    assert renderer_pool_size(bound) == size


class RecordingBackend(FakeBackend):
    async def run_group(self, task_index, *, semaphore, **kwargs):
        self.semaphores = [*getattr(self, "semaphores", []), semaphore]
        return await super().run_group(task_index, semaphore=semaphore, **kwargs)


@pytest.mark.parametrize("mode", ["train", "eval"])
async def test_episodes_share_the_in_flight_bound_and_the_client_gets_the_pool(mode, sglang_mock, monkeypatch) -> None:
    monkeypatch.setattr(limits.os, "cpu_count", lambda: 4)
    settings = Settings(rollout_batch_size=1, n_samples_per_prompt=2, sglang_server_concurrency=3,
                        rollout_num_gpus=4, rollout_num_gpus_per_engine=2)
    backend = RecordingBackend(["ok", "ok"])
    orch = Orchestrator(settings=settings, backend=backend, lifetime=RunLifetime(EngineSession(sglang_mock.url)),
                        model="m", env_id="e")
    await (orch.train(rollout_id=0) if mode == "train" else orch.evaluate())
    assert {s._value for s in backend.semaphores} == {6} and len({id(s) for s in backend.semaphores}) == 1
    assert backend.client_kwargs[0]["pool_size"] == 4
