"""A causal (autoregressive) Llama / Qwen2 checkpoint behind the seam, decoded incrementally.

A causal model is the degenerate case of masked diffusion: a slot's prediction may read only the
tokens before it, so the engine commits one slot per row per step, its holes in document order
(``capabilities.left_to_right``; the sampler's frontier schedule). That makes every state final
once computed, and this model computes each one once:

* the context: the lead and the context tokens before the last window slot of a row (text after
  it is never read), run once per fill; a row's keys and values are kept in a small cache keyed
  on its tokens and positions, so the next fill of a document whose prefix grew by a keystroke
  runs only the new tokens (the prefix's states are exactly the pretrained model's), and its row
  takes the place of the one it grew from (so that many documents typed in at once each keep one);
* the windows: each step runs only the slots committed since the last step (usually one per
  row), appending their keys and values; a slot the sampler masks again (a repair) drops its
  row's window states, which are run again from the committed slots. Rows taken from one bound
  context into a joined one (``CausalBound.take``, ``join``: infill serve's batch, as requests
  join and leave it) keep their window states.

With a window adapter (infill/model/hf/adapter.py, ``self.adapter``), the context is still the
pretrained network's (kept and reused as above), and the adapter is on for the window's slots and
for the context token before each hole: that token runs again, adapted, once per fill (in the
fill's first window call, with the slots drafted there), and its adapted keys, values and state
take the pretrained ones' place in the fill's state (never in the kept rows), as the adapter was
trained. So its pretrained states are never read in that fill: where the kept rows hold all of a
context but that token (a keystroke that changed only the token before the cursor), it is not run
pretrained at all, and the kept row stays the one without it.

``continuation_logprob`` scores whole texts after a context (the context's states from the same
cache): how the engine ranks candidates by the text after the hole, which no slot could read.

``window_hidden`` returns, for each slot, the state before it (shifted logits): the previous
slot's, or the context token's before a hole. Only the states of slots whose predecessors are
committed are meaningful; those are the only ones a frontier schedule reads.

Exact for one hole. With several, the text between two holes is encoded once, before any fill:
a later hole sees the earlier holes' committed tokens, but the text between them does not.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from dataclasses import dataclass, replace

import torch

from infill.model.context_cache import MIN_REUSE
from infill.model.hf.model import HFContext, HFDiffusionModel, additive_mask, position_index

PREFIX_TOKENS = 16384  # context tokens whose states are kept across fills, in all, unless the engine sets
# another number (set_context_cache: EngineConfig.context_cache_tokens): the documents being edited, a
# row's entry about 23 MB per 1k tokens for the default model in bf16; the oldest go first, and the
# latest row is always kept
SUPERSEDED = 16  # a kept row that a new row repeats all but at most this many tokens of (and at least half
# of) is dropped for it (the document's next keystroke: its prefix grew, its last tokens changed); from
# the new row it is at most that many tokens away. Short documents that merely begin alike keep theirs


class _Appending:
    """A transformers cache: kept keys and values before this call's fresh ones, which are kept in
    ``fresh`` for the caller to store."""

    def __init__(self, kv: list[tuple[torch.Tensor, torch.Tensor]]):
        self.kv = kv
        self.fresh: list = [None] * len(kv)

    def update(self, key_states, value_states, layer_idx, *args, **kwargs):
        self.fresh[layer_idx] = (key_states, value_states)
        k, v = self.kv[layer_idx]
        return torch.cat([k, key_states], dim=2), torch.cat([v, value_states], dim=2)

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.kv[0][0].shape[2]


class _InPlace:
    """A transformers cache over a fill's preallocated keys and values (per layer [R, kvH, K, D]):
    each call's fresh ones are written at their places (``rows``, ``at``: where the queries that
    ``real`` [R, M] marks go) and the whole buffers are read, so a step copies no cache. The
    queries are found once per call (integer indices, moved to each layer's device as needed)."""

    def __init__(self, kv: list[tuple[torch.Tensor, torch.Tensor]], real: torch.Tensor, rows: torch.Tensor, at: torch.Tensor):
        self.kv, self.queries, self.rows, self.at = kv, real.nonzero(as_tuple=True), rows, at

    def update(self, key_states, value_states, layer_idx, *args, **kwargs):
        k, v = self.kv[layer_idx]
        rows, at, q_rows, q_cols = (t.to(k.device) for t in (self.rows, self.at, *self.queries))
        k[rows, :, at] = key_states.transpose(1, 2)[q_rows, q_cols]
        v[rows, :, at] = value_states.transpose(1, 2)[q_rows, q_cols]
        return k, v

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.kv[0][0].shape[2]


@dataclass
class _Row:
    """One row's encoded context: per layer keys and values [1, kvH, L, D], states [L, d]."""

    tokens: torch.Tensor  # [L]
    positions: torch.Tensor  # [L]
    kv: list[tuple[torch.Tensor, torch.Tensor]]
    hidden: torch.Tensor


@dataclass
class _State:
    """The rows' keys and values (context then one place per window slot) and what was fed."""

    kv: list[tuple[torch.Tensor, torch.Tensor]]  # per layer [R, kvH, Lk + W, D]
    key_pos: torch.Tensor  # [R, Lk + W]
    key_ok: torch.Tensor  # [R, Lk]: real context keys
    ctx_hidden: torch.Tensor  # [R, Lk, d]
    win_hidden: torch.Tensor  # [R, W, d]
    fed: torch.Tensor  # [R, W] slots whose keys, values and states are in place
    fed_ids: torch.Tensor  # [R, W] the tokens they were fed as
    before: torch.Tensor  # [R, W] index of the predicting state: < W a slot's, else W + a context key's
    # With an adapter, the context tokens to run again adapted at the next call (CausalLM._anchors):
    # (ids, context indices, real) [R, A], None once run
    lead: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None

    def select(self, rows: torch.Tensor) -> "_State":
        pick = lambda t: t.index_select(0, rows.to(t.device))  # noqa: E731 (keys and values: on their layer's device)
        return _State([(pick(k), pick(v)) for k, v in self.kv], pick(self.key_pos), pick(self.key_ok),
                      pick(self.ctx_hidden), pick(self.win_hidden), pick(self.fed), pick(self.fed_ids), pick(self.before),
                      None if self.lead is None else tuple(pick(t) for t in self.lead))


@dataclass
class CausalBound:
    ids: torch.Tensor  # [R, Lc]
    pos: torch.Tensor  # [R, Lc]
    valid: torch.Tensor  # [R, Lc]
    state: _State | None = None
    # Where join made it: per part, its rows and the state they are held in (None: none yet), which
    # the first window_hidden gathers into ``state`` (infill/engine/stepper.py: a slot's windows go
    # on from where they were, not run again, when another slot joins or leaves)
    parts: list[tuple[int, _State | None, torch.Tensor | None]] | None = None
    kept: tuple[_State, torch.Tensor] | None = None  # take's: these rows' state, held in another bound's

    def select(self, rows: torch.Tensor) -> "CausalBound":
        pick = lambda t: t.index_select(0, rows)  # noqa: E731
        return CausalBound(pick(self.ids), pick(self.pos), pick(self.valid), None if self.state is None else self.state.select(rows))

    def take(self, rows: torch.Tensor) -> "CausalBound":
        """Rows ``rows`` of this bound context with their states as they are, to be joined (nothing copied yet)."""
        pick = lambda t: t.index_select(0, rows)  # noqa: E731
        return CausalBound(pick(self.ids), pick(self.pos), pick(self.valid), kept=None if self.state is None else (self.state, rows))

    @staticmethod
    def join(parts: list["CausalBound"], width: int = 0) -> "CausalBound":
        """The rows of several bound contexts as one (each padded to the longest, its padding not
        valid); the states that ``take`` kept are gathered at the first model call, one copy."""
        lc = max(p.ids.shape[1] for p in parts)

        def cat(name: str, fill) -> torch.Tensor:
            return torch.cat([torch.nn.functional.pad(getattr(p, name), (0, lc - p.ids.shape[1]), value=fill) for p in parts])

        kept = [(p.ids.shape[0], *(p.kept or (None, None))) for p in parts]
        return CausalBound(cat("ids", 0), cat("pos", 0), cat("valid", False), parts=kept)


def _before(pos: torch.Tensor, valid: torch.Tensor, key_pos: torch.Tensor, key_ok: torch.Tensor) -> torch.Tensor:
    """[R, W]: for each window slot, the index of the state that predicts it, the one at the layout
    position before it (< W: a window slot's; W + i: context key i's)."""
    all_pos = torch.cat([pos + 1, key_pos], dim=1)
    all_ok = torch.cat([valid, key_ok], dim=1)
    size = int(all_pos.max()) + 2
    return position_index(all_pos, all_ok, size).gather(1, pos.clamp_min(0))  # slot at p + 1, predictor at p


class CausalLM(HFDiffusionModel):
    """HFDiffusionModel for a causal family (families.Family.causal), with incremental states."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._rows: OrderedDict[int, _Row] = OrderedDict()
        self._serial = 0
        self.context_cache_tokens = PREFIX_TOKENS
        self.capabilities = replace(self.capabilities, prefix_cache=True)
        self.adapter = None  # a WindowAdapter (infill/model/hf/adapter.py): set_adapter

    def set_adapter(self, adapter) -> None:
        """Adapt the window with ``adapter`` (hooked onto the network already), or nothing (None); the
        engine shows an adapted model as many lines further down as the adapter was trained with."""
        self.adapter = adapter
        self.capabilities = replace(self.capabilities, suffix_lines=adapter.config.suffix_lines if adapter is not None else 0)

    def _adapted(self):
        return self.adapter.on() if self.adapter is not None else contextlib.nullcontext()

    def set_context_cache(self, tokens: int) -> None:
        """Keep at most ``tokens`` context tokens' states across fills (the latest row is always kept)."""
        self.context_cache_tokens = tokens
        self._shed()

    def forget_contexts(self) -> None:
        """Drop every kept context state: the next fill encodes its context from nothing."""
        self._rows.clear()

    @torch.inference_mode()
    def prefetch(self, context: list[int]) -> None:
        """Encode ``context`` into the kept rows, at the positions a fill's context takes (from 1, as
        :meth:`continuation_logprob` reads it), reusing the longest kept run of it."""
        if context:
            self._encode_row(torch.tensor(context, dtype=torch.long, device=self.device),
                             torch.arange(1, len(context) + 1, device=self.device))

    def bind_context(self, context: HFContext, rows: torch.Tensor, pos: torch.Tensor) -> CausalBound:
        rows = rows.to(self.device)
        return CausalBound(context.ids.index_select(0, rows), pos.to(self.device), context.valid.index_select(0, rows))

    def set_cache_mode(self, mode: str, refresh_every: int | None = None) -> None:
        super().set_cache_mode(mode, refresh_every)  # checked; a causal model's states are final either way

    # -- context ---------------------------------------------------------------------------------

    def _lookup(self, tokens: torch.Tensor, positions: torch.Tensor) -> tuple[int | None, int]:
        """The cached row that shares the longest run of equal tokens at equal positions with a
        row's context (the prefix the document had at an earlier fill), and that run's length;
        (None, 0) where that run is only the context's start (shorter than MIN_REUSE tokens and
        than half the context): so few tokens' reuse saves nothing, and it would make a fill hang
        on what another document began with (a context run after a kept part rounds otherwise)."""
        best, n = None, 0
        for key, row in self._rows.items():
            m = min(len(row.tokens), len(tokens))
            same = (row.tokens[:m] == tokens[:m]) & (row.positions[:m] == positions[:m])
            k = m if bool(same.all()) else int((~same).nonzero()[0])
            if k > n:
                best, n = key, k
        return (best, n) if n >= MIN_REUSE or 2 * n >= len(tokens) else (None, 0)

    def _encode_row(self, tokens: torch.Tensor, positions: torch.Tensor,
                    found: tuple[int | None, int] | None = None) -> _Row:
        """The states of one row's context, reusing the longest cached run (``found``: what
        :meth:`_lookup` gave for it, where the caller has it)."""
        if len(tokens) == 0:
            return self._empty_row()
        best, n = found if found is not None else self._lookup(tokens, positions)
        if best is not None and n == len(tokens):
            return self._cached(tokens, positions, best, n)
        row = self._rows[best] if best is not None else self._empty_row()
        past, past_h = [(k[:, :, :n], v[:, :, :n]) for k, v in row.kv], row.hidden[:n]
        cache = _Appending(past)
        q_pos = positions[None, n:]
        mask = additive_mask(torch.ones((1, len(tokens)), dtype=torch.bool, device=self.device), len(tokens) - n,
                             self.dtype, n, positions[None], q_pos)
        h = self._run(tokens[None, n:], q_pos, mask, cache)[0]
        kv = [(torch.cat([k, fk], 2), torch.cat([v, fv], 2)) for (k, v), (fk, fv) in zip(past, cache.fresh)]
        out = _Row(tokens, positions, kv, torch.cat([past_h, h]))
        self._keep(out, best, n)
        return out

    def _encode_rows(self, contexts: list[tuple[torch.Tensor, torch.Tensor]], spare: list[bool] | None = None) -> list[_Row]:
        """Each context's states, as :meth:`_encode_row` makes them, the tokens that no cached row
        holds run for all contexts in one model call (a context that repeats an earlier one is
        taken from it: a request's candidate rows). A context that ``spare`` marks, of which a
        cached row holds all but the last token, is not run: its row holds the cached tokens' states
        alone (:meth:`_cached`), that token's place left for the adapter's run of it (:meth:`_start`)."""
        out: list[_Row | None] = [None] * len(contexts)
        todo: list[tuple[int, torch.Tensor, torch.Tensor, int | None, int]] = []
        same: dict[int, int] = {}  # a context -> the earlier one it repeats
        for i, (tokens, positions) in enumerate(contexts):
            twin = next((j for j, t, p, _, _ in todo if torch.equal(t, tokens) and torch.equal(p, positions)), None)
            if twin is not None:
                same[i] = twin
                continue
            best, n = self._lookup(tokens, positions) if len(tokens) else (None, 0)
            if n == len(tokens):
                out[i] = self._encode_row(tokens, positions, (best, n))  # cached whole (or empty)
            elif spare is not None and spare[i] and best is not None and n == len(tokens) - 1:
                out[i] = self._cached(tokens, positions, best, n)
            else:
                todo.append((i, tokens, positions, best, n))
        if len(todo) == 1:
            i, tokens, positions, best, n = todo[0]
            out[i] = self._encode_row(tokens, positions, (best, n))
        elif todo:
            self._run_contexts(todo, out)
        for i, j in same.items():
            out[i] = out[j]
        return out

    def _cached(self, tokens: torch.Tensor, positions: torch.Tensor, best: int, n: int) -> _Row:
        """A row of ``tokens`` from cached row ``best``, which holds their first ``n``: its keys,
        values and states of those (views, nothing copied, nothing kept; fewer than the tokens
        where ``n`` is), the row marked as the latest used."""
        row = self._rows[best]
        self._rows.move_to_end(best)
        return _Row(tokens, positions, [(k[:, :, :n], v[:, :, :n]) for k, v in row.kv], row.hidden[:n])

    def _run_contexts(self, todo: list[tuple[int, torch.Tensor, torch.Tensor, int | None, int]], out: list) -> None:
        """Run contexts ``todo`` ((index, tokens, positions, cached row, tokens it holds)) in one
        model call, each after its cached part (padded to the longest), and cache their rows."""
        k, L = len(todo), max(len(t) for _, t, _, _, _ in todo)
        C = max(len(t) - n for _, t, _, _, n in todo)
        dev = self.device
        st = self._room(torch.zeros((k, 0), dtype=torch.long, device=dev), L)
        q_ids = torch.full((k, C), self.pad_id, dtype=torch.long, device=dev)
        q_pos = torch.zeros((k, C), dtype=torch.long, device=dev)
        q_ok = torch.zeros((k, C), dtype=torch.bool, device=dev)
        at = torch.zeros((k, C), dtype=torch.long, device=dev)
        for r, (_, tokens, positions, best, n) in enumerate(todo):
            row = self._rows[best] if best is not None else self._empty_row()
            self._put_kv(st, r, [(kk[0], vv[0]) for kk, vv in row.kv], n)
            st.ctx_hidden[r, :n] = row.hidden[:n]
            c = len(tokens) - n
            st.key_pos[r, : len(tokens)], st.key_ok[r, : len(tokens)] = positions, True
            q_ids[r, :c], q_pos[r, :c], q_ok[r, :c] = tokens[n:], positions[n:], True
            q_pos[r, c:] = positions[-1]  # padding: it sees the row's keys (no row all masked); not kept
            at[r, :c] = torch.arange(n, len(tokens), device=dev)
        mask = additive_mask(st.key_ok, C, self.dtype, L, st.key_pos, q_pos)
        rows = torch.arange(k, device=dev)[:, None].expand(k, C)[q_ok]
        h = self._run(q_ids, q_pos, mask, _InPlace(st.kv, q_ok, rows, at[q_ok]))
        for r, (i, tokens, positions, best, n) in enumerate(todo):
            Lr = len(tokens)
            st.ctx_hidden[r, n:Lr] = h[r, : Lr - n]
            kv = [(kk[r : r + 1, :, :Lr].clone(), vv[r : r + 1, :, :Lr].clone()) for kk, vv in st.kv]
            out[i] = _Row(tokens, positions, kv, st.ctx_hidden[r, :Lr].clone())
            self._keep(out[i], best, n)

    def _keep(self, row: _Row, best: int | None, n: int) -> None:
        """Cache ``row``, which repeats ``n`` tokens of cached row ``best``: that row goes where this
        one supersedes it (SUPERSEDED), and the oldest rows go past the cache's size."""
        if best is not None and best in self._rows:
            old = len(self._rows[best].tokens)
            if n >= old - SUPERSEDED and 2 * n >= old:
                del self._rows[best]
        self._serial += 1
        self._rows[self._serial] = row
        self._shed()

    def _shed(self) -> None:
        while len(self._rows) > 1 and sum(len(r.tokens) for r in self._rows.values()) > self.context_cache_tokens:
            self._rows.popitem(last=False)

    def _empty_row(self) -> _Row:
        cfg = self.backbone.config
        shape = (1, cfg.num_key_value_heads, 0, cfg.hidden_size // cfg.num_attention_heads)
        empty = [torch.zeros(shape, dtype=self.dtype, device=d) for d in self.layer_devices]
        none = torch.zeros(0, dtype=torch.long, device=self.device)
        return _Row(none, none, [(e, e) for e in empty], torch.zeros((0, cfg.hidden_size), dtype=self.dtype, device=self.device))

    def _start(self, ctx: CausalBound, pos: torch.Tensor, valid: torch.Tensor) -> _State:
        """Each row's context (what precedes its last slot) encoded, and room for its windows.

        With an adapter, a row's last context token predicts its last hole's first slot, so the
        first window call runs it again adapted (:meth:`_anchors`) and its pretrained keys, values
        and state are never read in this fill: where a cached row holds all but that token (a
        keystroke that changed only the token before the cursor), it is not run unadapted first
        (:meth:`_encode_rows`' ``spare``), and the cache keeps the row without it, which the next
        keystroke's context starts with as well."""
        contexts = self._context_tokens(ctx, pos, valid)
        spare = None
        if self.adapter is not None:
            spare = [len(p) > 0 and bool((valid[r] & (pos[r] == p[-1])).any()) for r, (_, p) in enumerate(contexts)]
        rows = self._encode_rows(contexts, spare)
        st = self._room(pos, max(1, max(len(x.tokens) for x in rows)))
        for r, row in enumerate(rows):
            self._put_context(st, r, row)
        st.before = _before(pos, valid, st.key_pos[:, : st.key_ok.shape[1]], st.key_ok)
        self._anchors(st, valid, [row.tokens for row in rows])
        return st

    def _anchors(self, st: _State, valid: torch.Tensor, tokens: list[torch.Tensor | None]) -> None:
        """With an adapter: each row's context tokens whose states predict a window slot (the token
        before each hole), to run again with it on at the next call (:meth:`_feed`), after the
        context before them; their adapted keys, values and states then replace the pretrained ones
        in ``st``. ``tokens``: each row's context tokens (None: a row whose state was adapted already)."""
        if self.adapter is None:
            return
        W = st.win_hidden.shape[1]
        anchors = [sorted(i for i in set((st.before[r][valid[r] & (st.before[r] >= W)] - W).tolist()) if st.key_ok[r, i])
                   if t is not None else [] for r, t in enumerate(tokens)]
        A = max(map(len, anchors))
        if A == 0:
            return
        R, dev = len(anchors), self.device
        ids = torch.full((R, A), self.pad_id, dtype=torch.long, device=dev)
        at = torch.zeros((R, A), dtype=torch.long, device=dev)
        ok = torch.zeros((R, A), dtype=torch.bool, device=dev)
        for r, idx in enumerate(anchors):
            if idx:
                at[r] = idx[-1]  # padding: a real anchor's place (it sees that one's keys; not kept)
                at[r, : len(idx)] = torch.tensor(idx, device=dev)
                ids[r, : len(idx)] = tokens[r][idx]
                ok[r, : len(idx)] = True
            else:
                at[r] = max(0, int(st.key_ok[r].sum()) - 1)  # a row with none: padding too
        st.lead = (ids, at, ok)

    def _context_tokens(self, ctx: CausalBound, pos: torch.Tensor, valid: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Each row's context as (tokens, positions) in layout order: what precedes its last slot."""
        tokens, positions, ok = self._layout(torch.full_like(pos, self.mask_id), pos, valid, ctx)
        n_ctx = 1 + ctx.ids.shape[1]
        tokens, positions, ok = tokens[:, :n_ctx], positions[:, :n_ctx], ok[:, :n_ctx]
        last = torch.where(valid, pos + 1, -1).max(1).values  # a row's last slot's layout position
        out = []
        for r in range(pos.shape[0]):
            keep = (ok[r] & (positions[r] < last[r])).nonzero().flatten()
            order = keep[torch.argsort(positions[r, keep])]
            out.append((tokens[r, order], positions[r, order]))
        return out

    def _context_rows(self, ctx: CausalBound, pos: torch.Tensor, valid: torch.Tensor) -> list[_Row]:
        """Each row's context encoded (:meth:`_encode_rows`: from the cache where it can)."""
        return self._encode_rows(self._context_tokens(ctx, pos, valid))

    def _room(self, pos: torch.Tensor, Lk: int) -> _State:
        """A state for rows whose window slots are at ``pos`` [R, W], with ``Lk`` context keys: its
        keys and values not yet written (:meth:`_put_kv` writes each row whole), the rest empty
        (``before`` is the caller's to set, once the keys are in place)."""
        R, W = pos.shape
        cfg = self.backbone.config
        heads, d = cfg.num_key_value_heads, cfg.hidden_size // cfg.num_attention_heads
        kv = [(torch.empty((R, heads, Lk + W, d), dtype=self.dtype, device=dev),
               torch.empty((R, heads, Lk + W, d), dtype=self.dtype, device=dev)) for dev in self.layer_devices]
        key_pos = torch.zeros((R, Lk + W), dtype=torch.long, device=self.device)
        key_pos[:, Lk:] = pos + 1
        zeros = lambda *shape, dtype=self.dtype: torch.zeros(shape, dtype=dtype, device=self.device)  # noqa: E731
        return _State(kv, key_pos, zeros(R, Lk, dtype=torch.bool), zeros(R, Lk, cfg.hidden_size), zeros(R, W, cfg.hidden_size),
                      zeros(R, W, dtype=torch.bool), torch.zeros_like(pos), torch.zeros_like(pos))

    @staticmethod
    def _put_kv(st: _State, r: int, kv: list[tuple[torch.Tensor, torch.Tensor]], L: int, w: int = 0) -> None:
        """Write row r's keys and values whole, one copy: ``kv`` per layer [kvH, >= L + w, D], its
        first L keys the context's, the w after them window slots'; the rest zero (masked, but read)."""
        Lk = st.key_ok.shape[1]
        for (k, v), (sk, sv) in zip(st.kv, kv):
            for dst, src in ((k, sk), (v, sv)):
                dst[r, :, :L].copy_(src[:, :L])
                dst[r, :, L:Lk].zero_()
                dst[r, :, Lk : Lk + w].copy_(src[:, L : L + w])
                dst[r, :, Lk + w :].zero_()

    def _put_context(self, st: _State, r: int, row: _Row) -> None:
        """Row r of ``st``: the context ``row``, no window slot fed (a spared row's last token's
        keys, values and state zero, until its adapted run writes them)."""
        L, n = len(row.tokens), len(row.hidden)
        self._put_kv(st, r, [(k[0], v[0]) for k, v in row.kv], n)
        st.key_pos[r, :L], st.key_ok[r, :L], st.ctx_hidden[r, :n] = row.positions, True, row.hidden

    def _gather(self, ctx: CausalBound, pos: torch.Tensor, valid: torch.Tensor) -> _State:
        """The state of a joined bound context (CausalBound.join): each part's rows copied from the
        state that held them, windows and all (what they had fed stays fed), the others' contexts
        encoded (:meth:`_context_rows`); each row written once."""
        if all(state is None for _, state, _ in ctx.parts):
            return self._start(ctx, pos, valid)
        fresh, at, kept = [], 0, []
        for n, state, rows in ctx.parts:
            if state is None:
                fresh.extend(range(at, at + n))
            else:
                kept.extend((at + j, state, int(r)) for j, r in enumerate(rows.tolist()))
            at += n
        encoded = []
        if fresh:
            f = torch.tensor(fresh, dtype=torch.long, device=self.device)
            sub = CausalBound(ctx.ids.index_select(0, f), ctx.pos.index_select(0, f), ctx.valid.index_select(0, f))
            encoded = self._context_rows(sub, pos.index_select(0, f), valid.index_select(0, f))
        Lk = max([1] + [len(row.tokens) for row in encoded] + [src.key_ok.shape[1] for _, src, _ in kept])
        st = self._room(pos, Lk)
        for to, row in zip(fresh, encoded):
            self._put_context(st, to, row)
        for to, src, r in kept:
            L, w = src.key_ok.shape[1], min(pos.shape[1], src.fed.shape[1])
            self._put_kv(st, to, [(k[r], v[r]) for k, v in src.kv], L, w)
            st.key_pos[to, :L], st.key_ok[to, :L], st.ctx_hidden[to, :L] = src.key_pos[r, :L], src.key_ok[r], src.ctx_hidden[r]
            st.win_hidden[to, :w], st.fed[to, :w], st.fed_ids[to, :w] = src.win_hidden[r, :w], src.fed[r, :w], src.fed_ids[r, :w]
        st.before = _before(pos, valid, st.key_pos[:, :Lk], st.key_ok)
        fresh_tokens: list[torch.Tensor | None] = [None] * pos.shape[0]
        for to, row in zip(fresh, encoded):
            fresh_tokens[to] = row.tokens
        self._anchors(st, valid, fresh_tokens)
        return st

    # -- windows ---------------------------------------------------------------------------------

    def _feed(self, st: _State, ids: torch.Tensor, pos: torch.Tensor, new: torch.Tensor) -> None:
        """Run the slots ``new`` [R, W] (committed, not yet run), attending to the context and the
        slots before them, and keep their keys, values and states; the context tokens still to run
        adapted (``st.lead``) go first in the same call."""
        R, W = ids.shape
        Lk = st.key_ok.shape[1]
        M = int(new.sum(1).max())
        order = torch.argsort((~new).to(torch.int8), dim=1, stable=True)[:, :M]  # each row's new slots first, in order
        q_ok = new.gather(1, order)
        q_ids = torch.where(q_ok, ids.gather(1, order), self.pad_id)
        q_pos = pos.gather(1, order) + 1
        at = Lk + order
        if st.lead is not None:  # the anchors first: a slot after one reads its adapted keys (written in place)
            a_ids, a_at, a_ok = st.lead
            q_ids, q_ok = torch.cat([a_ids, q_ids], 1), torch.cat([a_ok, q_ok], 1)
            q_pos, at = torch.cat([st.key_pos.gather(1, a_at), q_pos], 1), torch.cat([a_at, at], 1)
        key_ok = torch.cat([st.key_ok, st.fed | new], dim=1)  # each new slot's own key is written in place
        mask = additive_mask(key_ok, q_ids.shape[1], self.dtype, Lk + W, st.key_pos, q_pos)
        rows = torch.arange(R, device=ids.device)[:, None].expand(R, q_ids.shape[1])[q_ok]
        with self._adapted():
            h = self._run(q_ids, q_pos, mask, _InPlace(st.kv, q_ok, rows, at[q_ok]))
        real, where = h[q_ok], at[q_ok]
        win = where >= Lk
        st.win_hidden[rows[win], where[win] - Lk] = real[win]
        st.ctx_hidden[rows[~win], where[~win]] = real[~win]
        st.lead = None
        st.fed |= new
        st.fed_ids = torch.where(new, ids, st.fed_ids)

    @torch.inference_mode()
    def window_hidden(self, ids: torch.Tensor, pos: torch.Tensor, valid: torch.Tensor, ctx: CausalBound) -> torch.Tensor:
        if ctx.state is None:
            ctx.state = self._gather(ctx, pos, valid) if ctx.parts else self._start(ctx, pos, valid)
        st = ctx.state
        committed = valid & (ids != self.mask_id) & (ids != self.pad_id)
        # A slot masked again or changed (a repair, a draft not taken), or a slot committed before a fed
        # one: the fed slots from there on are stale (the states before it read only earlier tokens).
        never = torch.iinfo(pos.dtype).max
        changed = torch.where(st.fed & (~committed | (ids != st.fed_ids)), pos, never).min(1).values
        first_new = torch.where(committed & ~st.fed, pos, never).min(1).values
        st.fed &= pos < torch.minimum(changed, first_new)[:, None]
        new = committed & ~st.fed
        if new.any() or st.lead is not None:
            self._feed(st, ids, pos, new)
        states = torch.cat([st.win_hidden, st.ctx_hidden], dim=1)
        return states.gather(1, st.before[..., None].expand(-1, -1, states.shape[-1]))

    # -- scoring ---------------------------------------------------------------------------------

    @torch.inference_mode()
    def continuation_logprob(self, context: list[int], continuations: list[list[int]]) -> list[float]:
        """Per continuation, the summed log-probability of its tokens read after ``context`` (the
        checkpoint's own distribution: no vocabulary rules). The context's states come from the
        row cache, where a fill of the same context left them."""
        dev = self.device
        if context:
            tokens, positions = torch.tensor(context, dtype=torch.long, device=dev), torch.arange(1, len(context) + 1, device=dev)
        else:  # nothing before: the lead token predicts the first
            tokens, positions = torch.tensor([self.lead_id], device=dev), torch.zeros(1, dtype=torch.long, device=dev)
        row = self._encode_row(tokens, positions)
        R, M, L = len(continuations), max(1, max(map(len, continuations))), len(tokens)
        ids = torch.full((R, M), self.pad_id, dtype=torch.long, device=dev)
        ok = torch.zeros((R, M), dtype=torch.bool, device=dev)
        for r, c in enumerate(continuations):
            ids[r, : len(c)] = torch.tensor(c, dtype=torch.long)
            ok[r, : len(c)] = True
        q_pos = (positions[-1] + 1 + torch.arange(M, device=dev)).expand(R, M)
        key_ok = torch.cat([torch.ones((R, L), dtype=torch.bool, device=dev), ok], dim=1)
        key_pos = torch.cat([positions.expand(R, L), q_pos], dim=1)
        cache = _Appending([(k.expand(R, -1, -1, -1), v.expand(R, -1, -1, -1)) for k, v in row.kv])
        h = self._run(ids, q_pos, additive_mask(key_ok, M, self.dtype, L, key_pos, q_pos), cache)
        states = torch.cat([row.hidden[-1:].expand(R, 1, -1), h[:, :-1]], dim=1)  # the state before each token
        logp = torch.log_softmax(self.raw_logits(states).float(), dim=-1).gather(2, ids[..., None])[..., 0]
        return logp.masked_fill(~ok, 0.0).sum(1).tolist()
