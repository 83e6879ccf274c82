"""Miles' start-up, as #1845 runs it (`miles/ray/placement_group.py:194` at d2624723d), through
the class ABI on real generation-A episodes: the executor constructs the rollout function, calls
`load(start_rollout_id - 1)` on every start, then trains `start_rollout_id, …` and calls
`save(rollout_id)` at each checkpoint (`--save-interval 1` here).

The scripted engine answers task 0 with a 400, so rollout 0 drops a group and draws a replacement:
the cursor an uninterrupted run carries into rollout 1 (2) is not the one a fresh start at
rollout 1 computes (1 × batch), and neither are the group counters. A resume is exact only if
the saved state was read."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from adapter.errors import ResumeStateError
from adapter.miles import checkpoint
from adapter.miles.abi import RolloutFnConstructorInput, RolloutFnTrainInput
from adapter.miles.binding import VerifiersRolloutFn
from adapter.samples.conversion import flatten
from conformance.engine import Fault
from conformance.plugin import loaded_tokenizer
from tests.miles.test_episodes import arith_policy, miles_args


@pytest.fixture
def engine(sglang_mock, qwen3_tokenizer) -> Any:

    tokenizer = loaded_tokenizer(qwen3_tokenizer)
    policy = arith_policy(tokenizer)

    def answer(body: dict[str, Any]) -> Any:
        if "3 + 4" in tokenizer.decode(body["input_ids"]):  # task 0: an engine 400, its group dropped
            return Fault(status=400, body={"error": "scripted bad request"})
        return policy(body)

    sglang_mock.default = answer
    return sglang_mock


def _args(qwen3_tokenizer: Path, engine: Any, *, save: Path | None, load: Path | None,
          start_rollout_id: int) -> argparse.Namespace:
    return miles_args(qwen3_tokenizer, engine, "arith-v1", rollout_batch_size=1, n_samples_per_prompt=1,
                      over_sampling_batch_size=1, save=None if save is None else str(save),
                      load=None if load is None else str(load), start_rollout_id=start_rollout_id)


async def _run(args: argparse.Namespace, num_rollout: int) -> dict[int, list[tuple[int, int, int]]]:
    """Miles' order: construct, load(start - 1), then per rollout train and save. Each rollout's
    draws as (task index, group_index, index) per sample."""
    function = VerifiersRolloutFn(RolloutFnConstructorInput(args, None))
    try:
        function.load(args.start_rollout_id - 1)
        draws = {}
        for rollout_id in range(args.start_rollout_id, num_rollout):
            out = await function(RolloutFnTrainInput(rollout_id=rollout_id))
            draws[rollout_id] = [(s.metadata["verifiers"]["task_index"], s.group_index, s.index)
                                 for group in out.samples for s in flatten(group)]
            if args.save:
                function.save(rollout_id)
        return draws
    finally:
        await function.aclose()


@pytest.fixture
async def uninterrupted(qwen3_tokenizer, engine, tmp_path) -> tuple[Path, dict[int, Any]]:
    """A fresh run with --save and no --load: load(-1), rollouts 0 and 1, each checkpointed."""
    save = tmp_path / "run"
    return save, await _run(_args(qwen3_tokenizer, engine, save=save, load=None, start_rollout_id=0), 2)


async def test_a_fresh_run_with_save_starts_trains_and_checkpoints(uninterrupted) -> None:
    save, draws = uninterrupted
    assert draws[0] == [(1, 0, 0)]  # task 0 was dropped (engine 400) and replaced by task 1
    assert draws[1] == [(2, 1, 1)]
    assert [checkpoint.read_state(checkpoint.state_path(save, r), r).cursor for r in (0, 1)] == [2, 3]


async def test_a_resume_from_load_draws_exactly_what_the_uninterrupted_run_drew(
        qwen3_tokenizer, engine, uninterrupted) -> None:
    """A new process with --load at start_rollout_id 1: Miles calls load(0)."""
    save, straight = uninterrupted
    resumed = await _run(_args(qwen3_tokenizer, engine, save=None, load=save, start_rollout_id=1), 2)
    assert resumed == {1: straight[1]}


async def test_load_without_the_adapters_state_starts_at_miles_rollout_id_with_a_warning(
        qwen3_tokenizer, engine, tmp_path, caplog) -> None:
    """A base-model checkpoint at --load: load(0) finds no state; the run starts at rollout 1 as a
    fresh start would (cursor 1 × batch, counters from zero), after a warning naming the file."""
    base = tmp_path / "base-model"
    base.mkdir()
    with caplog.at_level("WARNING", logger="adapter.miles.checkpoint"):
        draws = await _run(_args(qwen3_tokenizer, engine, save=None, load=base, start_rollout_id=1), 2)
    assert draws == {1: [(1, 0, 0)]}
    assert any(str(checkpoint.state_path(base, 0)) in r.getMessage() for r in caplog.records)


async def test_a_corrupt_state_at_load_is_refused_before_any_episode(qwen3_tokenizer, engine, uninterrupted) -> None:
    """A new process with --load whose rollout-0 state was damaged: Miles' load(0) raises the typed
    error naming the file; nothing reaches the engine."""
    save, _ = uninterrupted
    path = checkpoint.state_path(save, 0)
    path.write_text(path.read_text()[:40])
    engine.requests.clear()
    function = VerifiersRolloutFn(RolloutFnConstructorInput(
        _args(qwen3_tokenizer, engine, save=None, load=save, start_rollout_id=1), None))
    try:
        with pytest.raises(ResumeStateError, match="is corrupt") as caught:
            function.load(0)
    finally:
        await function.aclose()
    assert caught.value.path == path and engine.generate_requests() == []
