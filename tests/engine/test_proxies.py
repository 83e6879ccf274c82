"""Loopback calls never go through a proxy, tested with `http_proxy`/`HTTP_PROXY`
pointing at a closed loopback port (`proxy_nowhere`, tests/conftest.py): any request sent to
"the proxy" fails to connect. The rollout command as a process on such a machine is
tests/cli/test_jobs_cli.py's `test_rollout_command_writes_verifiable_samples`. (Only the http
ones: on a real proxied machine the proxy works for the https package downloads uv makes for
the harness, so those must not be broken here either.)"""

from __future__ import annotations

import os

import httpx
import pytest

from adapter.bridge.serve import served
from adapter.engine.proxies import LOOPBACK_HOSTS, bypass_proxies_for_loopback, no_proxy_value
from adapter.engine.session import EngineSession
from adapter.rollout.lifetime import RunLifetime


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


async def test_episodes_start_with_loopback_excluded_from_proxies(proxy_nowhere, sglang_mock) -> None:
    """The Miles path (no CLI): the orchestrator sets it before it builds clients."""
    from adapter.config.settings import Settings
    from adapter.rollout.orchestrator import Orchestrator
    from tests.fakes import FakeBackend

    settings = Settings(rollout_batch_size=1, n_samples_per_prompt=2, over_sampling_batch_size=1)
    orch = Orchestrator(settings=settings, backend=FakeBackend(["ok"]),
                        lifetime=RunLifetime(EngineSession(sglang_mock.url)), model="m", env_id="arith-v1")
    await orch.train(rollout_id=0)
    assert set(LOOPBACK_HOSTS) <= set(os.environ["no_proxy"].split(",")) and os.environ["NO_PROXY"]
