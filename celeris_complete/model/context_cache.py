"""An LRU of encoded contexts, keyed by their tokens.

The context is laid out suffix first, so typing at the cursor only appends
to it: the entry sharing the longest token prefix with a new context gives
the keys/values of that prefix, and only the remaining tokens are encoded.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # torch loads with the model (the server answers /health before: see serve.py)
    from celeris_complete.model.network import KV

CLIENT_CACHE = 2  # contexts kept per client (the last one and the one before, for a client that goes back)
MAX_CLIENTS = 32  # clients whose contexts are kept (about 5 MB per context at the full length)


@dataclass
class CacheStats:
    hits: int = 0  # the whole context was cached
    partial: int = 0  # a prefix of it was cached
    misses: int = 0


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    n = min(len(a), len(b))
    if n == 0:
        return 0
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if differ.size else n


class ContextCache:
    def __init__(self, capacity: int = 8) -> None:
        self.capacity = capacity
        self.entries: OrderedDict[int, tuple[np.ndarray, list[KV]]] = OrderedDict()
        self.stats = CacheStats()
        self._next = 0

    def lookup(self, tokens: np.ndarray) -> tuple[list[KV] | None, int]:
        """The cached keys/values of the longest shared token prefix, and its length."""
        best_key, best_len = None, 0
        for key, (cached, _) in self.entries.items():
            n = common_prefix(cached, tokens)
            if n > best_len:
                best_key, best_len = key, n
        if best_key is None or best_len < 2:  # every context starts with the same marker
            self.stats.misses += 1
            return None, 0
        self.entries.move_to_end(best_key)
        kv = self.entries[best_key][1]
        if best_len == len(tokens):
            self.stats.hits += 1
        else:
            self.stats.partial += 1
        return [(k[:, :, :best_len], v[:, :, :best_len]) for k, v in kv], best_len

    def store(self, tokens: np.ndarray, kv: list[KV]) -> None:
        for key, (cached, _) in self.entries.items():
            if len(cached) <= len(tokens) and common_prefix(cached, tokens) == len(cached):
                del self.entries[key]  # the new entry covers it
                break
        self.entries[self._next] = (tokens, kv)
        self._next += 1
        while len(self.entries) > self.capacity:
            self.entries.popitem(last=False)

    def clear(self) -> None:
        self.entries.clear()


class ClientContexts:
    """A small LRU of encoded contexts per client, clients themselves kept in an LRU."""

    def __init__(self, per_client: int = CLIENT_CACHE, clients: int = MAX_CLIENTS) -> None:
        self.per_client = per_client
        self.clients = clients
        self._caches: OrderedDict[str, ContextCache] = OrderedDict()

    def cache(self, client: str) -> ContextCache:
        found = self._caches.get(client)
        if found is None:
            found = self._caches[client] = ContextCache(capacity=self.per_client)
            while len(self._caches) > self.clients:
                self._caches.popitem(last=False)
        self._caches.move_to_end(client)
        return found
