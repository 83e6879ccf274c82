"""`vf-sglang rollout --router-policy consistent_hashing` (generation A) through the real router:
every engine call of a trace carries its trace id as `X-SMG-Routing-Key`, every turn of a trace
lands on one worker, and the traces spread over both workers (read from the run's cassette: the
request's key and the answer's `x-smg-routed-worker-id`)."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from tests.router.cassettes import by_key, generate_calls
from tests.router.commands import vf_sglang
from tests.router.conftest import CHAT, ROUTER_ENVS

pytestmark = pytest.mark.router
GROUPS, N, TURNS = 4, 3, 3  # 12 traces: all on one worker by chance with p = 2⁻¹¹


def test_every_turn_of_a_trace_lands_on_one_worker_and_traces_spread(router, workers, tiny_model, tmp_path) -> None:
    out, cassettes = tmp_path / "samples.jsonl", tmp_path / "cassettes"
    ran = vf_sglang("rollout", "--sglang-url", router.url, "--config", str(CHAT), "--env-source-dir", str(ROUTER_ENVS),
                    "--model", "Qwen/Qwen3-0.6B", "--tokenizer", str(tiny_model), "--groups", str(GROUPS),
                    "--n", str(N), "--max-response-len", "16", "--router-policy", "consistent_hashing", "--quiet",
                    "--record", str(cassettes), "--out", str(out))
    assert ran.code == 0, ran.output
    samples = [json.loads(line) for line in out.read_text().splitlines()]
    traces = by_key(generate_calls(cassettes))
    assert None not in traces, "an engine call without X-SMG-Routing-Key"
    # the key is the trace id; a trace whose turn is not an extension of the last (a truncated turn
    # re-rendered) splits into branches: sibling samples with one key and a rollout_id each
    assert {s["routing_key"] for s in samples} == set(traces) and len(traces) == GROUPS * N
    keys = Counter(s["routing_key"] for s in samples)
    assert all(s.get("rollout_id") is not None for s in samples if keys[s["routing_key"]] > 1)
    for key, calls in traces.items():
        assert [c.status for c in calls] == [200] * TURNS, (key, calls)
        assert len({c.worker for c in calls}) == 1, (key, calls)
        assert [c.prompt_len for c in calls] == sorted(c.prompt_len for c in calls)  # turns, in order
    used = Counter(calls[0].worker for calls in traces.values())
    print(f"routing spread: {len(traces)} traces × {TURNS} turns, traces per worker {dict(used)}")
    assert set(used) == {w.url for w in workers}, f"all {len(traces)} traces on {used}"


def test_without_the_flag_the_rollout_warns_that_turns_would_scatter(router, tiny_model, tmp_path) -> None:
    ran = vf_sglang("rollout", "--sglang-url", router.url, "--config", str(CHAT), "--env-source-dir", str(ROUTER_ENVS),
                    "--model", "Qwen/Qwen3-0.6B", "--tokenizer", str(tiny_model), "--groups", "1", "--n", "1",
                    "--max-response-len", "8", "--quiet", "--out", str(tmp_path / "s.jsonl"))
    assert ran.code == 0, ran.output
    assert "--router-policy is not set: no request carries X-SMG-Routing-Key" in ran.output
