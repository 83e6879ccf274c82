"""A rollout function over many Miles train calls: one engine session, one bridge, nothing that grows.

Real episodes of the installed Verifiers generation (A in fast, B in its matrix cells) through the
class ABI as Miles calls it: each call its own task on one long-lived loop. What the first call
opens (the engine's connection pool, generation B's served bridge and `env.serving()`, generation
A's TrainClient) must serve every later call, and close with the rollout function.
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import uvicorn

from adapter.bridge.serve import served
from adapter.engine import transport
from adapter.episodes.generations import installed
from adapter.miles.abi import abi_types
from adapter.miles.binding import VerifiersRolloutFn
from conformance.engine import ScriptedEngine, asgi_app
from conformance.plugin import loaded_tokenizer
from conformance.policies import TextPolicy
from tests.contract.test_contract import env_config

pytestmark = [pytest.mark.contract, pytest.mark.skipif(
    os.environ.get("VF_SGLANG_LONG_RUN") != "1",
    reason="20 real train calls (~40 s): the fast lane runs them on generation A, the contract-vf040 cell on "
           "generation B (tox.ini sets VF_SGLANG_LONG_RUN=1 there)")]

CALLS = 20
WARM = 2  # resources are compared from the end of this call on (the first calls fill caches)
# Bounds with their margins: file descriptors and threads may differ by what a call's last
# connection or worker thread left mid-teardown; memory by allocator noise, far below what a
# leaked bridge, pool or tokenizer per call (tens of MB each) would add over 18 calls.
FD_MARGIN = 4
THREAD_MARGIN = 2
RSS_MARGIN_MB = 24


def resources() -> dict[str, int]:
    status = Path("/proc/self/status").read_text()
    rss_kb = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
    threads = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("Threads:"))
    children = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        children += int(fields[1]) == os.getpid()
    return {"rss_mb": rss_kb // 1024, "fds": len(os.listdir("/proc/self/fd")), "threads": threads,
            "python_threads": threading.active_count(), "children": children}


def count_opened(backend: Any, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How often the backend's serving and bridge client are opened, from here on."""
    opened = {"serving": 0, "connect": 0}
    for name in opened:
        original = getattr(backend, name)

        def counting(*args: Any, _name: str = name, _original: Any = original, **kwargs: Any) -> Any:
            opened[_name] += 1
            return _original(*args, **kwargs)

        monkeypatch.setattr(backend, name, counting)
    return opened


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc (Linux)")
async def test_twenty_train_calls_hold_one_engine_pool_one_bridge_and_flat_resources(
        qwen3_tokenizer, monkeypatch) -> None:
    pools: list[Any] = []
    make_pool = transport.EngineTransport._session
    monkeypatch.setattr(transport.EngineTransport, "_session", lambda self: pools.append(make_pool(self)) or pools[-1])
    started: list[Any] = []
    startup = uvicorn.Server.startup

    async def counted(self: uvicorn.Server, *args: Any, **kwargs: Any) -> None:
        started.append(self)
        await startup(self, *args, **kwargs)

    tokenizer = loaded_tokenizer(qwen3_tokenizer)
    engine = ScriptedEngine(default=TextPolicy(tokenizer, lambda prompt: "7"))
    constructor, train_input, _, _, _ = abi_types()
    async with served(asgi_app(engine)) as url:
        host, port = url.removeprefix("http://").split(":")
        args = SimpleNamespace(
            verifiers_config=env_config("arith-v1"), hf_checkpoint=str(qwen3_tokenizer),
            renderer_model_name="Qwen/Qwen3-0.6B", rollout_global_dataset=False, rollout_batch_size=1,
            n_samples_per_prompt=1, rollout_max_response_len=16, rollout_max_context_len=1024,
            sglang_router_ip=host, sglang_router_port=int(port))
        fn = VerifiersRolloutFn(constructor(args=args, data_source=None))
        opened = count_opened(fn.orchestrator.backend, monkeypatch)
        monkeypatch.setattr(uvicorn.Server, "startup", counted)  # from here on: the adapter's servers only
        seen: list[dict[str, int]] = []
        try:
            for rollout_id in range(CALLS):
                out = await asyncio.create_task(fn(train_input(rollout_id=rollout_id)))  # Miles: a task per call
                assert len(out.samples) == 1 and len(out.samples[0]) == 1
                seen.append(resources())
        finally:
            await fn.aclose()
        closed = resources()
    assert len(pools) == 1, f"{len(pools)} engine connection pools for {CALLS} calls"
    assert opened == {"serving": 1, "connect": 1}, "the env's serving and one bridge client: opened once"
    assert len(started) == (1 if installed().name == "B" else 0), "generation B serves its bridge once"
    assert len(engine.generate_requests()) == CALLS
    warm, last = seen[WARM - 1], seen[-1]
    assert last["fds"] <= warm["fds"] + FD_MARGIN, seen
    assert last["threads"] <= warm["threads"] + THREAD_MARGIN, seen
    assert last["python_threads"] <= warm["python_threads"] + THREAD_MARGIN, seen
    assert last["children"] <= warm["children"], seen
    assert last["rss_mb"] <= warm["rss_mb"] + RSS_MARGIN_MB, seen
    assert fn.orchestrator.lifetime.state == "closed" and closed["children"] <= seen[0]["children"]
