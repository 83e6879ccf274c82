"""The adapter's shared bounds have one home (`adapter.config.limits`): whichever door builds the
engine client or the bridge (Miles' Settings, the CLI, a bare `SGLangClient`/`SessionLRU`), it gets
the same engine attempts per turn, the same requests in flight and the same session bound."""

from __future__ import annotations

from adapter.bridge.sessions import SessionLRU, TurnBudgets
from adapter.config.limits import DEFAULT_MAX_IN_FLIGHT, DEFAULT_MAX_SESSIONS, ENGINE_ATTEMPTS_PER_TURN
from adapter.config.settings import Settings
from adapter.engine.client import AttemptBudget, RetryPolicy, SGLangClient


def test_a_turn_costs_the_same_engine_attempts_whichever_layer_counts_them() -> None:
    budgets = TurnBudgets()
    assert RetryPolicy().max_attempts == ENGINE_ATTEMPTS_PER_TURN
    assert AttemptBudget().remaining == ENGINE_ATTEMPTS_PER_TURN
    assert budgets.attempts == ENGINE_ATTEMPTS_PER_TURN
    assert budgets.for_turn(None, 1).remaining == ENGINE_ATTEMPTS_PER_TURN


async def test_a_bare_client_and_miles_defaults_bound_the_same_requests_in_flight() -> None:
    client = SGLangClient("http://127.0.0.1:1")
    try:
        assert client.max_in_flight == DEFAULT_MAX_IN_FLIGHT
    finally:
        await client.aclose()
    settings = Settings()
    assert settings.sglang_server_concurrency == DEFAULT_MAX_IN_FLIGHT
    assert settings.max_in_flight == DEFAULT_MAX_IN_FLIGHT  # one engine, Miles' default concurrency


def test_the_bridge_remembers_as_many_sessions_as_settings_allow_by_default() -> None:
    assert Settings().session_lru_size == DEFAULT_MAX_SESSIONS
    assert SessionLRU().max_size == DEFAULT_MAX_SESSIONS
    assert TurnBudgets().max_size == DEFAULT_MAX_SESSIONS
