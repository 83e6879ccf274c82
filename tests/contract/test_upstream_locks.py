"""Locks the installed Renderers keeps beyond one event loop (a note for whoever runs episodes in
several loops, as the legacy Miles ABI does: one `asyncio.run` per train call).

renderers' `client._max_prompt_len_lock` is one module-level `asyncio.Lock` serializing the first
`GET /models` lookup per (base_url, model). A lock binds to the loop in which it is first
contended; contended again in another loop it raises "... is bound to a different event loop".
A new bridge URL is a new key, so a later loop's concurrent first turns contend again: generation B
serves its bridge on a new port per serving(), hence one served bridge per rollout function
(docs/miles.md). This test shows the upstream behaviour with renderers' own lookup; it fails, and
the note can go, once renderers makes that lock per loop.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import renderers.client

pytestmark = pytest.mark.contract


class SlowModels:
    """An OpenAI client whose `GET /models` takes a moment, at its own base URL."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url

    async def get(self, path: str, **_: Any) -> dict[str, Any]:
        await asyncio.sleep(0.01)
        return {"data": [{"id": "m", "max_model_len": 4096}]}


async def _first_turns(base_url: str) -> list[int | None]:
    client = SlowModels(base_url)
    return await asyncio.gather(*(renderers.client._resolve_max_prompt_len(client, "m") for _ in range(2)))


def test_renderers_lookup_lock_outlives_its_event_loop(monkeypatch) -> None:
    if not isinstance(getattr(renderers.client, "_max_prompt_len_lock", None), asyncio.Lock):
        pytest.skip("this renderers release keeps no module-level lookup lock")
    monkeypatch.setattr(renderers.client, "_max_prompt_len_lock", asyncio.Lock())  # restored after
    monkeypatch.setattr(renderers.client, "_max_prompt_len_cache", {})
    assert asyncio.run(_first_turns("http://127.0.0.1:1/v1")) == [4096, 4096]
    with pytest.raises(RuntimeError, match="bound to a different event loop"):
        asyncio.run(_first_turns("http://127.0.0.1:2/v1"))  # a new loop, a new bridge URL
