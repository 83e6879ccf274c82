"""`vf-sglang serve-bridge`: a real process, a real port, in front of a served scripted engine."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import httpx

from adapter.bridge.serve import served
from conformance.engine import Completion, ScriptedEngine, asgi_app

VF_SGLANG = str(Path(sys.executable).with_name("vf-sglang"))


async def test_serve_bridge_prints_its_url_and_translates_generate() -> None:
    engine = ScriptedEngine().script(Completion([40, 151645], [-0.2, -0.01]))
    async with served(asgi_app(engine)) as engine_url:
        process = await asyncio.create_subprocess_exec(
            VF_SGLANG, "serve-bridge", "--sglang-url", engine_url, "--model", "m", "--max-context-len", "64",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=dict(os.environ),
        )
        try:
            line = (await asyncio.wait_for(process.stdout.readline(), timeout=120)).decode()
            assert line.startswith("vf-sglang bridge ready at http://127.0.0.1:"), line
            url = line.split()[4]
            async with httpx.AsyncClient(base_url=url, timeout=30) as client:
                models = (await client.get("/v1/models")).json()
                response = await client.post(
                    "/inference/v1/generate", headers={"X-Session-ID": "t1"},
                    json={"model": "m", "token_ids": [1, 2, 3],
                          "sampling_params": {"max_tokens": 8, "logprobs": 1, "stop_token_ids": [151645]}})
        finally:
            process.terminate()
            await asyncio.wait_for(process.wait(), timeout=30)
    assert models["data"][0]["max_model_len"] == 64
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["token_ids"] == [40, 151645]
    (call,) = engine.generate_requests()
    assert call.body["sampling_params"]["max_new_tokens"] == 8


async def test_serve_bridge_in_front_of_a_router_prints_the_router_status_line() -> None:
    """As rollout and check do: the workers, the retry flag the adapter expects, and the warning
    for a router met without --router-policy (one turn behind smg's default retries: 15 calls)."""
    engine = ScriptedEngine(workers=["http://w1.test:1", "http://w2.test:2"])
    async with served(asgi_app(engine)) as engine_url:
        process = await asyncio.create_subprocess_exec(
            VF_SGLANG, "serve-bridge", "--sglang-url", engine_url,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=dict(os.environ),
        )
        try:
            ready = (await asyncio.wait_for(process.stdout.readline(), timeout=120)).decode()
        finally:
            process.terminate()
            await asyncio.wait_for(process.wait(), timeout=30)
        err = (await process.stderr.read()).decode()
    assert ready.startswith("vf-sglang bridge ready at"), (ready, err)
    assert (f"vf-sglang: engine: router at {engine_url} (2 workers: http://w1.test:1, http://w2.test:2); the adapter "
            "expects the router to run with --disable-retries") in err
    assert "warning:" in err and "--router-policy is not set" in err


async def test_serve_bridge_needs_an_engine_url() -> None:
    process = await asyncio.create_subprocess_exec(VF_SGLANG, "serve-bridge", stderr=asyncio.subprocess.PIPE)
    _, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 2
    assert b"--sglang-url" in err


async def test_a_request_without_a_session_is_refused_naming_serve_bridges_own_flag() -> None:
    engine = ScriptedEngine()
    async with served(asgi_app(engine)) as engine_url:
        process = await asyncio.create_subprocess_exec(
            VF_SGLANG, "serve-bridge", "--sglang-url", engine_url, "--router-policy", "consistent_hashing",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=dict(os.environ))
        try:
            url = (await asyncio.wait_for(process.stdout.readline(), timeout=120)).decode().split()[4]
            async with httpx.AsyncClient(base_url=url, timeout=30) as client:
                response = await client.post("/inference/v1/generate", json={
                    "model": "m", "token_ids": [1, 2, 3], "sampling_params": {"max_tokens": 8}})
        finally:
            process.terminate()
            await asyncio.wait_for(process.wait(), timeout=30)
    assert response.status_code == 400
    message = response.json()["error"]["message"]
    assert message.startswith("--router-policy consistent_hashing routes every request by session"), message
    assert "--sglang-router-policy" not in message and engine.generate_requests() == []


async def test_an_unknown_router_policy_is_refused_by_the_parser() -> None:
    process = await asyncio.create_subprocess_exec(
        VF_SGLANG, "serve-bridge", "--sglang-url", "http://e", "--router-policy", "cache_aware",
        stderr=asyncio.subprocess.PIPE)
    _, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 2 and b"--router-policy: invalid choice: 'cache_aware'" in err
