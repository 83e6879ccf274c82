"""The adapter's numeric bounds, one named home each: the engine client, the bridge and `Settings`'
defaults import them from here.

    ENGINE_ATTEMPTS_PER_TURN  engine attempts one model turn may cost, whatever retries above the
                              bridge (`RetryPolicy.max_attempts`' default; the bridge's per-turn budget)
    DEFAULT_MAX_IN_FLIGHT     engine requests on the wire at once: Miles' default
                              `sglang_server_concurrency`, one engine (`Settings`, `SGLangClient`)
    DEFAULT_MAX_SESSIONS      sessions the bridge remembers (first turns seen, turn budgets), least
                              recently used evicted first (`Settings.session_lru_size`)
"""

from __future__ import annotations

ENGINE_ATTEMPTS_PER_TURN = 3
DEFAULT_MAX_IN_FLIGHT = 512
DEFAULT_MAX_SESSIONS = 10_000
