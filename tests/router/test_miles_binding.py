"""The Miles binding (class ABI, `adapter.miles.VerifiersRolloutFn`) through the real router, as
Miles drives it: constructed before the router exists (its address unset in `args`), the address
filled in afterwards, `--sglang-router-policy consistent_hashing`; the train call's samples
carry their trace ids as `routing_key`, and every turn of a trace went to one worker."""

from __future__ import annotations

import argparse
import os
import sys

import pytest

from adapter.engine.recording import CassetteRecorder
from adapter.episodes.bundled import add_env_sources
from adapter.miles.abi import RolloutFnConstructorInput, RolloutFnTrainInput
from adapter.miles.binding import VerifiersRolloutFn
from adapter.samples.conversion import flatten
from tests.router.cassettes import by_key, generate_calls
from tests.router.conftest import CHAT, ROUTER_ENVS

pytestmark = pytest.mark.router


def miles_args(tiny_model) -> argparse.Namespace:
    return argparse.Namespace(
        verifiers_config=str(CHAT), hf_checkpoint=str(tiny_model), renderer_model_name="Qwen/Qwen3-0.6B",
        rollout_global_dataset=False, rollout_batch_size=2, n_samples_per_prompt=2, rollout_max_response_len=16,
        rollout_max_context_len=1024, rollout_temperature=0.7, sglang_router_policy="consistent_hashing",
        sglang_router_ip=None, sglang_router_port=None,  # Miles starts its router after building us
    )


async def test_the_class_abi_routes_every_turn_by_trace_through_the_router(
        router, tiny_model, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))  # add_env_sources edits both; restored afterwards
    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    add_env_sources([ROUTER_ENVS])
    args = miles_args(tiny_model)
    recorder = CassetteRecorder(tmp_path / "cassettes", command="miles (router lane)")
    fn = VerifiersRolloutFn(RolloutFnConstructorInput(args=args, data_source=None), recorder=recorder)
    host, port = router.url.removeprefix("http://").split(":")
    args.sglang_router_ip, args.sglang_router_port = host, int(port)  # filled in late, read lazily
    try:
        out = await fn(RolloutFnTrainInput(rollout_id=0))
    finally:
        await fn.aclose()
    samples = [sample for group in out.samples for sample in flatten(group)]
    traces = by_key(generate_calls(tmp_path / "cassettes"))
    assert [len(group) for group in out.samples] == [2, 2]
    # a trace whose turn is not an extension of the last splits into branches: sibling samples, one key
    assert {s.routing_key for s in samples} == set(traces) and len(traces) == 4
    for key, calls in traces.items():
        assert len(calls) == 3 and {c.status for c in calls} == {200}, (key, calls)
        assert len({c.worker for c in calls}) == 1, (key, calls)
