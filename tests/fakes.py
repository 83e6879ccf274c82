"""A scripted episode backend for orchestration tests: real Verifiers traces, no episodes.

Each task index maps to a behaviour: "ok" (n good traces), "error" (one trace errored),
"empty" (one branchless trace), "raise" (the episode fails: `EpisodeError`), "bug" (the shim
raises a plain exception), "config" (the episode's request is refused by the real bridge app:
a multimodal body, answered 400; the trace only records the status, as Verifiers would), "hang"
(never finishes until cancelled), "branches" (one trace with 3 branches: compaction/sub-agents),
"truncated" (one trace cut at the length limit), "nokey" (one healthy trace without the
`correct` reward), "error_nokey" (one errored trace with no rewards at all), "dropped" (one trace a
judge left out of training: `Trace.dropped`).

With `engine_meta`, every trace's session gets one SGLang answer recorded in the bridge's
stats (as the bridge does after each engine call), its `meta_info` updated with engine_meta.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from typing import Any

import httpx

from adapter.errors import EpisodeError
from adapter.wire.types import parse_engine_output
from conformance.sglang_outputs import sglang_output
from conformance.traces import TraceSpec, Turn, build_trace


class FakeClient:
    closed = False

    async def close(self) -> None:
        self.closed = True


@dataclasses.dataclass
class FakeBackend:
    behaviours: list[str]
    calls: list[tuple[int, int, int | None]] = dataclasses.field(default_factory=list)
    has_group_reward: bool = False
    clients: list[FakeClient] = dataclasses.field(default_factory=list)
    app: Any = None
    engine_meta: dict[str, Any] | None = None
    client_kwargs: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    @property
    def tasks(self) -> list[str]:
        return self.behaviours

    @contextlib.asynccontextmanager
    async def serving(self):
        yield

    def sized_serving(self, n: int) -> None:
        return None

    def release(self) -> None:
        return None

    @contextlib.asynccontextmanager
    async def connect(self, app: Any, **kwargs: Any):
        self.app = app
        self.client_kwargs.append(kwargs)
        client = FakeClient()
        self.clients.append(client)
        try:
            yield client
        finally:
            await client.close()

    async def run_group(self, task_index: int, *, n: int, seed_base: int | None, **_: Any) -> list[Any]:
        self.calls.append((task_index, n, seed_base))
        behaviour = self.behaviours[task_index]
        await asyncio.sleep(0)
        if behaviour == "hang":
            await asyncio.sleep(3600)
        if behaviour == "raise":
            raise EpisodeError("episode failed: SandboxError: sandbox exploded")
        if behaviour == "bug":
            raise KeyError("a bug in the shim")
        good = TraceSpec(idx=task_index, rewards={"correct": float(task_index % 2)})
        if behaviour == "config":
            status = await self._refused_request()
            good = dataclasses.replace(good, error=("ProviderError", f"Error code: {status}"))
        bad = {
            "error": dataclasses.replace(good, error=("ProviderError", "engine 502"), stop_condition="error"),
            "empty": dataclasses.replace(good, turns=(), stop_condition="context_length"),
            "truncated": dataclasses.replace(good, turns=(Turn((5, 6), (-0.1, -0.2), "x", finish_reason="length"),)),
            "branches": dataclasses.replace(good, extra_branches=2),
            "nokey": dataclasses.replace(good, rewards={"other": 1.0}),
            "error_nokey": dataclasses.replace(good, error=("ProviderError", "engine 502"), rewards={}),
            "dropped": dataclasses.replace(good, dropped="rubric: correct=unsure"),
        }.get(behaviour)
        traces = [build_trace(good) for _ in range(n - 1)] + [build_trace(bad or good)]
        if self.engine_meta is not None:
            for trace in traces:
                output = sglang_output([5], [-0.1], prompt_tokens=10)
                output["meta_info"].update(self.engine_meta)
                self.app.state.bridge.stats.record(trace.id, parse_engine_output(output).meta_info)
        return traces

    async def _refused_request(self) -> int:
        """A multimodal generate request through the real bridge app: it answers 400."""
        transport = httpx.ASGITransport(app=self.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bridge") as http:
            response = await http.post("/inference/v1/generate", json={
                "token_ids": [1, 2, 3], "features": [{"image": "x"}], "sampling_params": {}})
        return response.status_code
