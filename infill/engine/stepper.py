"""Step-level filling: requests join a running denoising batch between steps and leave it when done.

``Engine.fill_batch`` fills a fixed set of requests from start to end. A server that many editors
share needs more: a request that comes while others are denoising should not wait for them to
finish. The :class:`Stepper` keeps a live set of :class:`Slot` s, one per request, and advances
all of them one denoising step at a time with **one** model call over all their candidate rows:

* ``add(request)`` prepares the request (the engine's ``prepare``, scaffold and ``layout``), makes
  its rows and its own :class:`~infill.decode.sampler.Denoiser`; its rows join at the next
  ``step()``.
* ``step()`` drops cancelled slots (their rows leave before the model call), asks each slot
  whether it needs another call (a full draft its constraint sends back is masked again), joins
  the rows that still have masked slots of every slot into one batch (context rows of different
  lengths and windows of different widths are padded; the model masks both), runs
  ``window_hidden`` once and ``logits`` once over all of them, and hands each slot its part.
  A slot whose rows are all done is finished (the engine's ``Finisher``); a constrained fill
  judged invalid goes on as a stricter retry round (the engine's ``strict_request`` and
  ``merge_retry``), its new rows joining at the next step as a new request's would. A slot under a
  left-to-right schedule whose every candidate already scores under its request's ``min_score``
  leaves at that step with the engine's result for it (``Engine.sunk``, ``Engine.floor_result``).
* What joins is exactly a request's candidate rows, at any step boundary, whatever the others'
  contexts, holes, window widths, step counts or sampling options (each slot keeps its own
  schedule, random generators, constraint and deadline).

Each round binds its request's context once (``context_cache.encode``, ``bind_context``); when a
slot joins, leaves or starts a round, the live set's bound context is the slots' joined
(``Bound.join`` where the model's bound contexts have it, as ours do: a copy, padded to the longest
context, with room for the windows; otherwise every live context is encoded, joined and bound
again through the seam), and it is narrowed with ``Bound.select`` when only some rows finish, as
the sampler's ActiveRows does. Where a bound context keeps what a step computed (``Bound.take``:
a causal model's window states), the rows that were running join with it, so that they go on
from where they were and are not run again.

Everything of a request lives in its Slot (state per request, nothing shared but the model and
the context cache), so a replica can be wrapped (e.g. by a Ray Serve deployment) unchanged.
A Stepper is not thread-safe: one thread owns it (infill/serve/batcher.py).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Callable

import torch

from infill.decode.sampler import ActiveRows, CancelFlag, Denoiser, NoConstraint, Windows
from infill.engine.fill import Behind, Engine, _Layout, _Prepared, needs_retry
from infill.engine.finish import Finisher, as_result, join_scaffold, merge_retry, stay_quiet, strict_request
from infill.errors import Cancelled
from infill.protocol import Draft, FillRequest, FillResult, Timings
from infill.syntax import constraint as syntax_constraints
from infill.syntax.hooks import hooks_for


@dataclass(eq=False)
class Slot:
    """One request's whole state in the stepper (its rows, denoiser, constraint, rounds)."""

    id: int
    request: FillRequest
    cancel: CancelFlag | None = None
    on_draft: Callable[[Draft], None] | None = None
    draft_every: int = 0  # a Draft every this many of its steps (0: none)
    result: FillResult | None = None
    error: Exception | None = None
    # the current round
    round: int = 0
    prepared: _Prepared | None = None
    lay: _Layout | None = None
    state: Windows | None = None
    den: Denoiser | None = None
    syntax: object = None
    finished_at: torch.Tensor | None = None
    ends: dict = field(default_factory=dict)  # (row, hole) -> text kept, where a left-to-right fill ended (Engine.end_said)
    behind: Behind = field(default_factory=Behind)  # rows stopped far under a finished one, no candidates (Engine.drop_behind)
    bound: object = None  # its context bound to its rows, where the model's bound contexts can be joined
    # across rounds
    scaffold: tuple | None = None  # (the request as prepared before the split, the split)
    first: FillResult | None = None  # the first round's result while a retry runs
    t_start: float = field(default_factory=time.perf_counter)
    t_denoise: float = 0.0
    context_ms: float = 0.0
    steps: int = 0  # its model calls so far (all rounds)

    @property
    def rows(self) -> int:
        return 0 if self.state is None else self.state.ids.shape[0]

    @property
    def done(self) -> bool:
        return self.result is not None or self.error is not None


class Stepper:
    def __init__(self, engine: Engine):
        self.engine = engine
        self.model = engine.model
        self.slots: list[Slot] = []
        self._ids = itertools.count(1)
        self._base_key: tuple | None = None  # (slot id, round) of every row in the bound context
        self._base = None  # (bound context over all rows of those slots, row offset of each)
        self._rows: ActiveRows | None = None  # the base's rows, narrowed as they finish (sampler.ActiveRows)
        self._width = 0  # the base's window width
        self._row_counts: list[int] = []  # rows of each slot of the base
        self._join = None  # the model's Bound.join (rows of several bound contexts as one), False: it has none
        self.calls = 0  # model calls so far
        self.last_call: list[tuple[int, int]] = []  # (slot id, rows) in the last model call

    # -- joining and leaving ------------------------------------------------------------------

    @torch.inference_mode()
    def add(self, request: FillRequest, cancel: CancelFlag | None = None,
            on_draft: Callable[[Draft], None] | None = None, draft_every: int = 0) -> Slot:
        """A slot for ``request``; its rows join the batch at the next step. Raises RequestError."""
        engine = self.engine
        slot = Slot(next(self._ids), request, cancel, on_draft, draft_every)
        p = engine.prepare(request)
        split = hooks_for(request.language).scaffold(p.request, p.shape)
        if split is not None:  # filled as several holes, in one round as strict as a retry (Engine.fill_batch)
            slot.scaffold = (p, split)
            strict = hooks_for(split[0].language).strict(split[1])
            p = engine.prepare(strict_request(split[0], strict), strict)
        self._start_round(slot, p)
        self.slots.append(slot)
        return slot

    def remove(self, slot: Slot, error: Exception | None = None) -> None:
        """Take ``slot``'s rows out of the batch now (cancelled, its client gone)."""
        if slot in self.slots:
            self.slots.remove(slot)
        if not slot.done:
            slot.error = error or Cancelled("fill cancelled")

    @property
    def live_rows(self) -> int:
        return sum(s.rows for s in self.slots)

    def _start_round(self, slot: Slot, p: _Prepared) -> None:
        engine, model = self.engine, self.model
        pad_id, mask_id = model.pad_id, model.mask_id
        lay = engine.layout([p], max(1, sum(len(s) for s in p.segments)))
        syntax = syntax_constraints.for_chunk([p.request], lay.rows, lay.hole, engine.tokenizer, pad_id, mask_id, [p.shape],
                                              [p.heals], frontier=lay.schedules[0].frontier)
        dev = engine.device
        state = engine.initial_state([p], lay)
        schedule = lay.schedules[0]
        gens = engine.generators(lay, schedule)
        deadline_ms = p.request.options.deadline_ms
        deadline = time.monotonic() + deadline_ms / 1000 if deadline_ms else None
        row_steps = torch.full((len(lay.rows),), schedule.steps, dtype=torch.long)
        slot.round += 1
        slot.prepared, slot.lay, slot.state, slot.syntax = p, lay, state, syntax
        slot.den = Denoiser(model, state, schedule, gens, syntax or NoConstraint(), deadline, row_steps,
                            engine.drafter([p], lay.rows, schedule))
        slot.finished_at = torch.zeros(len(lay.rows), dtype=torch.long)
        slot.ends, slot.behind = {}, Behind()
        slot.bound = None
        if self._join is not False:  # bind its context once now; joining the live set is then a copy
            t0 = time.perf_counter()
            ctx = engine.context_cache.encode(model, [p.segments])
            rows = torch.zeros(len(lay.rows), dtype=torch.long, device=dev)
            slot.bound = model.bind_context(ctx, rows, _pad(lay.ctx_pos, ctx.length, 0).to(dev))
            self._join = getattr(type(slot.bound), "join", None) or False
            if self._join is False:
                slot.bound = None
            slot.context_ms += (time.perf_counter() - t0) * 1000

    # -- one step -----------------------------------------------------------------------------

    @torch.inference_mode()
    def step(self) -> list[Slot]:
        """Advance every live slot one denoising step (one model call in all); the slots that
        finished or failed in it (removed from the live set; their ``result`` or ``error`` set)."""
        out: list[Slot] = []
        for slot in list(self.slots):  # a cancel takes effect before the next model call
            if slot.cancel is not None and slot.cancel.is_set():
                self.remove(slot)
                out.append(slot)
        going: list[Slot] = []
        for slot in list(self.slots):
            try:
                while not slot.den.pending():
                    if self._end_round(slot):
                        break
            except Exception as e:  # noqa: BLE001 -- one request's failure is its own
                slot.error = e
            if slot.done:
                self.slots.remove(slot)
                out.append(slot)
            else:
                going.append(slot)
        if not going:  # an idle stepper keeps no context alive
            self._base_key = self._base = self._rows = None
            return out
        t0 = time.perf_counter()
        try:
            logits, parts = self._model_call(going)
        except Exception as e:  # noqa: BLE001 -- the model failed: every request in the call is told
            for slot in going:
                self.remove(slot, e)
                out.append(slot)
            self._base_key = self._rows = None
            return out
        elapsed = time.perf_counter() - t0
        at = 0
        for slot, n in parts:
            try:
                step = slot.den.advance(logits[at : at + n])
                if slot.den.schedule.frontier:  # a left-to-right fill that said all it will ends here
                    self.engine.end_said(slot.state, step.committed, [slot.prepared] * slot.rows,
                                         Finisher(self.engine.tokenizer, slot.syntax), slot.ends)
                    if not step.done:
                        self.engine.drop_behind(slot.state, [0] * slot.rows, [slot.prepared], slot.lay.seeds, slot.ends,
                                                slot.behind)
                slot.steps += 1
                slot.t_denoise += elapsed
                slot.finished_at = torch.where((slot.finished_at == 0) & ~step.masked.any(1).cpu(), slot.steps,
                                               slot.finished_at)
                if slot.on_draft is not None and slot.draft_every and step.step % slot.draft_every == 0 and not step.done:
                    self._draft(slot, step)
                if not step.done and self._under_floor(slot):
                    self.slots.remove(slot)
                    out.append(slot)
            except Exception as e:  # noqa: BLE001
                self.remove(slot, e)
                out.append(slot)
            at += n
        return out

    def _model_call(self, going: list[Slot]) -> tuple[torch.Tensor, list[tuple[Slot, int]]]:
        """One window_hidden and one logits call over the rows of ``going`` that have masked slots
        (the rows held narrowed as in denoise_steps: sampler.ActiveRows). Where slots only left
        since the last call and the model's bound contexts keep what a step computed (``take``),
        the bound context stays as it is, their rows idle in it (not run), until a slot joins."""
        model, dev = self.model, self.engine.device
        base_key = tuple((s.id, s.round) for s in going)
        only_left = self._keeps_steps and set(base_key) <= set(self._base_key)
        if base_key != self._base_key and not only_left:
            W = max(s.state.ids.shape[1] for s in going)
            self._rebuild(going, W)
            pos = torch.cat([_pad(s.state.pos, W, 0) for s in going])
            self._base_key, self._rows, self._width = base_key, ActiveRows(model, self._base[0], pos), W
            self._row_counts = [s.rows for s in going]
        W, by_key = self._width, {(s.id, s.round): s for s in going}
        layout = [(by_key.get(k), n) for k, n in zip(self._base_key, self._row_counts)]  # None: left, its rows idle
        active = [s.state.masked.any(1) if s is not None else torch.zeros(n, dtype=torch.bool, device=dev) for s, n in layout]
        # Speculative drafts share the step's spare slots in proportion to each request's rows.
        total = max(1, sum(int(a.sum()) for a in active))
        spare = max(0, going[0].den.schedule.lookahead_slots - total)
        ids = torch.cat([_pad(s.den.fed_ids(spare * int(a.sum()) // total), W, model.pad_id) if s is not None
                         else torch.full((n, W), model.pad_id, dtype=torch.long, device=dev) for (s, n), a in zip(layout, active)])
        valid = torch.cat([_pad(s.den.valid, W, False) if s is not None else torch.zeros((n, W), dtype=torch.bool, device=dev)
                           for s, n in layout])
        hidden = self._rows.hidden(ids, valid, torch.cat(active))
        picked, parts, at = [], [], 0
        for (s, _), a in zip(layout, active):
            n = int(a.sum())
            if s is None:
                continue
            h = hidden[at : at + n, : s.state.ids.shape[1]]
            sel = h[s.den.live()[a]]
            picked.append(sel)
            parts.append((s, sel.shape[0]))
            at += n
        self.calls += 1
        self.last_call = [(s.id, int(a.sum())) for (s, _), a in zip(layout, active) if s is not None]
        return model.logits(torch.cat(picked)), parts

    @property
    def _keeps_steps(self) -> bool:
        """Does the last model call's bound context keep what its steps computed (``Bound.take``)?"""
        return self._rows is not None and hasattr(self._rows.ctx, "take")

    def _kept(self, slot: Slot):
        """``slot``'s rows as the last model call held them, with what the model keeps of them
        (``Bound.take``: a causal model's window states, so that its windows are not run again when
        another slot joins or leaves); None where that call did not hold them all, or the model's
        bound contexts keep nothing of a step."""
        held, key = self._rows, (slot.id, slot.round)
        if not self._keeps_steps or key not in self._base_key:
            return None
        first = self._base[1][self._base_key.index(key)]
        rows = list(range(first, first + slot.rows))
        at = {r: i for i, r in enumerate(held.held.tolist())} if held.held is not None else {r: r for r in rows}
        if any(r not in at for r in rows):
            return None
        return held.ctx.take(torch.tensor([at[r] for r in rows], dtype=torch.long, device=self.engine.device))

    def _rebuild(self, going: list[Slot], width: int) -> None:
        """The bound context for every row of ``going``: their contexts joined (padded to the longest),
        with room for ``width`` window slots."""
        engine = self.engine
        offsets, at = [], 0
        for s in going:
            offsets.append(at)
            at += s.rows
        if self._join and all(s.bound is not None for s in going):
            self._base = (self._join([self._kept(s) or s.bound for s in going], width), offsets)
            return
        t0 = time.perf_counter()
        ctx = engine.context_cache.encode(self.model, [s.prepared.segments for s in going])
        Lc = ctx.length
        rows, cpos, offsets, at = [], [], [], 0
        for i, s in enumerate(going):
            rows.extend([i] * s.rows)
            cpos.append(_pad(s.lay.ctx_pos, Lc, 0))
            offsets.append(at)
            at += s.rows
        rows_t = torch.tensor(rows, dtype=torch.long, device=engine.device)
        bound = self.model.bind_context(ctx, rows_t, torch.cat(cpos).to(engine.device))
        self._base = (bound, offsets)
        ms = (time.perf_counter() - t0) * 1000
        for s in going:
            if s.steps == 0 or s.den.step == 0:
                s.context_ms += ms

    # -- finishing ----------------------------------------------------------------------------

    def _draft(self, slot: Slot, step) -> None:
        slot.on_draft(self.engine.draft(slot.prepared, step, slot.state.hole[0], slot.steps, slot.ends))

    def _end_round(self, slot: Slot) -> bool:
        """Finish the slot's round; True when the slot is done (its result set), False when a
        retry round starts."""
        engine, p, state = self.engine, slot.prepared, slot.state
        pad_id = self.model.pad_id
        ids, logprob, hole = state.ids.cpu(), state.logprob.float().cpu(), state.hole.cpu()
        finisher = Finisher(engine.tokenizer, slot.syntax)
        for r in range(slot.rows):
            if r in slot.behind.dropped:
                continue
            fills, score, filled = engine.decode_row(ids[r], logprob[r], hole[r], p.heals, p.request.path)
            fills = engine.keep_ends(fills, r, slot.ends)
            ran_out = [bool((ids[r][hole[r] == h] != pad_id).all()) for h in range(len(fills))]
            finisher.take(r, 0, p.request, fills, score, filled, ran_out, p.indents)
        t0 = time.perf_counter()
        fills, filled = engine.pick(finisher, 0, p)
        rank_ms = (time.perf_counter() - t0) * 1000
        total_ms = (time.perf_counter() - slot.t_start) * 1000
        timings = Timings(tokenize_ms=p.tokenize_ms, context_ms=slot.context_ms, denoise_ms=slot.t_denoise * 1000,
                          total_ms=total_ms, steps=int(slot.finished_at.max()) if slot.rows else 0, tokens_filled=filled,
                          context_tokens=sum(len(s) for s in p.segments), candidates=slot.rows,
                          constrain_ms=slot.syntax.seconds * 1000 if slot.syntax is not None else 0.0, rank_ms=rank_ms)
        result = FillResult(fills=as_result(fills, p.indents, p.shape.opener), timings=timings, model=engine.model_id)
        if slot.round == 1 and slot.scaffold is None and needs_retry(p, result, slot.cancel):
            slot.first = result
            request = slot.request
            shape = hooks_for(request.language).strict(p.shape)
            self._start_round(slot, engine.prepare(strict_request(request, shape), shape))
            return False
        self._finish(slot, result)
        return True

    def _under_floor(self, slot: Slot) -> bool:
        """Does the slot stop here under its request's ``min_score``, as Engine.fill_batch's chunk
        does (a frontier schedule, every candidate with a hole already under the floor)? Then its
        result is the engine's floor_result, and its committed tokens join the engine's drafts."""
        floor = slot.request.options.min_score
        if floor is None or not slot.den.schedule.frontier:
            return False
        scores = self.engine.sunk(slot.state, floor, len(slot.prepared.heals))
        if scores is None:
            return False
        self.engine.keep_drafts(slot.state, [slot.prepared.request.path] * slot.rows)
        timings = Timings(context_ms=slot.context_ms, denoise_ms=slot.t_denoise * 1000, steps=slot.steps,
                          constrain_ms=slot.syntax.seconds * 1000 if slot.syntax is not None else 0.0)
        self._finish(slot, self.engine.floor_result(slot.prepared, slot.state, list(range(slot.rows)), scores, timings,
                                                    slot.t_start))
        return True

    def _finish(self, slot: Slot, result: FillResult) -> None:
        """The slot's result from its last round's: merged with a first round's, joined as a scaffold."""
        if slot.first is not None:
            result = merge_retry(slot.first, result)
        if slot.scaffold is not None:
            before, split = slot.scaffold
            result = join_scaffold(before.request, before.indents[0], split[0], result)
        slot.result = stay_quiet(slot.request, result)


def _pad(t: torch.Tensor, width: int, value) -> torch.Tensor:
    """``t`` [R, w] padded on the right to [R, width] with ``value``."""
    if t.shape[1] == width:
        return t
    out = torch.full((t.shape[0], width), value, dtype=t.dtype, device=t.device)
    out[:, : t.shape[1]] = t
    return out
