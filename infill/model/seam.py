"""The model seam: what the sampler, the context cache and the engine need of a diffusion model.

Everything outside infill/model (and infill/train, which is model-specific) talks to a model only
through :class:`DiffusionModel` and its :class:`Tokenizer`, so another masked-diffusion model (a
transformers checkpoint with its own BPE, vocabulary, special ids and logit alignment) plugs in
as one more implementation, loaded by infill/model/registry.py from its directory's config.json.

The flow of one fill through the seam:

1. ``encode_segments``: each context segment (prefix, text between holes, suffix) encoded alone;
   the context cache (infill/model/context_cache.py) keeps these per segment and, for a model with
   ``capabilities.exact_segment_cache``, reuses them across fills (``extend_segments`` grows a
   cached one by the tokens typed after it);
2. ``join_segments``: each request's segments, in order, as one row of a :class:`Context`;
3. ``bind_context``: that context placed for the candidate rows at their absolute positions;
4. per denoising step, ``window_hidden`` for the window slots (the fill) attending to the bound
   context and to all windows, and ``logits`` for the slots that are still masked.

What the objects between these calls hold is the model's business (its cache layout): the
callers only pass them back, read a Context's ``length`` and select rows of a bound context.
A model whose context encoding depends on where a segment sits (a plain bidirectional
transformer) says so with ``exact_segment_cache=False``: its segments are never reused, and it
may keep token ids as its "encoding" and run the whole layout at each step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Protocol, Sequence, runtime_checkable

import torch

Segment = Any  # one context segment as the model encoded it (opaque to the callers)


@dataclass(frozen=True)
class Capabilities:
    """What a model can do, as the callers need to know it."""

    exact_segment_cache: bool  # a segment's encoding is independent of its position and of the
    # other segments, so it can be cached, reused and extended exactly across fills
    left_to_right: bool = False  # a causal model: a slot's prediction sees only what precedes it, so
    # the engine commits one slot per step, in document order (autoregressive decoding as the
    # degenerate schedule of masked diffusion)
    scores_text: bool = False  # has ``continuation_logprob`` (a causal model): how likely a text goes on a
    # context, so that candidates can be ranked by the text after the hole, which they did not see
    prefix_cache: bool = False  # keeps context states across fills by their tokens (a fill whose context starts
    # as a kept one's encodes only the rest), so ``prefetch`` can encode a context ahead of the fill that needs it
    suffix_lines: int = 0  # a causal model adapted to read the code below its hole (a window adapter trained with it):
    # the engine shows it this many lines after the hole's line, as a snippet before its context
    expand_id: int | None = None  # variable-length fills (DreamOn): this token committed at a slot makes it two
    # masked slots, and a committed pad is deleted (the model does not see it; everything after it closes up),
    # so a hole's window holds its live slots first and its spare (pad) slots last


@runtime_checkable
class Context(Protocol):
    """Encoded context segments joined into one row per request."""

    @property
    def length(self) -> int:
        """Context positions per row (rows are padded to the longest)."""
        ...


@runtime_checkable
class Bound(Protocol):
    """A context bound to candidate rows and positions, as ``window_hidden`` reads it."""

    def select(self, rows: torch.Tensor) -> "Bound":
        """The same context for rows ``rows`` [n] only."""
        ...


@runtime_checkable
class Tokenizer(Protocol):
    """Text to token ids and back, with the same special ids as its model."""

    vocab_size: int
    pad_id: int
    mask_id: int
    eos_id: int

    def encode(self, text: str) -> list[int]: ...

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]: ...

    def decode(self, ids: Iterable[int]) -> str:
        """Text of ``ids``, special tokens skipped; never raises on a partial UTF-8 sequence."""
        ...

    def token_bytes(self, token_id: int) -> bytes:
        """The exact bytes of one token (b"" for special tokens)."""
        ...


@runtime_checkable
class DiffusionModel(Protocol):
    """A masked-diffusion language model as the sampler, the context cache and the engine use it.

    Shapes: R candidate rows, W window slots per row, Lc context positions, V the vocabulary (the
    logits' last dimension, which may exceed the tokenizer's). ``pos`` are absolute positions in a
    row's layout, the context and the windows in document order.
    """

    name: str  # what results report as their model (config.json's name, else the directory's)
    capabilities: Capabilities
    languages: tuple[str, ...] | None  # the languages it was trained on (config.json's "languages"); None: not said

    @property
    def mask_id(self) -> int: ...

    @property
    def pad_id(self) -> int:
        """An empty window slot: a fill ends at its first pad."""
        ...

    @property
    def eos_id(self) -> int: ...

    @property
    def vocab_size(self) -> int: ...

    @property
    def max_context(self) -> int:
        """Context tokens the model was trained on: the engine's default context budget."""
        ...

    @property
    def device(self) -> torch.device: ...

    @property
    def dtype(self) -> torch.dtype: ...

    @property
    def n_params(self) -> int: ...

    def encode_segments(self, segments: list[list[int]]) -> list[Segment]:
        """Encode each (non-empty) segment on its own, all in one batch."""
        ...

    def extend_segments(self, heads: list[Segment], ids: list[list[int]]) -> list[Segment]:
        """``heads[b]`` grown by the tokens ``ids[b]`` (only with ``exact_segment_cache``)."""
        ...

    def prefetch(self, context: list[int]) -> None:
        """Encode ``context`` (a one-hole request's context tokens, as its fill lays them out) into
        the states kept across fills, so that a later fill whose context starts with it encodes only
        the rest. Does nothing without ``capabilities.prefix_cache``."""
        ...

    def join_segments(self, rows: list[list[Segment]]) -> Context:
        """One context row per request: its segments concatenated in order."""
        ...

    def bind_context(self, context: Context, rows: torch.Tensor, pos: torch.Tensor) -> Bound:
        """Context rows ``rows`` [R] (a request's row for each candidate) at positions ``pos`` [R, Lc]."""
        ...

    def window_hidden(self, ids: torch.Tensor, pos: torch.Tensor, valid: torch.Tensor, ctx: Bound) -> torch.Tensor:
        """Hidden states [R, W, d] of window slots ids/pos/valid [R, W], each the state whose
        ``logits`` predict that slot's token (a model with shifted logits returns the state of the
        position before it), attending to ``ctx`` and to all windows of the row."""
        ...

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Logits [..., V] of hidden states [..., d]."""
        ...
