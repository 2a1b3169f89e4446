"""Reuse of encoded context across fills: what makes a keystroke cheap.

Context segments (prefix, the text between holes, suffix) of our model are causal and see only
themselves (network.py), so a segment's encoding depends on its own tokens alone. This module
keeps recently encoded segments in a small LRU keyed by their tokens and builds a batch's context
from them:

* the same segment again (the suffix while typing, an unchanged file): reused as is;
* a segment that extends a cached one (the prefix after typing at the cursor): only the new
  tokens are run, attending to the cached ones (model.extend_segments, all such segments of a
  batch together);
* anything else: encoded from scratch, all such segments of a batch together.

All three give the same numbers as encoding from scratch. A model without
``capabilities.exact_segment_cache`` (infill/model/seam.py) has every segment encoded afresh.
What an encoded segment holds, and how segments join into a context row, is the model's own
(encode_segments, join_segments). This module does not decide what the segments are (the engine
trims them so that they stay stable while the user types).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import torch

from infill.model.seam import Context, DiffusionModel, Segment


MIN_REUSE = 16  # the shortest cached head worth extending (SegmentCache, and a causal model's kept contexts)


@dataclass
class CacheStats:
    hits: int = 0  # segments reused whole
    extended: int = 0  # segments that reused a cached head
    encoded: int = 0  # segments encoded from scratch
    tokens_computed: int = 0


class SegmentCache:
    def __init__(self, max_tokens: int = 32768, min_reuse: int = MIN_REUSE):
        self.max_tokens = max_tokens  # capacity, in cached tokens (0 disables caching)
        self.min_reuse = min_reuse  # shortest cached head worth extending
        self._entries: OrderedDict[tuple[int, ...], Segment] = OrderedDict()
        self._tokens = 0
        self.stats = CacheStats()

    def clear(self) -> None:
        self._entries.clear()
        self._tokens = 0

    def _lookup(self, tokens: tuple[int, ...]) -> tuple[tuple[int, ...], Segment] | None:
        """The longest cached segment that tokens starts with."""
        if tokens in self._entries:
            self._entries.move_to_end(tokens)
            return tokens, self._entries[tokens]
        best = None
        for key, entry in self._entries.items():
            if len(key) <= len(tokens) and len(key) >= self.min_reuse and tokens[: len(key)] == key:
                if best is None or len(key) > len(best[0]):
                    best = (key, entry)
        if best is not None:
            self._entries.move_to_end(best[0])
        return best

    def _store(self, tokens: tuple[int, ...], entry: Segment) -> None:
        if self.max_tokens <= 0 or len(tokens) > self.max_tokens or tokens in self._entries:
            return
        self._entries[tokens] = entry
        self._tokens += len(tokens)
        while self._tokens > self.max_tokens:
            old, _ = self._entries.popitem(last=False)
            self._tokens -= len(old)

    @torch.no_grad()
    def encode(self, model: DiffusionModel, requests: list[list[list[int]]]) -> Context:
        """A context with one row per request, its segments concatenated in order."""
        flat = [tuple(seg) for segs in requests for seg in segs if seg]
        reuse = model.capabilities.exact_segment_cache
        found: dict[tuple[int, ...], Segment] = {}
        fresh: list[tuple[int, ...]] = []
        grow: list[tuple[tuple[int, ...], tuple[int, ...], Segment]] = []  # (segment, cached head, its encoding)
        for seg in dict.fromkeys(flat):  # each distinct segment once
            hit = self._lookup(seg) if reuse else None
            if hit is None:
                fresh.append(seg)
                continue
            key, entry = hit
            if len(key) == len(seg):
                self.stats.hits += 1
                found[seg] = entry
            else:
                grow.append((seg, key, entry))
        if grow:  # extend all cached heads together
            grown = model.extend_segments([e for _, _, e in grow], [list(s[len(k) :]) for s, k, _ in grow])
            for (seg, key, _), entry in zip(grow, grown):
                found[seg] = entry
                self.stats.extended += 1
                self.stats.tokens_computed += len(seg) - len(key)
        if fresh:  # encode all misses together, one segment per row
            for s, entry in zip(fresh, model.encode_segments([list(s) for s in fresh])):
                found[s] = entry
                self.stats.encoded += 1
                self.stats.tokens_computed += len(s)
        if reuse:
            for seg, entry in found.items():
                self._store(seg, entry)
        return model.join_segments([[found[tuple(seg)] for seg in segs if seg] for segs in requests])
