"""The bridge's session memory: first turns, id bound, per-turn attempt budgets."""

from __future__ import annotations

import pytest

from adapter.bridge.sessions import MAX_SESSION_ID_BYTES, SessionLRU, TurnBudgets, check_session_id
from adapter.errors import UnsupportedRequestError


def test_first_turn_until_remembered() -> None:
    lru = SessionLRU(4)
    assert lru.is_first_turn("a")
    lru.remember("a")
    assert not lru.is_first_turn("a")


def test_sessionless_requests_are_always_first_turns() -> None:
    lru = SessionLRU(4)
    lru.remember(None)
    assert lru.is_first_turn(None) and len(lru) == 0


def test_bound_evicts_the_least_recently_used() -> None:
    lru = SessionLRU(2)
    for session in ("a", "b"):
        lru.remember(session)
    lru.remember("a")  # refresh a: b is now the oldest
    lru.remember("c")
    assert "b" not in lru and "a" in lru and "c" in lru and len(lru) == 2


def test_bound_must_be_positive() -> None:
    with pytest.raises(ValueError, match=">= 1"):
        SessionLRU(0)


@pytest.mark.parametrize(
    ("session_id", "accepted"),
    [(None, True), ("", True), ("a" * 256, True), ("é" * 128, True), ("a" * 257, False), ("é" * 129, False),
     ("x" * 100_000, False)],
    ids=["absent", "empty", "256_ascii", "256_bytes_utf8", "257_ascii", "258_bytes_utf8", "100kb"],
)
def test_session_ids_are_bounded_in_bytes(session_id, accepted) -> None:
    if accepted:
        assert check_session_id(session_id) == (session_id or None)
    else:
        with pytest.raises(UnsupportedRequestError, match=f"at most {MAX_SESSION_ID_BYTES}"):
            check_session_id(session_id)


def test_memory_is_bounded_by_count_times_id_bound() -> None:
    lru = SessionLRU(100)
    for index in range(4_000):
        lru.remember(check_session_id(f"{index:0>256}"))
    assert len(lru) == 100


def test_a_turn_budget_is_shared_by_retries_and_dropped_on_success() -> None:
    budgets = TurnBudgets(attempts=3, max_size=10)
    first = budgets.for_turn("trace", 40)
    assert budgets.for_turn("trace", 40) is first  # a retry of the same turn
    assert budgets.for_turn("trace", 57) is not first  # the next turn: a longer prompt
    assert budgets.for_turn(None, 40) is not budgets.for_turn(None, 40)  # no session: nothing to share
    budgets.settle("trace", 40)
    assert budgets.for_turn("trace", 40) is not first


def test_turn_budgets_are_bounded() -> None:
    budgets = TurnBudgets(attempts=3, max_size=5)
    for index in range(50):
        budgets.for_turn(f"t{index}", 10)
    assert len(budgets) == 5
