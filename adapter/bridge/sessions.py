"""The bridge's session memory: first turns, and the engine-attempt budget of each model turn.

Session ids are Verifiers' trace ids (`X-Session-ID`); an id longer than `MAX_SESSION_ID_BYTES`
(256 bytes of UTF-8) is refused with a 400, so memory per remembered id is bounded, and with
it the whole LRU (`max_size` ids, default 10,000: ≤ ~3 MB).

`SessionLRU` remembers which sessions already had their first turn: the trainer's max prompt
length applies to a session's first turn only; later turns of a known session are bounded by
the context length. Requests without a session id always count as first turns. A session is
remembered only after its request was accepted, so a refused first turn stays a first turn
when it is retried. **Eviction**: once more than `max_size` sessions are live, the least
recently used one is forgotten, and its next turn is treated as a first turn again (the
max-prompt-length cap then applies to it, and may refuse a long later turn as an overlong
prompt: a clean truncation in Verifiers). Size the LRU (`--session-lru-size`) above the number
of concurrently live sessions (≥ 2 × `max_in_flight`) and this never happens.

`TurnBudgets` holds one `AttemptBudget` per model turn, keyed by (session id, prompt length):
a retry of a turn re-sends the same prompt, and each new turn of a session has a longer one.
Every layer above the bridge that retries a failed turn (the harness's OpenAI client through
Verifiers' interception server, the TrainClient) draws on the same budget, so a turn costs at
most `attempts` engine calls in total; once spent, the bridge answers the turn's last failure
without calling the engine. A turn that succeeds drops its budget. Bounded like the LRU.
"""

from __future__ import annotations

from adapter.bridge.lru import BoundedLRU
from adapter.config.limits import DEFAULT_MAX_SESSIONS, ENGINE_ATTEMPTS_PER_TURN
from adapter.engine.client import AttemptBudget
from adapter.errors import UnsupportedRequestError

MAX_SESSION_ID_BYTES = 256


def check_session_id(session_id: str | None) -> str | None:
    """The id itself, or None when absent; an over-long id is a bad request."""
    if session_id and len(session_id.encode("utf-8", "surrogatepass")) > MAX_SESSION_ID_BYTES:
        raise UnsupportedRequestError(
            f"X-Session-ID is {len(session_id.encode('utf-8', 'surrogatepass')):,} bytes: at most "
            f"{MAX_SESSION_ID_BYTES} are accepted (Verifiers' trace ids are 32 hex characters)"
        )
    return session_id or None


class SessionLRU:
    def __init__(self, max_size: int = DEFAULT_MAX_SESSIONS) -> None:
        self._seen: BoundedLRU[str, None] = BoundedLRU(max_size, what="session LRU")
        self.max_size = max_size

    def __len__(self) -> int:
        return len(self._seen)

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._seen

    def is_first_turn(self, session_id: str | None) -> bool:
        return session_id is None or session_id not in self._seen

    def remember(self, session_id: str | None) -> None:
        """Mark the session as seen (most recent); evict the oldest past the bound."""
        if session_id is not None:
            self._seen.touch(session_id, lambda: None)


class TurnBudgets:
    def __init__(self, attempts: int = ENGINE_ATTEMPTS_PER_TURN, max_size: int = DEFAULT_MAX_SESSIONS) -> None:
        self.attempts = attempts
        self._budgets: BoundedLRU[tuple[str, int], AttemptBudget] = BoundedLRU(max_size, what="turn budgets")
        self.max_size = max_size

    def __len__(self) -> int:
        return len(self._budgets)

    def for_turn(self, session_id: str | None, prompt_len: int) -> AttemptBudget:
        """The turn's budget (a fresh one per request when there is no session id)."""
        if session_id is None:
            return AttemptBudget(self.attempts)
        return self._budgets.touch((session_id, prompt_len), lambda: AttemptBudget(self.attempts))

    def settle(self, session_id: str | None, prompt_len: int) -> None:
        """The turn succeeded: forget its budget."""
        if session_id is not None:
            self._budgets.pop((session_id, prompt_len))
