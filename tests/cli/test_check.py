"""`vf-sglang check` (adapter/cli/check.py): the live conformance checks as a preflight table.

Fast lane: scripted engines that break one rule make the command exit 1 naming the check; a
server that is not SGLang is named as such. e2e lane: the reference engine passes (exit 0).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from adapter.bridge.serve import served
from adapter.cli.entry import main
from adapter.cli.server_checks import ROUTING_CHECK
from conformance.engine import Completion, Fault, ScriptedEngine, asgi_app, by_key, round_robin
from conformance.sglang_outputs import sglang_output


async def check(url: str, *extra: str) -> int:
    return await asyncio.to_thread(main, ["check", "--sglang-url", url, "--timeout", "5", *extra])


def row(output: str, name: str) -> str:
    return next(line for line in output.splitlines() if line.startswith(name))


def without_logprobs(body: dict[str, Any]) -> Fault:
    output = sglang_output([40, 151645], [-0.5, -0.01])
    del output["meta_info"]["output_token_logprobs"]
    return Fault(status=200, body=output)


async def test_an_engine_that_drops_logprobs_fails_naming_the_check(capsys) -> None:
    async with served(asgi_app(ScriptedEngine(default=without_logprobs))) as url:
        assert await check(url) == 1
    out = capsys.readouterr().out
    assert "FAIL" in row(out, "logprobs returned and finite") and "output_token_logprobs" in out
    assert "FAILED: logprobs returned and finite" in out


async def test_an_unknown_finish_reason_fails_naming_the_check(capsys) -> None:
    engine = ScriptedEngine(default=Completion([40, 151645], [-0.5, -0.01], finish="tool_calls"))
    async with served(asgi_app(engine)) as url:
        assert await check(url) == 1
    out = capsys.readouterr().out
    assert "FAIL" in row(out, "finish reasons known") and "tool_calls" in row(out, "finish reasons known")


async def test_a_server_that_is_not_sglang_is_named(capsys) -> None:
    from starlette.applications import Starlette

    async with served(Starlette()) as url:
        assert await check(url) == 1
    out = capsys.readouterr().out
    assert "is not an SGLang server" in out and "--sglang-url" in out


async def test_determinism_is_skipped_unless_the_server_reports_it(capsys) -> None:
    engine = ScriptedEngine(default=Completion([40, 151645], [-0.5, -0.01]))
    async with served(asgi_app(engine)) as url:
        await check(url)
    assert "skipped: server not started with --enable-deterministic-inference" in row(
        capsys.readouterr().out, "same seed, same tokens")


async def serve_router(route: Any, *extra: str) -> tuple[str, ScriptedEngine]:
    """`check` against a scripted engine that plays the router in front of two workers: itself
    (where the facts are read) and another; `route` picks the worker each /generate names. The
    scripted engine fails the stop/abort checks by construction: only the router rows are read."""
    engine = ScriptedEngine(default=Completion([40, 151645], [-0.5, -0.01]))
    async with served(asgi_app(engine)) as url:
        engine.workers = [url, "http://second-worker.test:1"]
        engine.route = route(engine.workers)
        await check(url, *extra)
    return url, engine


def failed(output: str) -> str:
    return next((line for line in output.splitlines() if line.startswith("FAILED: ")), "")


async def test_the_routing_check_passes_when_one_key_sticks_to_one_worker(capsys) -> None:
    _, engine = await serve_router(by_key, "--router-policy", "consistent_hashing")
    out = capsys.readouterr().out
    assert " ok " in row(out, ROUTING_CHECK) and ROUTING_CHECK not in failed(out), out
    assert "one key → one worker (10/10); different keys → 2 of 2 workers" in row(out, ROUTING_CHECK)
    keys = [r.headers["x-smg-routing-key"] for r in engine.generate_requests() if "x-smg-routing-key" in r.headers]
    assert keys.count("vf-sglang-check-same-key") == 10 and len(set(keys)) > 1


async def test_the_routing_check_fails_under_round_robin(capsys) -> None:
    await serve_router(round_robin, "--router-policy", "consistent_hashing")
    out = capsys.readouterr().out
    assert ROUTING_CHECK in failed(out), out
    assert "went to 2 workers in 10 requests" in row(out, ROUTING_CHECK)
    assert "start it with --policy consistent_hashing" in row(out, ROUTING_CHECK)


async def test_without_a_policy_the_routing_row_informs_and_the_missing_flag_is_warned(capsys) -> None:
    url, _ = await serve_router(round_robin)
    out = capsys.readouterr().out
    # informs only: a round_robin router may be what the user runs
    assert "(informs only)" in row(out, ROUTING_CHECK) and "FAIL" in row(out, ROUTING_CHECK)
    assert ROUTING_CHECK not in failed(out)
    assert f"engine: Qwen/Qwen3-0.6B (SGLang version unknown), read from {url}, behind the router at {url}" in out
    assert "warning:" in out and "--router-policy is not set" in out
    assert "--disable-retries" in row(out, "router retries")


async def test_round_robin_skips_the_routing_check(capsys) -> None:
    _, engine = await serve_router(round_robin, "--router-policy", "round_robin")
    out = capsys.readouterr().out
    assert "skipped: --router-policy round_robin sends no routing key" in row(out, ROUTING_CHECK)
    assert "warning:" not in out
    assert not any("x-smg-routing-key" in r.headers for r in engine.generate_requests())


async def test_a_single_server_skips_the_router_rows(capsys) -> None:
    engine = ScriptedEngine(default=Completion([40, 151645], [-0.5, -0.01]))  # no /workers: not a router
    async with served(asgi_app(engine)) as url:
        await check(url, "--router-policy", "consistent_hashing")
    out = capsys.readouterr().out
    assert "skip" in row(out, ROUTING_CHECK) and "not a router" in row(out, ROUTING_CHECK)
    assert "router retries" not in out and "warning:" not in out


@pytest.mark.e2e
async def test_the_reference_engine_passes_every_required_check(capsys, tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="the reference engine needs torch (dependency group `demo`)")
    from adapter.reference import build_tiny_model, create_engine_app

    model_dir = build_tiny_model(progress=False)
    async with served(create_engine_app(model_dir)) as url:
        status = await check(url, "--tokenizer", str(model_dir), "--record", str(tmp_path),
                             "--config", "fixtures/envs/arith-v1.toml")
    out = capsys.readouterr().out
    assert status == 0, out
    assert "ok" in row(out, "same seed, same tokens") and "ok" in row(out, "abort reported as abort")
    assert "ok" in row(out, "one episode group of arith-v1.toml")
    assert list(tmp_path.glob("*.jsonl")), "--record wrote no cassette"
