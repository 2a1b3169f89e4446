"""The training objective: turn source files into masked-diffusion training rows, and the loss.

Two kinds of rows, both MDLM-style (a mask ratio t drawn per row, masked slots' loss weighted 1/t):

* infilling: a contiguous span of a file (a whole line, the rest of a line after a cursor, a few
  lines, an indented block, a random character span, sometimes nothing) becomes a window longer
  than the span, the span's tokens followed by pad, between its prefix and suffix. Several
  spans of one file make a multi-hole row. The model learns what to put in a hole and how long
  the fill should be.
* plain diffusion: a run of tokens becomes a window exactly as long as the run (no pad).

Pieces are tokenized separately, cut at character offsets, exactly as the engine tokenizes the
text around holes at inference; context is trimmed with the engine's own budget rule.
This module is pure: no I/O, no model, no optimizer.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from infill.model.budget import budget_split, trim
from infill.model.tokenizer import Tokenizer

WINDOW_SIZES = (8, 16, 24, 32, 48, 64, 96, 128)
T_MIN = 0.05  # smallest mask ratio drawn: caps the 1/t loss weight at 20


@dataclass(frozen=True)
class ObjectiveConfig:
    seq_len: int = 384  # tokens per row: context plus windows
    max_window: int = 128  # longest fill window
    p_plain: float = 0.2  # share of plain-diffusion rows (no pad, window = the masked run)
    p_multi: float = 0.15  # share of infilling rows with two or three holes
    prefix_share: float = 0.75  # the engine's default context split
    context_chars: int = 3000  # characters of text taken on each side before tokenizing
    context_weight: float = 1.0  # weight of the context tokens' next-token loss (0 = pure MDLM)
    context_stride: int = 1  # count that loss at every n-th context token (the vocabulary softmax over
    # every context token is about a third of a CPU step; a sparser sample is as unbiased)


@dataclass
class Row:
    """One training row as pieces in document order: ('ctx', tokens) or ('win', tokens, n_slots)."""

    pieces: list[tuple]


# ----------------------------------------------------------------------------------------------
# Choosing spans (character offsets into a file).


def line_starts(text: str) -> list[int]:
    starts = [0]
    for i, ch in enumerate(text):
        if ch == "\n":
            starts.append(i + 1)
    return starts


def pick_span(text: str, rng: random.Random) -> tuple[int, int]:
    """A span [start, end) of text of a kind an editor user would ask to fill."""
    starts = line_starts(text)
    n_lines = len(starts)
    line = rng.randrange(n_lines)
    lo = starts[line]
    hi = starts[line + 1] if line + 1 < n_lines else len(text)
    kind = rng.random()
    if kind < 0.30:  # one whole line, newline included (single-line infilling)
        return lo, hi
    if kind < 0.50:  # the rest of a line after a cursor inside it (inline completion)
        body = text[lo:hi].rstrip("\n")
        cut = lo + rng.randint(len(body) - len(body.lstrip()), len(body)) if body else lo
        return cut, lo + len(body)
    if kind < 0.70:  # a few whole lines
        last = min(n_lines - 1, line + rng.randint(1, 8))
        end = starts[last + 1] if last + 1 < n_lines else len(text)
        return lo, end
    if kind < 0.80:  # an indented block: the lines under a line ending in ':'
        return indented_block(text, starts, line) or (lo, hi)
    if kind < 0.97:  # a random character span, cut mid-token
        start = rng.randrange(len(text) + 1)
        return start, min(len(text), start + int(rng.expovariate(1 / 60)))
    return lo, lo  # nothing to fill: the model must answer with pad


def indented_block(text: str, starts: list[int], line: int) -> tuple[int, int] | None:
    """The body of the first block header (a line ending in ':') at or after ``line``."""
    lines = text.split("\n")
    for i in range(line, min(len(lines) - 1, line + 40)):
        if lines[i].rstrip().endswith(":"):
            indent = len(lines[i]) - len(lines[i].lstrip())
            j = i + 1
            while j < len(lines) and (not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) > indent):
                j += 1
            while j > i + 1 and not lines[j - 1].strip():
                j -= 1
            if j > i + 1:
                end = starts[j] if j < len(starts) else len(text)
                return starts[i + 1], end
            return None
    return None


# ----------------------------------------------------------------------------------------------
# Building rows.


def window_size(n_tokens: int, rng: random.Random, max_window: int) -> int | None:
    """A window of at least n_tokens slots: the smallest fitting size or a bigger one."""
    fitting = [w for w in WINDOW_SIZES if n_tokens <= w <= max_window]
    if not fitting:
        return None
    return fitting[0] if rng.random() < 0.4 else rng.choice(fitting)


def infill_row(text: str, tok: Tokenizer, cfg: ObjectiveConfig, rng: random.Random, n_holes: int) -> Row | None:
    """A row with n_holes spans of ``text`` as pad-terminated windows; None if they don't fit."""
    spans = sorted(pick_span(text, rng) for _ in range(n_holes))
    for (a0, a1), (b0, b1) in zip(spans, spans[1:]):
        if b0 < a1 + 1:  # overlapping or touching holes: try again
            return None
    first, last = spans[0][0], spans[-1][1]
    pieces_text = [text[max(0, first - cfg.context_chars) : first]]
    fills = []
    for i, (s, e) in enumerate(spans):
        fills.append(text[s:e])
        end = spans[i + 1][0] if i + 1 < len(spans) else min(len(text), last + cfg.context_chars)
        pieces_text.append(text[e:end])
    enc = tok.encode_batch(pieces_text + fills)
    segs, fill_tokens = enc[: len(pieces_text)], enc[len(pieces_text) :]
    windows = []
    for f in fill_tokens:
        w = window_size(len(f), rng, cfg.max_window)
        if w is None:
            return None
        windows.append(w)
    budget = cfg.seq_len - sum(windows)
    if budget < 16:
        return None
    keep = budget_split([len(s) for s in segs], budget, cfg.prefix_share)
    segs = [trim(s, k) for s, k in zip(segs, keep)]
    pieces: list[tuple] = [("ctx", segs[0])]
    for f, w, s in zip(fill_tokens, windows, segs[1:]):
        pieces += [("win", f, w), ("ctx", s)]
    return Row(pieces)


def plain_row(tokens: list[int], cfg: ObjectiveConfig, rng: random.Random) -> Row:
    """A run of tokens as a window of its own length, with the tokens before it as context."""
    n = rng.randint(8, min(cfg.max_window, max(8, len(tokens))))
    start = rng.randint(0, max(0, len(tokens) - n))
    ctx = tokens[max(0, start - (cfg.seq_len - n)) : start]
    run = tokens[start : start + n]
    return Row([("ctx", ctx), ("win", run, len(run)), ("ctx", [])])


def make_row(text: str, tok: Tokenizer, cfg: ObjectiveConfig, rng: random.Random) -> Row | None:
    if rng.random() < cfg.p_plain:
        return plain_row(tok.encode(text[: cfg.context_chars * 2]), cfg, rng)
    return infill_row(text, tok, cfg, rng, rng.choice((2, 3)) if rng.random() < cfg.p_multi else 1)


# ----------------------------------------------------------------------------------------------
# Masking, collation and the loss.


@dataclass
class Batch:
    ids: torch.Tensor  # [B, L] inputs (masked window slots hold the mask id)
    pos: torch.Tensor
    seg: torch.Tensor  # context segment number; -1 for window slots and padding
    is_win: torch.Tensor
    target: torch.Tensor  # [B, L] true tokens of window slots (pad beyond the fill)
    weight: torch.Tensor  # [B, L] loss weight: 1/t on masked slots, 0 elsewhere
    n_window_slots: int  # the loss is normalised by this (LLaDA-style), not by the masked count


def collate(rows: list[Row], seq_len: int, pad_id: int, mask_id: int, rng: random.Random) -> Batch:
    """Lay rows out (document-order positions), draw t per row and mask window slots."""
    B = len(rows)
    ids = torch.full((B, seq_len), pad_id, dtype=torch.long)
    pos = torch.zeros((B, seq_len), dtype=torch.long)
    seg = torch.full((B, seq_len), -1, dtype=torch.long)
    is_win = torch.zeros((B, seq_len), dtype=torch.bool)
    target = torch.full((B, seq_len), pad_id, dtype=torch.long)
    weight = torch.zeros((B, seq_len))
    u = rng.random()
    for b, row in enumerate(rows):
        t = max((u + b / B) % 1.0, T_MIN)  # stratified over the batch: lower-variance loss
        at, n_seg = 0, 0
        for piece in row.pieces:
            if piece[0] == "ctx":
                toks = piece[1]
                ids[b, at : at + len(toks)] = torch.tensor(toks, dtype=torch.long)
                seg[b, at : at + len(toks)] = n_seg
                n_seg += 1
            else:
                _, fill, n = piece
                toks = fill + [pad_id] * (n - len(fill))
                masked = torch.tensor([rng.random() < t for _ in range(n)])
                if not masked.any():
                    masked[rng.randrange(n)] = True
                truth = torch.tensor(toks, dtype=torch.long)
                ids[b, at : at + n] = torch.where(masked, mask_id, truth)
                target[b, at : at + n] = truth
                weight[b, at : at + n] = masked.float() / t
                is_win[b, at : at + n] = True
            pos[b, at : at + len(toks)] = torch.arange(at, at + len(toks))
            at += len(toks)
    return Batch(ids, pos, seg, is_win, target, weight, int(is_win.sum()))


def next_token_targets(batch: Batch) -> torch.Tensor:
    """[B, L] bool: context tokens whose next token is in the same segment (causal, so no leak)."""
    same = (batch.seg[:, :-1] == batch.seg[:, 1:]) & (batch.seg[:, :-1] >= 0)
    return torch.cat([same, torch.zeros_like(same[:, :1])], dim=1)


def diffusion_loss(model, batch: Batch, context_weight: float = 0.0, context_stride: int = 1) -> torch.Tensor:
    """MDLM loss: 1/t-weighted cross-entropy of masked window slots, per window slot.

    With ``context_weight`` > 0, plus that times the next-token loss of the context tokens
    (segments are causal, so each context token can predict its successor): a dense signal that
    teaches the context encoder what the windows read, and speeds up early training a lot. With
    ``context_stride`` n > 1 that loss is taken at every n-th position only, from an offset that
    depends on the batch (so every position is counted over many batches).
    """
    h = model.hidden(batch.ids, batch.pos, batch.seg, batch.is_win)
    sel = batch.weight > 0
    logits = model.logits(h[sel])
    ce = F.cross_entropy(logits.float(), batch.target[sel], reduction="none")
    loss = (ce * batch.weight[sel]).sum() / max(batch.n_window_slots, 1)
    if context_weight > 0:
        nxt = next_token_targets(batch)
        if context_stride > 1:
            offset = int(batch.ids[:, :8].sum()) % context_stride
            nxt &= (torch.arange(nxt.shape[1], device=nxt.device) % context_stride == offset)[None]
        if nxt.any():
            follow = torch.cat([batch.ids[:, 1:], batch.ids[:, :1]], dim=1)
            loss = loss + context_weight * F.cross_entropy(model.logits(h[nxt]).float(), follow[nxt])
    return loss
