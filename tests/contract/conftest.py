"""Each test's rollout functions close with its loop: what their calls held open (bridges, served
ports, the env's serving, engine connections) is closed on the test's own loop, before it ends.
Miles' loop outlives the run, and interpreter exit closes what it holds (`close_all`)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from adapter.rollout.orchestrator import close_on_this_loop


@pytest.fixture(autouse=True)
async def rollout_functions_closed() -> AsyncIterator[None]:
    yield
    await close_on_this_loop()
