"""A transformers Qwen2 / Llama checkpoint of an open diffusion LM behind our seam (DiffusionModel).

The model attends bidirectionally over the whole layout, so a context segment's states depend on
everything around it: ``capabilities.exact_segment_cache`` is False, a segment's "encoding" is its
token ids, and each denoising step runs the layout of every candidate row:

    [lead] + context tokens (prefix, between holes, suffix) + window slots (the fills)

with explicit position ids (a row's absolute positions, the lead one before the first) and an
explicit 4D additive attention mask (every real token sees every real token; batch padding sees
only itself), which transformers' mask preparation passes through as it is (a 4D mask is taken as
prepared), so neither sdpa nor eager attention ever builds a causal one. The order of tokens in the sequence does not matter: with
explicit positions and full attention, attention is permutation-equivariant.

The lead token is the family's BOS where the family's own infilling prompt starts with one (Dream
family, LLaDA); for a shifted family without one (Open-dCoder) it is used only where a window starts
the document (the position before the first slot must be a real token).

Shifted families (Dream, Dream-Coder, DreamOn, DiffuCoder, Open-dCoder): the logits at position i
predict token i + 1, so ``window_hidden`` returns for each slot the state of the position before
it (the last context token before a hole, the slot before it, or the lead). LLaDA: the slot's own.

Cache modes:

* ``exact`` (the reference): the whole layout at every step;
* ``approximate`` (Fast-dLLM's dual cache): the first step of a fill runs the whole layout and keeps
  every layer's keys and values of the lead and the context; later steps run only the window slots
  (and, for a shifted family, the context token before each hole, whose state predicts the hole's
  first slot), attending to those kept keys and values. The context's keys and values then lag the
  windows' (they saw the windows fully masked): close, not equal. ``refresh_every`` N > 0 runs the
  whole layout again every N steps. Across fills (keystrokes): the model keeps the context keys and
  values of its last few whole-layout runs (``keep_layouts``; on a CPU: on a GPU the whole layout is
  cheaper than the reuse); a fill whose context shares its start
  and its end with a kept one (what typing leaves) takes theirs (the end's keys turned to its new
  positions: rotary positions compose) and runs at its first step only the tokens that differ, the
  anchors and the windows. Each such fill is one whole-layout run away from exact; a context that
  differs in more than ``REUSE_NEW`` tokens, or shares less than ``REUSE_SHARE`` of itself, runs
  whole (and is kept).

Variable length (a checkpoint with an expand token, DreamOn): a hole's spare slots are committed
pad, which the model does not see, and positions close up over what it does see (a row's real
tokens numbered in order, as DreamOn's own position ids count its attention mask), so a fill of n
tokens sits just as it would in a layout made for n slots. In the approximate mode a change of a
fill's length moves the context after it: the whole layout runs again.

On one GPU, a diffusion model's passes that keep no keys and values (every exact step; not the
approximate mode's, whose first step records them) replay CUDA graphs over layouts padded to fixed
lengths (``graphs``, infill/model/hf/graphs.py).

``logits`` keeps the sampler inside the tokenizer's vocabulary: rows past it (a vocabulary padded
for speed) and special tokens other than pad get -inf, and pad takes the probability of the
family's end tokens (EOS, and pad where it differs), so a fill ends wherever the model would end it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from infill.model.hf import fused
from infill.model.hf.families import Family
from infill.model.hf.graphs import GraphRunner
from infill.model.hf.int8 import Int8Linear
from infill.model.seam import Capabilities

CACHE_MODES = ("exact", "approximate")
KEEP_LAYOUTS = 8  # contexts (keys and values of a whole-layout run) kept for later fills, in approximate mode
REUSE_NEW = 128  # a fill reuses a kept context where at most this many of its tokens differ from it
REUSE_SHARE = 0.5  # ... and its shared start and end hold at least this share of its tokens


@dataclass
class _Kept:
    """The real context tokens (lead first) of one row of a whole-layout run, with their positions
    and every layer's keys and values ([1, kvH, n, D])."""

    tokens: torch.Tensor
    positions: torch.Tensor
    kv: list[tuple[torch.Tensor, torch.Tensor]]


def shared_ends(a: torch.Tensor, b: torch.Tensor, agree: torch.Tensor) -> tuple[int, int]:
    """(start, end): how many tokens ``a`` [n] shares with ``b`` [m] from its start (where ``agree``
    [min(n, m)] says their positions agree too) and, after that, from its end."""
    m = min(len(a), len(b))
    start = int(torch.cumprod((a[:m] == b[:m]) & agree[:m], 0).sum()) if m else 0
    k = m - start
    end = int(torch.cumprod(a.flip(0)[:k] == b.flip(0)[:k], 0).sum()) if k else 0
    return start, end


@dataclass
class HFContext:
    ids: torch.Tensor  # [B, Lc] long, pad where ``valid`` is False
    valid: torch.Tensor  # [B, Lc] bool

    @property
    def length(self) -> int:
        return self.ids.shape[1]


@dataclass
class HFBound:
    ids: torch.Tensor  # [R, Lc]
    pos: torch.Tensor  # [R, Lc]
    valid: torch.Tensor  # [R, Lc]
    # approximate mode: per layer (keys, values) [R, kvH, 1 + Lc, D] of the lead and the context
    kv: list[tuple[torch.Tensor, torch.Tensor]] | None = None
    calls: int = 0  # window_hidden calls since kv was computed
    extra: dict = field(default_factory=dict)

    def select(self, rows: torch.Tensor) -> "HFBound":
        kv = None if self.kv is None else [(k.index_select(0, rows.to(k.device)), v.index_select(0, rows.to(v.device)))
                                           for k, v in self.kv]
        extra = {name: t.index_select(0, rows) for name, t in self.extra.items()}
        return HFBound(self.ids.index_select(0, rows), self.pos.index_select(0, rows), self.valid.index_select(0, rows),
                       kv, self.calls, extra)


class _Record:
    """A transformers cache that keeps each layer's keys and values (as rotated) and returns them as is."""

    def __init__(self, n_layers: int):
        self.kv: list = [None] * n_layers

    def update(self, key_states, value_states, layer_idx, *args, **kwargs):
        self.kv[layer_idx] = (key_states, value_states)
        return key_states, value_states

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return 0


class _Frozen:
    """A transformers cache of kept context keys and values: each layer's fresh ones are appended for
    this call only (the kept ones are never changed)."""

    def __init__(self, kv: list[tuple[torch.Tensor, torch.Tensor]], record: bool = False):
        self.kv = kv
        self.fresh: list | None = [None] * len(kv) if record else None  # this call's own, per layer

    def update(self, key_states, value_states, layer_idx, *args, **kwargs):
        if self.fresh is not None:
            self.fresh[layer_idx] = (key_states, value_states)
        k, v = self.kv[layer_idx]
        return torch.cat([k, key_states], dim=2), torch.cat([v, value_states], dim=2)

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.kv[0][0].shape[2]


def additive_mask(key_ok: torch.Tensor, n_queries: int, dtype: torch.dtype, self_at: int,
                  key_pos: torch.Tensor | None = None, query_pos: torch.Tensor | None = None) -> torch.Tensor:
    """[R, 1, Q, K] additive mask: 0 where key k is real or is query q itself (key index
    ``self_at + q``), the dtype's minimum elsewhere (so no row is ever all masked). With positions
    ``key_pos`` [R, K] and ``query_pos`` [R, Q], a real key is seen only from a query at its
    position or after it (causal attention by position, whatever the order of the sequence)."""
    R, K = key_ok.shape
    dev = key_ok.device
    eye = torch.arange(K, device=dev)[None, :] == (torch.arange(n_queries, device=dev)[:, None] + self_at)
    ok = key_ok[:, None, :]
    if key_pos is not None:
        ok = ok & (key_pos[:, None, :] <= query_pos[:, :, None])
    ok = ok | eye[None]
    mask = torch.zeros((R, 1, n_queries, K), dtype=dtype, device=dev)
    return mask.masked_fill_(~ok[:, None], torch.finfo(dtype).min)


def close_up(positions: torch.Tensor, ok: torch.Tensor) -> torch.Tensor:
    """[R, N] positions numbered over the real tokens only (``ok``), in the order of ``positions``:
    0 for the first real token, 1 for the next, ... (not real tokens: their successor's)."""
    size = int(positions.max()) + 1
    seen = torch.zeros((positions.shape[0], size + 1), dtype=torch.long, device=positions.device)
    seen.scatter_(1, torch.where(ok, positions, size), 1)
    before = seen[:, :size].cumsum(1) - seen[:, :size]  # real tokens at smaller positions
    return before.gather(1, positions.clamp(0, size - 1))


def position_index(pos: torch.Tensor, ok: torch.Tensor, size: int) -> torch.Tensor:
    """[R, size] long: for each position p (0 .. size-1) the index in the row of the real token at
    p (where ``ok``); 0 where none."""
    R = pos.shape[0]
    where = torch.zeros((R, size + 1), dtype=torch.long, device=pos.device)
    idx = torch.arange(pos.shape[1], device=pos.device).expand_as(pos)
    p = torch.where(ok, pos, size).clamp(0, size)  # not real: the spare column
    where.scatter_(1, p, idx)
    return where[:, :size]


class HFDiffusionModel(nn.Module):
    """DiffusionModel (infill/model/seam.py) over a transformers Qwen2ForCausalLM / LlamaForCausalLM."""

    languages: tuple[str, ...] | None = None  # the registry sets config.json's "languages" where it names any

    def __init__(self, hf: nn.Module, family: Family, *, mask_id: int, pad_id: int, eos_id: int, lead_id: int,
                 tokenizer_size: int, special_ids: frozenset[int], end_ids: frozenset[int], max_context: int,
                 name: str, cache_mode: str = "exact", refresh_every: int = 0, variant: str = "",
                 expand_id: int | None = None):
        super().__init__()
        self.hf = hf
        self.family = family
        self.capabilities = Capabilities(exact_segment_cache=False, left_to_right=family.causal, scores_text=family.causal,
                                         expand_id=expand_id)
        self.variant = variant or family.key
        self.name = name
        self._mask_id, self._pad_id, self._eos_id, self.lead_id = mask_id, pad_id, eos_id, lead_id
        self._max_context = max_context
        self.cache_mode = cache_mode
        self.refresh_every = refresh_every
        # Kept across fills on a CPU only: on a GPU the reuse (its anchors found and scattered back)
        # cost more than the whole layout it saves (bench/results/gpu-h200, BENCHMARKS.md)
        self.keep_layouts = KEEP_LAYOUTS if self.device.type == "cpu" else 0
        self._kept: list[_Kept] = []  # most recent last
        # Whole-layout passes from CUDA graphs: a diffusion model on one GPU (a causal model's passes
        # vary too much in length to be worth capturing)
        on_one_gpu = self.device.type == "cuda" and all(d == self.device for d in self.layer_devices)
        self.graphs = GraphRunner(self._forward, pad_id) if on_one_gpu and not family.causal else None
        self.stacked = fused.stack(self.backbone)  # int8 Llama layers on a CPU: stacked projections (fused.py)
        self.whole_runs = 0  # whole-layout runs (what a reused context saves)
        self.tokenizer_size = tokenizer_size
        V = self.vocab_size
        banned = torch.zeros(V, dtype=torch.bool)
        banned[tokenizer_size:] = True
        for i in special_ids:
            if 0 <= i < V and i not in (pad_id, expand_id):
                banned[i] = True
        self.register_buffer("_banned", banned.to(self.device), persistent=False)
        self._end_ids = sorted(i for i in end_ids | {pad_id} if 0 <= i < V)
        for layer in self.backbone.layers:
            layer.self_attn.is_causal = False

    # -- the seam's facts ----------------------------------------------------------------------

    @property
    def backbone(self) -> nn.Module:
        return self.hf.model

    @property
    def mask_id(self) -> int:
        return self._mask_id

    @property
    def pad_id(self) -> int:
        return self._pad_id

    @property
    def eos_id(self) -> int:
        return self._eos_id

    @property
    def vocab_size(self) -> int:
        return self.hf.lm_head.weight.shape[0]

    @property
    def max_context(self) -> int:
        return self._max_context

    @property
    def device(self) -> torch.device:
        return self.backbone.embed_tokens.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.backbone.embed_tokens.weight.dtype

    @property
    def layer_devices(self) -> list[torch.device]:
        """Each decoder layer's device, where its keys and values are made and kept: the model's own,
        unless it is spread over several GPUs (infill/model/hf/placement.py)."""
        return [layer.input_layernorm.weight.device for layer in self.backbone.layers]

    @property
    def n_params(self) -> int:
        seen, n = set(), 0
        for p in self.hf.parameters():  # a tied head counts once
            if id(p) not in seen:
                seen.add(id(p))
                n += p.numel()
        # int8 layers keep their weights as buffers (infill/model/hf/int8.py); a tied head counts as the embedding
        head = self.hf.lm_head if self.hf.config.tie_word_embeddings else None
        return n + sum(m.weight.numel() for m in self.hf.modules() if isinstance(m, Int8Linear) and m is not head)

    def set_cache_mode(self, mode: str, refresh_every: int | None = None) -> None:
        if mode not in CACHE_MODES:
            raise ValueError(f"unknown cache mode {mode!r} (use {' or '.join(CACHE_MODES)})")
        self.cache_mode = mode
        if refresh_every is not None:
            self.refresh_every = refresh_every

    # -- context -------------------------------------------------------------------------------

    def encode_segments(self, segments: list[list[int]]) -> list[list[int]]:
        return [list(s) for s in segments]  # nothing is cacheable on its own: the ids are the encoding

    def extend_segments(self, heads, ids):
        raise NotImplementedError("a bidirectional model's segments are not extended (exact_segment_cache is False)")

    def prefetch(self, context: list[int]) -> None:
        """Nothing: a bidirectional model keeps no context states across fills (its context depends on the fill's
        windows), so none can be encoded ahead (prefix_cache is False; CausalLM keeps them)."""

    def join_segments(self, rows: list[list[list[int]]]) -> HFContext:
        flat = [[t for seg in segs for t in seg] for segs in rows]
        L = max(1, max((len(f) for f in flat), default=1))
        ids = torch.full((len(rows), L), self.pad_id, dtype=torch.long)
        valid = torch.zeros((len(rows), L), dtype=torch.bool)
        for b, f in enumerate(flat):
            ids[b, : len(f)] = torch.tensor(f, dtype=torch.long)
            valid[b, : len(f)] = True
        return HFContext(ids.to(self.device), valid.to(self.device))

    def bind_context(self, context: HFContext, rows: torch.Tensor, pos: torch.Tensor) -> HFBound:
        rows = rows.to(self.device)
        return HFBound(context.ids.index_select(0, rows), pos.to(self.device), context.valid.index_select(0, rows))

    # -- the layout ----------------------------------------------------------------------------

    def _layout(self, ids, pos, valid, ctx: HFBound):
        """The whole sequence of each row: tokens, positions (+1: the lead sits at 0), real tokens
        (the windows last; with variable length, spare slots are not real and positions close up)."""
        R = ids.shape[0]
        dev = self.device
        if self.family.bos_leads:
            lead_ok = torch.ones(R, dtype=torch.bool, device=dev)
        else:  # only where the position before a slot would be missing (a window at the document's start)
            lead_ok = ((pos == 0) & valid).any(1) if self.family.shifted else torch.zeros(R, dtype=torch.bool, device=dev)
        lead = torch.full((R, 1), self.lead_id, dtype=torch.long, device=dev)
        tokens = torch.cat([lead, ctx.ids, ids], dim=1)
        positions = torch.cat([torch.zeros((R, 1), dtype=torch.long, device=dev), ctx.pos + 1, pos + 1], dim=1)
        ok = torch.cat([lead_ok[:, None], ctx.valid, valid], dim=1)
        if self.capabilities.expand_id is not None:
            ok[:, -ids.shape[1]:] &= ids != self.pad_id
            positions = close_up(positions, ok)
        return tokens, positions, ok

    def _predictors(self, seq_pos, seq_ok, pos, valid, offset: int) -> torch.Tensor:
        """[R, W] index in the sequence of the state whose logits predict each window slot."""
        if not self.family.shifted:
            return offset + torch.arange(pos.shape[1], device=pos.device).expand_as(pos)
        size = int(seq_pos.max()) + 1
        where = position_index(seq_pos, seq_ok, size)
        return where.gather(1, pos.clamp(0, size - 1))  # slot at p sits at p + 1; its predictor at p

    def _mask(self, key_ok, key_tokens, key_pos, query_pos, self_at: int) -> torch.Tensor:
        """The attention mask of queries at ``query_pos`` (keys ``self_at`` on) over the keys: full
        attention among real tokens, or, for a causal family, attention to real tokens at or before
        the query's position that are not masked slots (a masked slot stands in the layout only
        until its turn: nothing reads it)."""
        if not self.family.causal:
            return additive_mask(key_ok, query_pos.shape[1], self.dtype, self_at)
        return additive_mask(key_ok & (key_tokens != self.mask_id), query_pos.shape[1], self.dtype, self_at,
                             key_pos, query_pos)

    def _run(self, tokens, positions, mask, cache=None) -> torch.Tensor:
        """The last states, on the model's device (a model spread over several comes out on its last);
        a pass with no cache replayed from a CUDA graph where ``graphs`` is set (infill/model/hf/graphs.py)."""
        if cache is None and self.graphs is not None:
            return self.graphs(tokens, positions, mask)
        return self._forward(tokens, positions, mask, cache)

    def _forward(self, tokens, positions, mask, cache=None) -> torch.Tensor:
        if self.stacked is not None:
            return self.stacked(tokens, positions, mask, cache).to(self.device)
        out = self.backbone(input_ids=tokens, position_ids=positions, attention_mask=mask, cache=cache, use_cache=False)
        return out.last_hidden_state.to(self.device)

    @torch.inference_mode()
    def full_hidden(self, ids, pos, valid, ctx: HFBound, record: bool = False):
        """States [R, N, d] of the whole layout (and, with ``record``, every layer's keys and values)."""
        tokens, positions, ok = self._layout(ids, pos, valid, ctx)
        mask = self._mask(ok, tokens, positions, positions, 0)
        cache = _Record(len(self.backbone.layers)) if record else None
        h = self._run(tokens, positions, mask, cache)
        return h, tokens, positions, ok, cache

    @torch.inference_mode()
    def window_hidden(self, ids: torch.Tensor, pos: torch.Tensor, valid: torch.Tensor, ctx: HFBound) -> torch.Tensor:
        Lc, W = ctx.ids.shape[1], ids.shape[1]
        tokens, positions, ok = self._layout(ids, pos, valid, ctx)
        slot_pos = positions[:, -W:] - 1  # the windows' positions as the layout has them (closed up)
        if self.cache_mode != "approximate":
            return self._whole(ids, pos, valid, ctx, slot_pos, record=False)
        if (ctx.kv is None or (self.refresh_every and ctx.calls >= self.refresh_every)
                or not torch.equal(positions[:, : 1 + Lc], ctx.extra["positions"])):
            if ctx.kv is not None or not self._from_kept(tokens, positions, ok, ctx, slot_pos, valid):
                return self._whole(ids, pos, valid, ctx, slot_pos, record=True)
            h = self._on_kept(ids, slot_pos, ok, valid, ctx, record=True)  # the tokens that differ, with the windows
            self._settle(ctx, tokens, positions, ok, slot_pos, valid)
            ctx.calls = 1
            return h
        ctx.calls += 1
        return self._on_kept(ids, slot_pos, ok, valid, ctx)

    def _whole(self, ids, pos, valid, ctx: HFBound, slot_pos, record: bool) -> torch.Tensor:
        """The windows' states from the whole layout; with ``record``, its context keys and values
        kept in ``ctx`` (for the next steps) and in the model (for later fills)."""
        Lc, d = ctx.ids.shape[1], self.backbone.config.hidden_size
        h, tokens, positions, ok, rec = self.full_hidden(ids, pos, valid, ctx, record=record)
        self.whole_runs += 1
        if record:
            ctx.kv = [(k[:, :, : 1 + Lc], v[:, :, : 1 + Lc]) for k, v in rec.kv]
            ctx.calls = 1
            self._settle(ctx, tokens, positions, ok, slot_pos, valid)
            self._keep(ctx, ok[:, : 1 + Lc])
        idx = self._predictors(positions, ok, slot_pos, valid, 1 + Lc)
        return h.gather(1, idx[..., None].expand(-1, -1, d))

    def _on_kept(self, ids, slot_pos, ok, valid, ctx: HFBound, record: bool = False) -> torch.Tensor:
        """The windows' states from the anchors and the windows over the kept context; with
        ``record``, the anchors' fresh keys and values replace their kept ones in ``ctx``."""
        Lc, W, d = ctx.ids.shape[1], ids.shape[1], self.backbone.config.hidden_size
        a_ids, a_pos, a_ok, a_at = ctx.extra["ids"], ctx.extra["pos"], ctx.extra["ok"], ctx.extra["at"]
        A = a_ids.shape[1]
        q_tokens = torch.cat([a_ids, ids], dim=1)
        q_pos = torch.cat([a_pos, slot_pos + 1], dim=1)
        q_ok = torch.cat([a_ok, ok[:, -W:]], dim=1)
        prefix_ok = torch.cat([ctx.extra["lead_ok"][:, None], ctx.valid], dim=1) & ~a_at  # stale copies of the anchors out
        keys = torch.cat([prefix_ok, q_ok], dim=1)
        mask = self._mask(keys, torch.cat([ctx.extra["tokens"], q_tokens], dim=1),
                          torch.cat([ctx.extra["positions"], q_pos], dim=1), q_pos, 1 + Lc)
        cache = _Frozen(ctx.kv, record=record)
        h = self._run(q_tokens, q_pos, mask, cache)
        if record:
            order = ctx.extra["order"]
            for layer, ((k, v), (fk, fv)) in enumerate(zip(ctx.kv, cache.fresh)):
                at = order[:, None, :, None].expand(-1, k.shape[1], -1, k.shape[3]).to(k.device)
                keep = a_ok[:, None, :, None].to(k.device)
                ctx.kv[layer] = (k.scatter(2, at, torch.where(keep, fk[:, :, :A], k.gather(2, at))),
                                 v.scatter(2, at, torch.where(keep, fv[:, :, :A], v.gather(2, at))))
        idx = self._predictors(q_pos, q_ok, slot_pos, valid, A)
        return h.gather(1, idx[..., None].expand(-1, -1, d))

    def _settle(self, ctx: HFBound, tokens, positions, ok, slot_pos, valid, also=None) -> None:
        Lc = ctx.ids.shape[1]
        ctx.extra = self._anchors(positions, ok, slot_pos, valid, Lc, tokens, also)
        ctx.extra["tokens"], ctx.extra["positions"] = tokens[:, : 1 + Lc], positions[:, : 1 + Lc]

    # -- context kept across fills (approximate mode) -------------------------------------------

    def forget_kept(self) -> None:
        """Drop the contexts kept for later fills."""
        self._kept = []

    def _keep(self, ctx: HFBound, ok: torch.Tensor) -> None:
        """Keep each distinct row's real context (tokens, positions, keys and values) for later fills."""
        if not self.keep_layouts or not self._rotatable():
            return
        for r in range(ok.shape[0]):
            cols = ok[r].nonzero().flatten()
            tokens = ctx.extra["tokens"][r, cols]
            if any(torch.equal(tokens, k.tokens) for k in self._kept[-ok.shape[0]:]):
                continue
            kv = [(k[r : r + 1, :, cols.to(k.device)], v[r : r + 1, :, cols.to(v.device)]) for k, v in ctx.kv]
            self._kept = [*self._kept, _Kept(tokens, ctx.extra["positions"][r, cols], kv)][-self.keep_layouts :]

    def _from_kept(self, tokens, positions, ok, ctx: HFBound, slot_pos, valid) -> bool:
        """Bind ``ctx`` to kept contexts where every row shares enough with one (see the module's
        docstring): their keys and values at the shared tokens, the others to run as anchors at the
        first step. False (nothing changed) where some row does not."""
        if not self._kept or self.refresh_every == 1 or not self._rotatable():  # (1: the whole layout at every step)
            return False
        Lc = ctx.ids.shape[1]
        R = tokens.shape[0]
        ok_c = ok[:, : 1 + Lc]
        plans = []
        for r in range(R):
            cols = ok_c[r].nonzero().flatten()
            t, p = tokens[r, cols], positions[r, cols]
            best = None
            for kept in self._kept:
                m = min(len(t), len(kept.tokens))
                start, end = shared_ends(t, kept.tokens, p[:m] == kept.positions[:m])
                new = len(t) - start - end
                if new <= REUSE_NEW and start + end >= REUSE_SHARE * len(t) and (best is None or start + end > best[1] + best[2]):
                    best = (kept, start, end)
            if best is None:
                return False
            plans.append((cols, p, *best))
        kv, fresh = [], torch.zeros_like(ok_c)
        for layer in range(len(self.backbone.layers)):
            k0 = plans[0][2].kv[layer][0]
            shape = (R, k0.shape[1], 1 + Lc, k0.shape[3])
            kv.append((torch.zeros(shape, dtype=k0.dtype, device=k0.device), torch.zeros(shape, dtype=k0.dtype, device=k0.device)))
        for r, (cols, p, kept, start, end) in enumerate(plans):
            n, n0 = len(cols), len(kept.tokens)
            fresh[r, cols[start : n - end]] = True
            turn = p[n - end :] - kept.positions[n0 - end :]
            for (k, v), (k0, v0) in zip(kv, kept.kv):
                head, tail = cols[:start].to(k.device), cols[n - end :].to(k.device)
                k[r, :, head], v[r, :, head] = k0[0, :, :start], v0[0, :, :start]
                k[r, :, tail], v[r, :, tail] = self._turn(k0[0, :, n0 - end :], turn), v0[0, :, n0 - end :]
        ctx.kv = kv
        self._settle(ctx, tokens, positions, ok, slot_pos, valid, also=fresh)
        return True

    def _rotatable(self) -> bool:
        """Whether kept keys can be moved to other positions: plain rotary embeddings (no scaling)."""
        rope = self.backbone.rotary_emb
        return getattr(rope, "rope_type", "default") == "default" and float(getattr(rope, "attention_scaling", 1.0)) == 1.0

    def _turn(self, k: torch.Tensor, by: torch.Tensor) -> torch.Tensor:
        """Keys [kvH, n, D] rotated at their positions, moved ``by`` [n] positions (rotations compose)."""
        inv = self.backbone.rotary_emb.inv_freq.to(k.device, torch.float32)
        angle = by.to(k.device, torch.float32)[:, None] * inv[None]
        angle = torch.cat([angle, angle], -1)
        cos, sin = angle.cos(), angle.sin()
        half = k.shape[-1] // 2
        kf = k.float()
        rotated = torch.cat([-kf[..., half:], kf[..., :half]], dim=-1)
        return (kf * cos + rotated * sin).to(k.dtype)

    def _anchors(self, positions, ok, pos, valid, Lc, tokens, also=None) -> dict:
        """The context tokens (and the lead) that predict a window slot (shifted families): they run
        with the windows at every approximate step; with ``also`` [R, 1 + Lc], those columns too
        (a context's tokens that no kept keys and values stand for)."""
        R, dev = pos.shape[0], pos.device
        lead_ok = ok[:, 0]
        at = torch.zeros((R, 1 + Lc), dtype=torch.bool, device=dev)
        if self.family.shifted:
            idx = self._predictors(positions, ok, pos, valid, 1 + Lc)
            is_anchor = torch.zeros((R, 1 + Lc + 1), dtype=torch.bool, device=dev)
            src = (idx < 1 + Lc) & valid
            is_anchor.scatter_(1, torch.where(src, idx, 1 + Lc), True)
            at = is_anchor[:, : 1 + Lc]
        if also is not None:
            at = at | also
        A = max(1 if self.family.shifted else 0, int(at.sum(1).max()))
        order = torch.argsort((~at).to(torch.int8), dim=1, stable=True)[:, :A]  # anchors first, in order
        a_ok = at.gather(1, order)
        return {"ids": tokens.gather(1, order), "pos": positions.gather(1, order), "ok": a_ok, "at": at, "lead_ok": lead_ok,
                "order": order}

    # -- logits --------------------------------------------------------------------------------

    @torch.inference_mode()
    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        out = self.raw_logits(hidden)
        if len(self._end_ids) > 1:  # pad takes the end tokens' probability
            out[..., self._pad_id] = torch.logsumexp(out[..., self._end_ids].float(), dim=-1).to(out.dtype)
        return out.masked_fill(self._banned, float("-inf"))

    @torch.inference_mode()
    def raw_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """The head's logits as the checkpoint gives them (no vocabulary or special-token rules), on
        the model's device (a placement plan puts the head there; where it could not, they move)."""
        return self.hf.lm_head(hidden.to(self.hf.lm_head.weight.device)).to(self.device)
