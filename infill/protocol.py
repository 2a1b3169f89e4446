"""Wire types shared by every caller of the engine: CLI, language server, websocket, benchmarks.

msgspec Structs only; this module imports neither torch nor anything heavy, so clients can use
it alone. Offsets are Python ``str`` indices (code points) into ``FillRequest.text``; the
conversions to UTF-16 (LSP) and UTF-8 bytes (tree-sitter) live elsewhere, once each.
"""

from __future__ import annotations

from typing import Literal

import msgspec

Policy = Literal["confidence", "margin", "entropy", "left-to-right"]


class Hole(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A span of the document to replace; ``start == end`` inserts at a cursor."""

    start: int
    end: int
    max_tokens: int = 32  # the fill window: at most this many tokens, the rest is padding
    min_tokens: int = 0  # at least this many: 1 for an explicit hole, 0 at a cursor (may stay empty)


class SamplingOptions(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """How to denoise. Unset ``steps``/``threshold`` fall back to the engine's defaults."""

    steps: int | None = None  # denoising steps per window (tokens per step = window / steps)
    threshold: float | None = None  # unmask every token above this confidence (at least one)
    policy: Policy = "confidence"  # which masked positions to commit first
    temperature: float = 0.0  # 0 = greedy
    top_p: float = 1.0
    seed: int = 0
    candidates: int = 0  # window lengths x seeds run side by side; 0 = the engine's default
    constrained: bool = True  # syntax-checked steering, repair and selection
    retry: bool = True  # a constrained fill still invalid gets one more, stricter round (engine.fill_batch)
    deadline_ms: float | None = None  # stop denoising after this long and return what is there
    min_score: float | None = None  # a fill scored under this is not wanted (the language server's floor): under a
    # left-to-right schedule, whose committed tokens can only lower a fill's score, the fill stops once every
    # candidate is under it (FillResult.below_floor), in Engine.fill and in infill serve's stepper alike. Under
    # another schedule the fill completes as without it


class Snippet(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Whole lines of another file, read as context before the document (infill/text/related.py chooses them)."""

    path: str  # named to the model in a comment line above the text
    text: str


class FillRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A document (or an already trimmed window of one) with one or more holes."""

    text: str
    holes: list[Hole]
    language: str | None = None  # LSP language id or file extension; None = unknown
    options: SamplingOptions = SamplingOptions()
    path: str | None = None  # only for messages
    # Other files' lines, read before the document's text within EngineConfig.related_tokens
    # (the best last); they never receive a fill.
    context: list[Snippet] = []


class Fill(msgspec.Struct, frozen=True):
    """The text chosen for one hole."""

    text: str
    score: float  # log-probability under the model of the fill: the sum over its tokens and its end (a causal
    # model's end: that the text after the hole goes on there, Windows.end_sets); exp(score) is how likely the
    # model holds this exact fill, so the language server's threshold reads it
    valid: bool | None = None  # prefix + fill + suffix parses with no new error; None = unchecked


class Timings(msgspec.Struct):
    tokenize_ms: float = 0.0
    context_ms: float = 0.0  # one pass over the fixed context (prefix, suffix, between holes)
    denoise_ms: float = 0.0
    constrain_ms: float = 0.0
    total_ms: float = 0.0
    steps: int = 0
    tokens_filled: int = 0  # non-pad tokens the chosen candidate generated (before a cut at its syntactic unit's end)
    context_tokens: int = 0
    candidates: int = 0
    rounds: int = 1  # denoising rounds: 2 where a constrained fill was retried under stricter steering
    rank_ms: float = 0.0  # ranking candidates by the text after the hole (a causal model's, Engine.pick)


class Partial(msgspec.Struct, frozen=True):
    """What a fill stopped under its floor had written (FillResult.below_floor): the text of its
    committed tokens (the healed bytes its first token writes again left out) and each token's
    log-probability, whose sum is the Fill's score. Token i writes ``text[ends[i - 1]:ends[i]]``
    (from 0 for the first; a character split over tokens counts where it completes)."""

    text: str
    ends: list[int]
    logprobs: list[float]


class FillResult(msgspec.Struct):
    fills: list[Fill]  # one per hole, in request order
    timings: Timings
    model: str
    below_floor: bool = False  # stopped under SamplingOptions.min_score: every fill is empty, valid None, and scored
    # by the tokens it had (at least what the whole fill would have scored)
    partial: list[Partial] = []  # with below_floor, per hole: what it had written


class Draft(msgspec.Struct):
    """An intermediate state of a fill, for streaming: the text so far of each hole."""

    step: int
    texts: list[str]
    masked: int  # positions still masked across all holes


_json_encoder = msgspec.json.Encoder()
_msgpack_encoder = msgspec.msgpack.Encoder()


def to_json(obj: msgspec.Struct) -> bytes:
    return _json_encoder.encode(obj)


def to_msgpack(obj: msgspec.Struct) -> bytes:
    return _msgpack_encoder.encode(obj)


def from_json(data: bytes | str, type_: type):
    return msgspec.json.decode(data, type=type_)


def from_msgpack(data: bytes, type_: type):
    return msgspec.msgpack.decode(data, type=type_)
