"""Reuse of encoded context across fills: what makes a keystroke cheap.

Context segments (prefix, the text between holes, suffix) are causal and see only themselves
(model.py), so a segment's keys and values depend on its own tokens alone. This module keeps
recently encoded segments in a small LRU keyed by their tokens and builds a batch's
ContextCache from them:

* the same segment again (the suffix while typing, an unchanged file): reused as is;
* a segment that extends a cached one (the prefix after typing at the cursor): only the new
  tokens are run, attending to the cached ones (model.extend_segments, all such segments of a
  batch together);
* anything else: encoded from scratch, all such segments of a batch together.

All three give the same numbers as encoding from scratch. It does not decide what the segments
are (the engine trims them so that they stay stable while the user types).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import torch

from infill.model.network import ContextCache, DiffusionLM


@dataclass
class _Entry:
    keys: list[torch.Tensor]  # per layer [1, H, n, D], unrotated
    values: list[torch.Tensor]


@dataclass
class CacheStats:
    hits: int = 0  # segments reused whole
    extended: int = 0  # segments that reused a cached head
    encoded: int = 0  # segments encoded from scratch
    tokens_computed: int = 0


class SegmentCache:
    def __init__(self, max_tokens: int = 32768, min_reuse: int = 16):
        self.max_tokens = max_tokens  # capacity, in cached tokens (0 disables caching)
        self.min_reuse = min_reuse  # shortest cached head worth extending
        self._entries: OrderedDict[tuple[int, ...], _Entry] = OrderedDict()
        self._tokens = 0
        self.stats = CacheStats()

    def clear(self) -> None:
        self._entries.clear()
        self._tokens = 0

    def _lookup(self, tokens: tuple[int, ...]) -> tuple[tuple[int, ...], _Entry] | None:
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

    def _store(self, tokens: tuple[int, ...], entry: _Entry) -> None:
        if self.max_tokens <= 0 or len(tokens) > self.max_tokens or tokens in self._entries:
            return
        self._entries[tokens] = entry
        self._tokens += len(tokens)
        while self._tokens > self.max_tokens:
            old, _ = self._entries.popitem(last=False)
            self._tokens -= len(old)

    @torch.no_grad()
    def encode(self, model: DiffusionLM, requests: list[list[list[int]]], device) -> ContextCache:
        """A ContextCache with one row per request, its segments concatenated in order."""
        cfg = model.cfg
        flat = [tuple(seg) for segs in requests for seg in segs if seg]
        found: dict[tuple[int, ...], _Entry] = {}
        fresh: list[tuple[int, ...]] = []
        grow: list[tuple[tuple[int, ...], tuple[int, ...], _Entry]] = []  # (segment, cached head, its entry)
        for seg in dict.fromkeys(flat):  # each distinct segment once
            hit = self._lookup(seg)
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
            grown = model.extend_segments([(e.keys, e.values) for _, _, e in grow], [list(s[len(k) :]) for s, k, _ in grow])
            for (seg, key, _), (keys, values) in zip(grow, grown):
                found[seg] = _Entry(keys, values)
                self.stats.extended += 1
                self.stats.tokens_computed += len(seg) - len(key)
        if fresh:  # encode all misses together, one segment per row
            n = max(len(s) for s in fresh)
            ids = torch.full((len(fresh), n), cfg.pad_id, dtype=torch.long)
            seg_ids = torch.full((len(fresh), n), -1, dtype=torch.long)
            for i, s in enumerate(fresh):
                ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
                seg_ids[i, : len(s)] = 0
            cache = model.encode_context(ids.to(device), seg_ids.to(device))
            for i, s in enumerate(fresh):
                found[s] = _Entry([k[i : i + 1, :, : len(s)] for k in cache.keys], [v[i : i + 1, :, : len(s)] for v in cache.values])
                self.stats.encoded += 1
                self.stats.tokens_computed += len(s)
        for seg, entry in found.items():
            self._store(seg, entry)
        return assemble(model, requests, found, device)


def assemble(model: DiffusionLM, requests: list[list[list[int]]], found: dict, device) -> ContextCache:
    """Concatenate each request's segments into one padded row of a ContextCache."""
    cfg = model.cfg
    lengths = [sum(len(s) for s in segs) for segs in requests]
    L = max(1, max(lengths))
    B, H, D = len(requests), cfg.n_heads, cfg.head_dim
    dtype = next(model.parameters()).dtype
    keys = [torch.zeros(B, H, L, D, dtype=dtype, device=device) for _ in range(cfg.n_layers)]
    values = [torch.zeros(B, H, L, D, dtype=dtype, device=device) for _ in range(cfg.n_layers)]
    valid = torch.zeros(B, L, dtype=torch.bool, device=device)
    for b, segs in enumerate(requests):
        at = 0
        for seg in segs:
            if not seg:
                continue
            entry = found[tuple(seg)]
            for layer in range(cfg.n_layers):
                keys[layer][b, :, at : at + len(seg)] = entry.keys[layer][0]
                values[layer][b, :, at : at + len(seg)] = entry.values[layer][0]
            at += len(seg)
        valid[b, :at] = True
    return ContextCache(keys, values, valid)
