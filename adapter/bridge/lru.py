"""One bounded least-recently-used map, for the bridge's per-session memories (first turns,
per-turn attempt budgets, engine stats): each grows with the sessions it sees, so each keeps at
most `max_size` keys and forgets the least recently touched one first."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BoundedLRU(Generic[K, V]):
    def __init__(self, max_size: int, *, what: str) -> None:
        if max_size < 1:
            raise ValueError(f"{what} size must be >= 1, got {max_size}")
        self.max_size = max_size
        self._items: OrderedDict[K, V] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def get(self, key: K) -> V | None:
        """The value, without making it recent."""
        return self._items.get(key)

    def touch(self, key: K, make: Callable[[], V]) -> V:
        """The key's value (`make()` for a new key), now the most recent; the oldest past the
        bound are evicted."""
        value = self._items.pop(key) if key in self._items else make()
        self._items[key] = value
        while len(self._items) > self.max_size:
            self._items.popitem(last=False)
        return value

    def pop(self, key: K) -> V | None:
        return self._items.pop(key, None)
