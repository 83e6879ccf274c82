"""A scripted episode backend for orchestration tests: real Verifiers traces, no episodes.

Each task index maps to a behaviour: "ok" (n good traces), "error" (one trace errored),
"empty" (one branchless trace), "raise" (the episode raises), "config" (a trace carries the
adapter's configuration error), "hang" (never finishes until cancelled).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from typing import Any

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

    @property
    def tasks(self) -> list[str]:
        return self.behaviours

    @contextlib.asynccontextmanager
    async def serving(self):
        yield

    def make_client(self, app: Any, **_: Any) -> FakeClient:
        self.clients.append(FakeClient())
        return self.clients[-1]

    async def run_group(self, task_index: int, *, n: int, seed_base: int | None, **_: Any) -> list[Any]:
        self.calls.append((task_index, n, seed_base))
        behaviour = self.behaviours[task_index]
        await asyncio.sleep(0)
        if behaviour == "hang":
            await asyncio.sleep(3600)
        if behaviour == "raise":
            raise RuntimeError("sandbox exploded")
        good = TraceSpec(idx=task_index, rewards={"correct": float(task_index % 2)})
        bad = {
            "error": dataclasses.replace(good, error=("ProviderError", "engine 502"), stop_condition="error"),
            "empty": dataclasses.replace(good, turns=(), stop_condition="context_length"),
            "config": dataclasses.replace(good, error=("AdapterRequestError", "streaming refused")),
            "truncated": dataclasses.replace(good, turns=(Turn((5, 6), (-0.1, -0.2), "x", finish_reason="length"),)),
        }.get(behaviour)
        return [build_trace(good) for _ in range(n - 1)] + [build_trace(bad or good)]
