"""Loopback calls never go through a proxy, tested with `http_proxy`/`HTTP_PROXY`
pointing at a closed loopback port: any request sent to "the proxy" fails to connect. (Only
the http ones: on a real proxied machine the proxy works for the https package downloads uv
makes for the harness, so those must not be broken here either.)"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from pathlib import Path

import httpx
import pytest
from renderers.base import load_tokenizer

from adapter.bridge.serve import served
from adapter.engine.proxies import LOOPBACK_HOSTS, bypass_proxies_for_loopback, no_proxy_value
from conformance.engine import ScriptedEngine, asgi_app
from conformance.policies import TextPolicy
from e2e.verify import expectation_for, load_samples, verify

VF_SGLANG = str(Path(sys.executable).with_name("vf-sglang"))
PROXY_VARS = ("http_proxy", "HTTP_PROXY")


@pytest.fixture
def proxy_nowhere(monkeypatch) -> str:
    """The http proxy variables set to a loopback port nothing listens on; no NO_PROXY."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        nowhere = f"http://127.0.0.1:{sock.getsockname()[1]}"
    for name in PROXY_VARS:
        monkeypatch.setenv(name, nowhere)
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.setenv(name, "")  # recorded, so what the adapter sets is undone after the test
        monkeypatch.delenv(name)
    return nowhere


def test_loopback_hosts_join_the_existing_entries_of_both_spellings() -> None:
    env = {"NO_PROXY": "internal.example,10.0.0.1", "no_proxy": "localhost,.corp"}
    value = bypass_proxies_for_loopback(env)
    assert value == "internal.example,10.0.0.1,localhost,.corp,127.0.0.1,::1"
    assert env["NO_PROXY"] == env["no_proxy"] == value
    assert bypass_proxies_for_loopback(env) == value  # idempotent
    assert no_proxy_value({}) == ",".join(LOOPBACK_HOSTS)


async def _ok(scope, receive, send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"direct"})


@pytest.mark.usefixtures("proxy_nowhere")
async def test_a_proxy_reading_client_reaches_a_loopback_server_once_bypassed(monkeypatch) -> None:
    """httpx's defaults (trust_env) are what the OpenAI client inside Verifiers' TrainClient uses."""
    async with served(_ok) as url:
        async with httpx.AsyncClient(timeout=5) as proxied:  # the control: sent to the proxy, which is nowhere
            with pytest.raises(httpx.TransportError):
                await proxied.get(url)
        bypass_proxies_for_loopback()
        async with httpx.AsyncClient(timeout=5) as client:
            assert (await client.get(url)).text == "direct"


@pytest.mark.usefixtures("proxy_nowhere")
async def test_the_rollout_command_works_on_a_proxied_machine(tmp_path, qwen3_tokenizer) -> None:
    """Engine (loopback), served bridge (generation B) and the harness' calls to Verifiers'
    interception server."""
    from adapter.rollout.generations import installed

    config = installed().bundled_envs() / "group-v1.toml"  # B: its TrainClient calls the served bridge
    tokenizer = load_tokenizer(str(qwen3_tokenizer))
    engine = ScriptedEngine(default=TextPolicy(tokenizer, lambda prompt: "banana"))
    out = tmp_path / "samples.jsonl"
    env = {k: v for k, v in os.environ.items() if k.lower() != "no_proxy"}
    async with served(asgi_app(engine)) as url:
        process = await asyncio.create_subprocess_exec(
            VF_SGLANG, "rollout", "--sglang-url", url, "--config", str(config),
            "--model", "Qwen/Qwen3-0.6B", "--tokenizer", str(qwen3_tokenizer), "--groups", "1", "--n", "2",
            "--out", str(out), env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        _, stderr = await asyncio.wait_for(process.communicate(), timeout=300)
    assert process.returncode == 0, stderr.decode()[-3000:]
    verify(load_samples(out), expectation_for("group-v1", groups=1, n=2))


async def test_episodes_start_with_loopback_excluded_from_proxies(proxy_nowhere, sglang_mock) -> None:
    """The Miles path (no CLI): the orchestrator sets it before it builds clients."""
    from adapter.config.settings import Settings
    from adapter.rollout.orchestrator import Orchestrator
    from tests.fakes import FakeBackend

    settings = Settings(rollout_batch_size=1, n_samples_per_prompt=2, over_sampling_batch_size=1)
    orch = Orchestrator(settings=settings, backend=FakeBackend(["ok"]), engine_url=sglang_mock.url, model="m",
                        env_id="arith-v1")
    await orch.train(rollout_id=0)
    assert set(LOOPBACK_HOSTS) <= set(os.environ["no_proxy"].split(",")) and os.environ["NO_PROXY"]
