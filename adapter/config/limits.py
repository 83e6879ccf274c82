"""The adapter's numeric bounds, one named home each: the engine client, the bridge and `Settings`'
defaults import them from here.

    ENGINE_ATTEMPTS_PER_TURN  engine attempts one model turn may cost, whatever retries above the
                              bridge (`RetryPolicy.max_attempts`' default; the bridge's per-turn budget)
    DEFAULT_MAX_IN_FLIGHT     engine requests on the wire at once: Miles' default
                              `sglang_server_concurrency`, one engine (`Settings`, `SGLangClient`)
    DEFAULT_MAX_SESSIONS      sessions the bridge remembers (first turns seen, turn budgets), least
                              recently used evicted first (`Settings.session_lru_size`)
    RENDERER_POOL_CAP         renderer slots one bridge client gets at most (`renderer_pool_size`)
"""

from __future__ import annotations

import os

ENGINE_ATTEMPTS_PER_TURN = 3
DEFAULT_MAX_IN_FLIGHT = 512
DEFAULT_MAX_SESSIONS = 10_000
# Renderer slots beyond the CPU cores add tokenizer copies (memory, start-up time), not speed.
RENDERER_POOL_CAP = 16


def renderer_pool_size(max_in_flight: int) -> int:
    """Renderer slots for `max_in_flight` concurrent requests: one each, up to the CPU cores
    (tokenizers release the GIL, so slots run in parallel) and `RENDERER_POOL_CAP`."""
    return max(1, min(max_in_flight, os.cpu_count() or 1, RENDERER_POOL_CAP))
