"""The bridge's session memory: which sessions (trace ids) already had their first turn.

A bounded LRU (default 10,000 ids, configurable). The trainer's max prompt length applies to
a session's first turn only; later turns of a known session are bounded by the context length.
Requests without a session id always count as first turns. A session is remembered only after
its request was accepted, so a refused first turn stays a first turn when it is retried.
"""

from __future__ import annotations

from collections import OrderedDict


class SessionLRU:
    def __init__(self, max_size: int = 10_000) -> None:
        if max_size < 1:
            raise ValueError(f"session LRU size must be >= 1, got {max_size}")
        self.max_size = max_size
        self._seen: OrderedDict[str, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._seen)

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._seen

    def is_first_turn(self, session_id: str | None) -> bool:
        return session_id is None or session_id not in self._seen

    def remember(self, session_id: str | None) -> None:
        """Mark the session as seen (most recent); evict the oldest past the bound."""
        if session_id is None:
            return
        self._seen[session_id] = None
        self._seen.move_to_end(session_id)
        while len(self._seen) > self.max_size:
            self._seen.popitem(last=False)
