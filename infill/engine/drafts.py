"""Prompt-lookup drafts: guesses of the tokens a left-to-right fill writes next, for the sampler's
speculative steps (``Schedule.lookahead``, ``Denoiser(drafter=...)``).

A row's draft is found by looking up the last few tokens before its frontier slot (the context
before the hole, then what the fill has committed) in the fill so far, then in its document's
recent fills (:class:`RecentFills`, the latest first: the keystroke before wrote much of what this
one writes), then in the request's own tokens (the text before and after every hole), and copying
what followed the latest place they occur. Code repeats itself (names, calls, the shape of the line
above), so such guesses are often right.

A draft only guesses: the sampler commits a guessed slot only where the model's own choice there
equals the guess, so drafts change how many slots one model call commits, and the fill only by
rounding: a call over several guessed slots rounds its products otherwise than one slot a call,
which in bf16 can turn a near tie the other way. So a request's drafts come from its own text and
its own document's fills alone: a document's fills never depend on what was filled in another
(nor on the server's warm-up). Pure Python over token ids: no model, no tokenizer, no I/O.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from typing import Hashable, Sequence

import torch

NGRAMS = (3, 2)  # how many tokens before the frontier are looked up, longest first
TRIES = 4  # places (latest first) an n-gram is tried at before giving up on it


class RecentFills:
    """The latest fills' tokens per document (its path; None is one more document): at most
    ``per_document`` fills each, oldest first, for the ``documents`` documents filled last."""

    def __init__(self, per_document: int, documents: int):
        self.per_document, self.documents = per_document, documents
        self._fills: OrderedDict[Hashable, deque[list[int]]] = OrderedDict()

    def of(self, document: Hashable) -> list[list[int]]:
        """``document``'s recent fills, oldest first."""
        return list(self._fills.get(document, ()))

    def add(self, document: Hashable, tokens: list[int]) -> None:
        fills = self._fills.pop(document, None) or deque(maxlen=self.per_document)
        fills.append(list(tokens))
        self._fills[document] = fills  # the latest document last
        while len(self._fills) > self.documents:
            self._fills.popitem(last=False)

    def clear(self) -> None:
        self._fills.clear()

    def __len__(self) -> int:
        """How many fills are kept, over all documents."""
        return sum(len(fills) for fills in self._fills.values())


class PromptLookup:
    """The drafter of one chunk's rows: ``rows[r]`` is the request (its ``segments``: token lists,
    the text before each hole and after the last) that row r fills; ``recent[i]``: request i's
    document's recent fills, oldest first."""

    def __init__(self, segments: list[list[list[int]]], rows: list[int], recent: Sequence[Sequence[list[int]]] = ()):
        self.rows = rows
        self.recent = [[list(f) for f in fills] for fills in (recent or [()] * len(segments))]
        self.recent_index = [[_ngram_index(f) for f in fills] for fills in self.recent]
        self.sources, self.starts, self.index = [], [], []
        for segs in segments:
            source = [t for seg in segs for t in seg]
            starts, at = [], 0  # where hole h sits in ``source``: after segments 0..h
            for seg in segs[:-1]:
                at += len(seg)
                starts.append(at)
            self.sources.append(source)
            self.starts.append(starts)
            self.index.append(_ngram_index(source))

    def __call__(self, state, k: int) -> torch.Tensor:
        """[R, W] long: up to ``k`` guessed tokens from each row's first masked slot on, in its
        hole; -1 where there is no guess."""
        ids, hole, masked = state.ids.cpu(), state.hole.cpu(), state.masked.cpu()
        out = torch.full(ids.shape, -1, dtype=torch.long)
        for r in range(ids.shape[0]):
            where = masked[r].nonzero().flatten()
            if len(where) == 0:
                continue
            f = int(where[0])
            h = int(hole[r, f])
            if h < 0:
                continue
            ri = self.rows[r]
            in_hole = (hole[r] == h).nonzero().flatten()
            written = ids[r, in_hole[in_hole < f]].tolist()
            guess = self.guess(ri, h, written, k)
            room = in_hole[(in_hole >= f) & masked[r, in_hole]][: len(guess)]
            out[r, room] = torch.tensor(guess[: len(room)], dtype=torch.long)
        return out

    def guess(self, ri: int, h: int, written: list[int], k: int) -> list[int]:
        """Up to ``k`` tokens that may follow hole ``h`` of request ``ri`` once it holds ``written``."""
        source, boundary = self.sources[ri], self.starts[ri][h]
        tail = source[max(0, boundary - max(NGRAMS)) : boundary] + written
        for n in NGRAMS:
            if len(tail) < n:
                continue
            key = tail[-n:]
            for i in range(len(tail) - n - 1, -1, -1):  # the fill repeating itself (or the text just before it)
                if tail[i : i + n] == key:
                    return tail[i + n : i + n + k]
            for fill, index in zip(reversed(self.recent[ri]), reversed(self.recent_index[ri])):  # the latest fill first
                for i in reversed(index.get(tuple(key), ())[-TRIES:]):
                    after = fill[i + n : i + n + k]
                    if after:
                        return after
            places = self.index[ri].get(tuple(key), ())
            for i in [p for p in reversed(places) if p + n != boundary][:TRIES]:  # (not the hole's own edge)
                after = source[i + n : i + n + k]
                if after:
                    return after
        return []


def _ngram_index(tokens: list[int]) -> dict[tuple[int, ...], list[int]]:
    """Where each n-gram (n in NGRAMS) of ``tokens`` starts, in order."""
    index: dict[tuple[int, ...], list[int]] = {}
    for n in NGRAMS:
        for i in range(len(tokens) - n + 1):
            index.setdefault(tuple(tokens[i : i + n]), []).append(i)
    return index
