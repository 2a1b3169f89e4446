"""A small least-recently-used cache with hit/miss statistics.

Fill the holes with:  infill fill examples/sample.py
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Generic, Hashable, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    evictions: int = 0

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return <FILL:16>


class LRUCache(Generic[K, V]):
    """Keeps at most ``capacity`` items; the least recently used one is evicted first."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self.stats = CacheStats()
        self._items: OrderedDict[K, V] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def get(self, key: K, default: V | None = None) -> V | None:
        if key not in self._items:
            self.stats.misses += 1
            return default
        self.stats.hits += 1
        <FILL>
        return self._items[key]

    def put(self, key: K, value: V) -> None:
        if key in self._items:
            self._items.move_to_end(key)
        self._items[key] = value
        if len(self._items) > self.capacity:
            <FILL>
            self.stats.evictions += 1

    def clear(self) -> None:
        self._items.clear()
        self.stats = CacheStats()
