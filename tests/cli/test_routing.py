"""The jobs behind a router: `--router-policy`, the router look before a run, and how a run
that dropped groups ends (exit status 3, the summary counts the drops by reason)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from adapter.bridge.serve import served
from adapter.cli.commands import EXIT_DROPPED, ROUTER_FLAG
from adapter.cli.entry import main
from adapter.cli.results import dropped_groups, format_drops
from adapter.cli.routing import router_notes
from adapter.config.settings import Settings
from adapter.engine.topology import Topology
from conformance.engine import Fault, ScriptedEngine, asgi_app, by_key
from conformance.plugin import loaded_tokenizer
from conformance.policies import TextPolicy

ENVS = Path(__file__).resolve().parents[2] / "fixtures" / "envs"
ROUTER = Topology("http://router.test:1", "/workers", ("http://w1.test:1", "http://w2.test:2"))


def test_a_router_met_without_a_policy_is_warned_about_naming_the_commands_flag() -> None:
    notes = router_notes(ROUTER, Settings(flag_names=ROUTER_FLAG))
    assert notes.status == ("engine: router at http://router.test:1 (2 workers: http://w1.test:1, http://w2.test:2); "
                            "the adapter expects the router to run with --disable-retries (docs/router.md)")
    assert notes.warning is not None and "--router-policy is not set" in notes.warning
    assert "pass --router-policy consistent_hashing" in notes.warning
    assert "--sglang-router-policy is not set" in (router_notes(ROUTER, Settings()).warning or "")  # Miles' name


@pytest.mark.parametrize("policy", ["consistent_hashing", "round_robin", "manual"])
def test_a_policy_given_silences_the_warning(policy: str) -> None:
    assert router_notes(ROUTER, Settings(sglang_router_policy=policy)).warning is None


def test_a_single_server_gets_no_note() -> None:
    assert router_notes(Topology("http://one.test:1"), Settings()) == router_notes(Topology("http://x"), Settings())
    assert router_notes(Topology("http://one.test:1"), Settings()).status is None


def test_drops_are_read_from_the_batch_metrics_and_summarised() -> None:
    metrics = {"rollout/drop/trace_error": 2.0, "rollout/drop/episode_error": 1.0, "verifiers/traces": 9.0,
               "rollout/drop/empty_trace": 0.0}
    drops = dropped_groups(metrics)
    assert drops == {"episode_error": 1, "trace_error": 2}
    assert format_drops(drops) == "; 3 groups dropped and replaced (episode_error ×1, trace_error ×2)"
    assert format_drops({}) == ""
    detail = "trace 'a1' dropped by Verifiers: rubric: correct=unsure"
    assert format_drops({"trace_dropped": 1}, {"trace_dropped": detail}) == \
        f"; 1 group dropped and replaced (trace_dropped ×1: {detail})"


async def test_a_rollout_that_dropped_a_group_says_so_and_routes_every_call_by_its_trace(
        qwen3_tokenizer, tmp_path, capsys) -> None:
    tokenizer = loaded_tokenizer(qwen3_tokenizer)
    engine = ScriptedEngine(default=TextPolicy(tokenizer, lambda prompt: "7"))
    engine.script(Fault(status=400, body={"error": {"message": "scripted: refused"}}))  # the first episode fails
    out = tmp_path / "samples.jsonl"
    async with served(asgi_app(engine)) as url:
        engine.workers = [url, "http://second-worker.test:1"]  # a router, so the look describes it
        engine.route = by_key(engine.workers)
        code = await asyncio.to_thread(main, [
            "rollout", "--sglang-url", url, "--config", str(ENVS / "arith-v1.toml"), "--model", "Qwen/Qwen3-0.6B",
            "--tokenizer", str(qwen3_tokenizer), "--groups", "1", "--n", "1", "--quiet", "--out", str(out),
            "--router-policy", "consistent_hashing"])
    captured = capsys.readouterr()
    assert code == EXIT_DROPPED, captured.err[-2000:]
    assert "1 samples in 1 groups" in captured.out and "; 1 group dropped and replaced (" in captured.out
    assert "warning" not in captured.err
    keys = [r.headers.get("x-smg-routing-key") for r in engine.generate_requests()]
    assert None not in keys and len(set(keys)) == 2  # every call carries its trace's key: two traces
    (sample,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert sample["routing_key"] == keys[-1]
