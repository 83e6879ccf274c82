"""Retries happen in one layer: an always-503 engine costs at most 3 engine calls per model turn
in a real generation-A episode, whatever the layers above the bridge retry (the harness's OpenAI
client retries 5xx twice through Verifiers' interception server; the bridge's per-turn attempt
budget answers those retries without calling the engine)."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from adapter.miles.abi import RolloutFnConstructorInput, RolloutFnEvalInput
from adapter.miles.binding import VerifiersRolloutFn
from conformance.engine import Fault

ENVS = Path(__file__).resolve().parents[2] / "fixtures" / "envs"


async def test_an_always_503_engine_gets_at_most_3_calls_per_model_turn(qwen3_tokenizer, sglang_mock) -> None:
    sglang_mock.default = Fault(status=503, body={"error": "scripted: always unavailable"})
    host, port = sglang_mock.url.removeprefix("http://").split(":")
    # arith-mini-v1: the eval runs 2 traces, not arith-v1's 12 (one harness process each); any trace shows the bound
    args = argparse.Namespace(
        verifiers_config=str(ENVS / "arith-mini-v1.toml"), hf_checkpoint=str(qwen3_tokenizer),
        renderer_model_name="Qwen/Qwen3-0.6B", rollout_global_dataset=False, rollout_batch_size=1,
        n_samples_per_prompt=1, rollout_max_response_len=32, rollout_max_context_len=1024,
        sglang_router_ip=host, sglang_router_port=int(port), eval_interval=1, n_samples_per_eval_prompt=1,
        # the routing key is the trace id: it lets the engine's log be grouped per trace
        sglang_router_policy="consistent_hashing",
    )
    out = await VerifiersRolloutFn(RolloutFnConstructorInput(args, None))(RolloutFnEvalInput(rollout_id=0))
    (data,) = out.data.values()
    per_trace = Counter(r.headers["x-smg-routing-key"] for r in sglang_mock.generate_requests())
    assert len(per_trace) == len(data["samples"]) > 0  # every trace reached the engine (one turn each)
    assert max(per_trace.values()) <= 3, per_trace
    assert all(s.status.value != "completed" for s in data["samples"])
