"""The bridge's session LRU."""

from __future__ import annotations

import pytest

from adapter.sessions import SessionLRU


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
