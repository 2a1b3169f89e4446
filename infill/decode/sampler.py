"""Masked-diffusion denoising: fill every masked window slot in parallel over a few steps.

A pure generator of per-step states. It takes a model, a bound context (the encoded text around
the holes), the window slots, a schedule, per-row random generators and a constraint; it does no
I/O, reads no config, picks no device, and knows nothing of tokenizers or tree-sitter.

Each step: one forward pass over all windows gives a distribution per masked slot; a token is
proposed for each (greedy, or sampled with temperature and top-p); the slots to commit are chosen
by a policy (confidence, margin or entropy, or left to right in each hole, the holes of a row
side by side), either a fixed number per step (spread so that the fill takes ``steps`` steps) or
every slot above a confidence threshold (at least one per row). A hole whose slots the
constraint all refuses takes the best token it allows from deeper in the ranking (rescue).
A committed slot is kept unless the constraint asks to remask it; context is never rewritten.
A slot may be bound to a set of tokens (``Windows.only``: a healed token's extensions).
A window is pad-terminated: committing pad at a slot commits pad to every later masked slot of
the same hole, so a window of N slots expresses any fill of up to N tokens.

A model with an expand token (variable length, DreamOn) starts a hole with a few live masked slots
and the rest of its window spare (committed pad, which such a model does not see): the expand
token committed at a slot makes it two masked slots (taking a spare one; banned where none is
left, and at a row's last step), and a committed pad is deleted, so each hole keeps its live slots
first and its spare ones last (:func:`reshape`).

A frontier schedule may speculate (``lookahead``): a drafter guesses the tokens from a greedy
row's frontier slot on, the model runs the row with those guesses in place, and the step commits
the frontier slot and then each next slot while the token committed before it is the one guessed
there (its state read the right token), so a step commits one or more slots and the fill is the
one a step per slot gives (but where a step budget, a deadline or the caller stops it first: a
speculative step may have committed more by then).

A row whose slots are all committed drops out of the model calls (rows are independent
candidates); a row the constraint holds back gets ``overrun`` more of its steps, then commits what
is left at once (repair and selection judge it), so no batch waits long for one slow row.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Callable, Iterator, Protocol

import torch

from infill.errors import Cancelled
from infill.model.seam import Bound, DiffusionModel


@dataclass(frozen=True)
class Schedule:
    steps: int  # denoising steps for a row (its masked slots spread evenly over them)
    threshold: float | None = None  # commit every slot with confidence above this instead
    policy: str = "confidence"  # confidence | margin | entropy | left-to-right: which slots first
    temperature: float = 0.0  # 0 = greedy
    top_p: float = 1.0
    max_repair_rounds: int = 1  # how often a constraint may send a full draft back
    max_repair_share: float = 0.5  # a row with more of its slots flagged is not repaired (too costly)
    repair_pace: float = 0.25  # a repair round's steps, as a share of the steps its slots took the first time
    pad_in_order: bool = True  # pad only at a hole's first masked slot (the end is decided last)
    overrun: float = 0.0  # a row held back (constraint, pad order) may take this share more steps,
    # then commits what is left at once: a batch never waits long for one slow row
    alternatives: int = 8  # a token the constraint refuses is replaced by the next best it allows, tried this deep
    frontier: bool = False  # only each row's first masked slot is proposed and committed, one per step, its
    # holes in document order (a causal model: a later slot's prediction would read masked ones, and a later
    # hole's reads the earlier holes' whole fills); the end of a step budget or a deadline ends a fill there
    # (its other masked slots become pad)
    lookahead: int = 0  # a frontier schedule's speculative drafts: up to this many guessed tokens (Denoiser's
    # ``drafter``) are run at a greedy row's frontier slot and after it, so that one model call can commit the
    # slots whose predecessors were guessed right (the fill is the same as without drafts, but where a step budget
    # ends it: a speculative step may have committed more by then)
    lookahead_slots: int = 4  # slots a speculative step runs in all, at most (a row's own slot included): the CPU's
    # 4-bit and int8 few-row products run rows in blocks of 4 (1, 4 and 5 rows of a 3072x576 layer: 226, 410 and
    # 733 us on the 2-core AVX2 CPU), so a lone request speculates within one block and a batch of four does not
    # (measured: BENCHMARKS.md, v2.3 and v2.22)


@dataclass
class Windows:
    """The denoising state: one row per candidate, W slots per row (all holes of a request)."""

    ids: torch.Tensor  # [R, W] long; mask id where still masked
    pos: torch.Tensor  # [R, W] long; absolute positions in the row's layout
    hole: torch.Tensor  # [R, W] long; hole number of each slot, -1 for batch padding
    masked: torch.Tensor  # [R, W] bool
    logprob: torch.Tensor  # [R, W] float; log-probability of each committed token when committed
    no_pad: torch.Tensor | None = None  # [R, W] bool: slots that may not be pad (a hole's minimum)
    only: torch.Tensor | None = None  # [R, W] long: the row of ``only_sets`` a slot's token must come from, -1: any
    only_sets: torch.Tensor | None = None  # [S, V] bool: token sets (a healed token's extensions)
    ends: torch.Tensor | None = None  # [R, W] long: the row of ``end_sets`` that ends a slot's hole, -1: the pad
    end_sets: torch.Tensor | None = None  # [S, V] bool: the tokens that the text after a hole starts with. A pad
    # committed at a slot with a set gets their joint log-probability, not the pad's own: for a model whose pad
    # is not its word on where a fill ends (a causal model's end of text), that the text after the hole goes on there

    @property
    def valid(self) -> torch.Tensor:
        return self.hole >= 0


@dataclass(frozen=True)
class Step:
    """The state after one denoising step (tensors are snapshots; safe to keep)."""

    step: int
    ids: torch.Tensor
    masked: torch.Tensor
    logprob: torch.Tensor
    committed: torch.Tensor  # [R, W] bool: slots committed in this step
    done: bool


class Constraint(Protocol):
    """The sampler's hook for syntax guidance. The sampler has no grammar knowledge of its own."""

    def steer(self, state: Windows, proposal: torch.Tensor, candidates: torch.Tensor,
              alternatives: Callable[[int, int], list[int]] | None) -> tuple[torch.Tensor, torch.Tensor]:
        """Of the slots ``candidates`` [R, W] that could be committed with tokens ``proposal``
        [R, W] this step: the tokens to commit ([R, W]: the proposal, or where the constraint
        refuses it, it may take the first of ``alternatives(row, slot)`` (the model's next
        choices, best first) it allows) and which slots may be committed (bool [R, W])."""
        ...

    def remask(self, state: Windows) -> torch.Tensor:
        """After a full draft: slots to mask and denoise again (bool [R, W]; none = accept)."""
        ...

    # Optional: ``first_admissible(state, row, slot, tokens) -> int | None``, the first of
    # ``tokens`` (best first) that slot ``slot`` of row ``row`` may take, None if none or if it
    # cannot tell; asked when a row has nothing it may commit after ``alternatives``.


class NoConstraint:
    def steer(self, state: Windows, proposal: torch.Tensor, candidates: torch.Tensor, alternatives) -> tuple[torch.Tensor, torch.Tensor]:
        return proposal, candidates

    def remask(self, state: Windows) -> torch.Tensor:
        return torch.zeros_like(state.masked)


class CancelFlag(Protocol):
    def is_set(self) -> bool: ...


# ----------------------------------------------------------------------------------------------
# Pure functions of one step.


def propose(
    logp: torch.Tensor, schedule: Schedule, noise: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per slot: proposed token, its log-probability, its confidence, and the policy's score.

    logp [..., V]: log-probabilities (log_softmax of the logits, mask already forbidden);
    ``noise`` uniform [..., V] when sampling with a temperature. Returns four tensors of shape
    logp.shape[:-1].
    """
    dist = sampling_dist(logp, schedule)
    keys = dist + gumbel(noise, dist) if schedule.temperature > 0 else logp
    token = keys.max(-1).indices  # as argmax (the first of equals), and 3x faster on CPU
    return (token, *judge_tokens(logp, dist, token, schedule))


def sampling_dist(logp: torch.Tensor, schedule: Schedule) -> torch.Tensor:
    """The log-probabilities tokens are drawn from: ``logp`` itself when greedy, else tempered
    (and cut to the nucleus)."""
    if schedule.temperature <= 0:
        return logp
    tempered = torch.log_softmax(logp / schedule.temperature, dim=-1)
    return top_p_filter(tempered, schedule.top_p) if schedule.top_p < 1.0 else tempered


def gumbel(noise: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return -torch.log(-torch.log(noise.to(like.device).clamp_min(1e-20)))


def judge_tokens(logp: torch.Tensor, dist: torch.Tensor, token: torch.Tensor,
                 schedule: Schedule) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per slot, for its ``token``: the log-probability, the confidence (under ``dist``) and the policy's score."""
    conf = dist.gather(-1, token[..., None])[..., 0].exp()
    if schedule.policy in ("confidence", "left-to-right"):  # left-to-right reorders in the loop
        score = conf
    elif schedule.policy == "margin":
        top2 = dist.topk(2, dim=-1).values.exp()
        score = top2[..., 0] - top2[..., 1]
    elif schedule.policy == "entropy":
        score = (dist.exp() * dist.clamp_min(-1e9)).sum(-1)  # minus the entropy: higher is surer
    else:
        raise ValueError(f"unknown unmasking policy {schedule.policy!r}")
    return logp.gather(-1, token[..., None])[..., 0], conf, score


def ranked(logp: torch.Tensor, schedule: Schedule, noise: torch.Tensor | None, depth: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per slot, the ``depth`` tokens :func:`propose` would pick, best first (the first is its
    proposal, the next are what it proposes once those before are ruled out) [..., depth]; and
    the sampling distribution."""
    dist = sampling_dist(logp, schedule)
    keys = dist + gumbel(noise, dist) if schedule.temperature > 0 else logp
    return keys.topk(min(depth, keys.shape[-1]), dim=-1).indices, dist


GREEDY_NOISE = math.exp(-1.0)  # uniform noise whose Gumbel value is 0: the draw is the distribution's argmax


def row_noise(generators: list[torch.Generator | None], counts: list[int], vocab: int) -> torch.Tensor:
    """Uniform noise [sum(counts), V] for ``counts[r]`` slots of each row r, row by row, each row's
    from its own generator (a row's draws depend on its own slots only); a row without one (None)
    is greedy among sampled rows: its noise makes every draw the tempered distribution's argmax,
    which is the greedy token."""
    return torch.cat([torch.rand((n, vocab), generator=g) if g is not None else torch.full((n, vocab), GREEDY_NOISE)
                      for g, n in zip(generators, counts)])


def scatter(values: torch.Tensor, where: torch.Tensor, fill) -> torch.Tensor:
    """Place values [N] at the True slots of where [R, W]; ``fill`` elsewhere."""
    out = torch.full(where.shape, fill, dtype=values.dtype, device=values.device)
    out[where] = values
    return out


def top_p_filter(logp: torch.Tensor, top_p: float) -> torch.Tensor:
    """Keep the smallest set of tokens whose probability reaches top_p; renormalise."""
    sorted_lp, order = logp.sort(-1, descending=True)
    cum = sorted_lp.exp().cumsum(-1)
    drop_sorted = (cum - sorted_lp.exp()) >= top_p  # the first token is always kept
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return torch.log_softmax(logp.masked_fill(drop, float("-inf")), dim=-1)


def tokens_this_step(remaining: torch.Tensor, steps_left: torch.Tensor | int) -> torch.Tensor:
    """How many slots each row commits now so that ``remaining`` [R] finish in ``steps_left`` [R]."""
    left = torch.as_tensor(steps_left, device=remaining.device).clamp_min(1)
    return torch.ceil(remaining.float() / left.float()).long()


def choose(score: torch.Tensor, conf: torch.Tensor, allowed: torch.Tensor, k: torch.Tensor, threshold: float | None) -> torch.Tensor:
    """Slots to commit [R, W]: the k best allowed by score, or all allowed above threshold.

    A row with masked slots but nothing allowed commits its best masked slot anyway, so a fill
    always progresses (the constraint can still repair it later).
    """
    neg = torch.finfo(score.dtype).min
    s = score.masked_fill(~allowed, neg)
    if threshold is not None:
        pick = allowed & (conf >= threshold)
        k = torch.ones_like(k)  # at least one per row
    else:
        pick = torch.zeros_like(allowed)
    order = s.argsort(dim=-1, descending=True)
    rank = torch.empty_like(order).scatter_(-1, order, torch.arange(s.shape[-1], device=s.device).expand_as(order))
    pick |= allowed & (rank < k[:, None])
    return pick


RESCUE_TOKENS = 64  # how deep a stuck hole's first masked slot looks for a token the constraint allows


def rescue(constraint, state: Windows, candidates: torch.Tensor, allowed: torch.Tensor, logp_all: torch.Tensor,
           proposal: tuple[torch.Tensor, torch.Tensor, torch.Tensor], among: torch.Tensor | None = None) -> None:
    """Holes with masked slots but nothing allowed: their first masked slot takes the best of its
    RESCUE_TOKENS most likely tokens that the constraint allows (in place: ``allowed`` and the
    proposal's token, log-probability and confidence), where the constraint can tell one.
    ``among``: the slots that count (default: all ``candidates``, the slots ``logp_all`` holds)."""
    ask = getattr(constraint, "first_admissible", None)
    among = candidates if among is None else among
    stuck_holes = per_hole_count(state.hole, among).gt(0) & per_hole_count(state.hole, allowed & among).eq(0)  # [R, H]
    if ask is None or not stuck_holes.any():
        return
    first = first_masked(state.hole, among)
    stuck = first & stuck_holes.gather(1, state.hole.clamp_min(0)) & (state.hole >= 0)
    token, logp, conf = proposal
    index = numbered(candidates)  # row of logp_all
    for r, slot in stuck.nonzero().tolist():
        lp = logp_all[index[r, slot]]
        best = lp.topk(min(RESCUE_TOKENS, lp.shape[0])).indices.tolist()
        t = ask(state, r, slot, best)
        if t is not None:
            token[r, slot], logp[r, slot], conf[r, slot] = t, lp[t], lp[t].exp()
            allowed[r, slot] = True


def end_logprob(logp: torch.Tensor, ending: torch.Tensor, candidates: torch.Tensor, state: Windows,
                logp_all: torch.Tensor, row_of: torch.Tensor) -> torch.Tensor:
    """``logp`` [R, W] with each candidate slot that ends its hole (``ending``, a pad) and has an
    end set (``state.ends``) given the joint log-probability of that set's tokens under its
    distribution (``logp_all``, rows numbered by ``row_of``)."""
    at = candidates & ending & (state.ends >= 0)
    if not at.any():
        return logp
    sets = state.end_sets[state.ends[at]]
    logp = logp.clone()
    logp[at] = torch.logsumexp(logp_all[row_of[at]].masked_fill(~sets, float("-inf")), dim=-1)
    return logp


def per_hole_count(hole: torch.Tensor, where: torch.Tensor) -> torch.Tensor:
    """[R, H] long: how many slots of each hole (0 .. H-1) ``where`` [R, W] marks in each row."""
    n = int(hole.max()) + 1 if hole.numel() else 0
    count = torch.zeros((hole.shape[0], max(n, 1)), dtype=torch.long, device=hole.device)
    return count.scatter_add_(1, hole.clamp_min(0), (where & (hole >= 0)).long())


def numbered(where: torch.Tensor) -> torch.Tensor:
    """[R, W] long: the True slots of ``where`` numbered 0, 1, ... in row-major order; -1 elsewhere."""
    out = torch.full(where.shape, -1, dtype=torch.long, device=where.device)
    out[where] = torch.arange(int(where.sum()), device=where.device)
    return out


def first_masked(hole: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
    """[R, W] bool: the first still-masked slot of each hole."""
    return masked & (per_hole_cumsum(hole, masked) == 1)


def per_hole_cumsum(hole: torch.Tensor, where: torch.Tensor) -> torch.Tensor:
    """[R, W] long: at each slot of a hole, how many of that hole's slots up to it ``where`` marks
    (0 outside holes)."""
    out = torch.zeros_like(hole)
    for h in hole.unique().tolist():
        if h >= 0:
            in_h = hole == h
            out += torch.where(in_h, (where & in_h).long().cumsum(1), 0)
    return out


def hole_rank(hole: torch.Tensor) -> torch.Tensor:
    """[R, W] long: each slot's index in its hole (0 for its first slot; holes side by side go on
    together in a left-to-right order, a step's slots spread over them)."""
    return (per_hole_cumsum(hole, hole >= 0) - 1).clamp_min(0)


def past_refusal(hole: torch.Tensor, refused: torch.Tensor) -> torch.Tensor:
    """[R, W] bool: the slots at or after a refused slot of the same hole (a hole's order does not
    hold back the holes after it)."""
    return per_hole_cumsum(hole, refused) > 0


def pad_tail(hole: torch.Tensor, committed_pad: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
    """Masked slots that follow a committed pad in the same hole (to be filled with pad too)."""
    return masked & (per_hole_cumsum(hole, committed_pad) - committed_pad.long() > 0)


def spare(hole: torch.Tensor, ids: torch.Tensor, masked: torch.Tensor, pad_id: int) -> torch.Tensor:
    """[R, H] long: each hole's spare slots (committed pad) in each row."""
    return per_hole_count(hole, ~masked & (ids == pad_id))


def reshape(state: Windows, expand_id: int, mask_id: int, pad_id: int) -> None:
    """Variable-length holes, in place: each committed expand token becomes two masked slots (one
    while the hole has a spare slot to take; else it is only masked again), each committed pad is
    deleted, and every hole keeps its live slots first, in order, and its spare (pad) slots last.
    A slot's bindings (``no_pad``, ``only``) belong to its place in the hole and stay there."""
    ids, masked, hole = state.ids, state.masked, state.hole
    grow = ~masked & (ids == expand_id)
    dead = ~masked & (ids == pad_id) & (hole >= 0)
    dead_before_live = (hole >= 0) & ~dead & (per_hole_cumsum(hole, dead) > 0)
    rows = (grow.any(1) | dead_before_live.any(1)).nonzero().flatten().tolist()
    if not rows:
        return
    room = spare(hole, ids, masked, pad_id)
    for r in rows:
        for h in hole[r].unique().tolist():
            if h < 0:
                continue
            slots = (hole[r] == h).nonzero().flatten()
            budget = int(room[r, h])
            items = []  # (token, masked, logprob) of the hole's slots, in order
            for k in slots.tolist():
                if bool(grow[r, k]):
                    items += [(mask_id, True, 0.0)] * (2 if budget > 0 else 1)
                    budget -= budget > 0
                elif not bool(dead[r, k]):
                    items.append((int(ids[r, k]), bool(masked[r, k]), float(state.logprob[r, k])))
            items += [(pad_id, False, 0.0)] * (len(slots) - len(items))
            tok, msk, lp = zip(*items)
            ids[r, slots] = torch.tensor(tok, dtype=ids.dtype, device=ids.device)
            masked[r, slots] = torch.tensor(msk, dtype=torch.bool, device=ids.device)
            state.logprob[r, slots] = torch.tensor(lp, dtype=state.logprob.dtype, device=ids.device)


class ActiveRows:
    """Runs the model on the rows that still have masked slots, in row order.

    Rows are independent candidates, so leaving out the finished ones (short fills end early, and
    a batch waits for its slowest row) changes nothing for the others, and running a finished one
    along changes nothing either. Selecting rows copies the context (a causal model's keys and
    values of every layer), so the rows held are narrowed only once at most half of them are
    active, from the rows held (what the model kept in them stays); a row that is active again
    after it was let go is taken from the whole context afresh.
    """

    def __init__(self, model: DiffusionModel, ctx: Bound, pos: torch.Tensor):
        self.model, self.full, self.full_pos = model, ctx, pos
        self.ctx, self.pos = ctx, pos
        self.held: torch.Tensor | None = None  # the rows ``ctx`` holds; None: all

    def hidden(self, ids: torch.Tensor, valid: torch.Tensor, active: torch.Tensor) -> torch.Tensor:
        """Hidden states [n, W, d] of the n rows where ``active`` [R] is True."""
        rows = active.nonzero().flatten()
        held = self.held if self.held is not None else torch.arange(ids.shape[0], device=rows.device)
        inner = _places(held, ids.shape[0])[rows]  # each active row's place among the rows held (-1: let go)
        if bool((inner < 0).any()):  # a row let go is active again
            self.ctx, self.pos, self.held = self.full.select(rows), self.full_pos.index_select(0, rows), rows
        elif 2 * len(rows) <= len(held):
            self.ctx, self.pos, self.held = self.ctx.select(inner), self.pos.index_select(0, inner), rows
        if self.held is None:
            h = self.model.window_hidden(ids, self.pos, valid, self.ctx)
            return h if bool(active.all()) else h.index_select(0, rows)
        h = self.model.window_hidden(ids.index_select(0, self.held), self.pos, valid.index_select(0, self.held), self.ctx)
        return h if len(self.held) == len(rows) else h.index_select(0, _places(self.held, ids.shape[0])[rows])


def _places(held: torch.Tensor, n: int) -> torch.Tensor:
    """[n]: each row's index in ``held``, -1 for rows not in it."""
    where = torch.full((n,), -1, dtype=torch.long, device=held.device)
    where[held] = torch.arange(len(held), device=held.device)
    return where


# ----------------------------------------------------------------------------------------------
# The loop.


class Denoiser:
    """One batch of rows' denoising state between model calls: what :func:`denoise_steps` keeps
    from step to step, with the step itself split from the model call that feeds it.

    ``pending()`` says whether another model call is needed (a full draft that the constraint
    sends back is masked again there); ``advance(logits)`` takes the logits of the still-masked
    slots (row-major, as ``hidden[state.masked[active]]`` orders them) and commits one step.
    denoise_steps drives one Denoiser with its own model calls; infill/engine/stepper.py drives
    many (one per request) with one model call over all their rows.
    """

    def __init__(self, model: DiffusionModel, state: Windows, schedule: Schedule,
                 generators: list[torch.Generator | None] | None = None, constraint: Constraint | None = None,
                 deadline: float | None = None, row_steps: torch.Tensor | None = None,
                 drafter: Callable[[Windows, int], torch.Tensor] | None = None):
        self.mask_id, self.pad_id = model.mask_id, model.pad_id
        self.drafter = drafter if schedule.frontier and schedule.lookahead > 0 else None
        self.drafts: torch.Tensor | None = None  # [R, W] this step's guessed tokens (-1: none)
        self.expand_id = getattr(model.capabilities, "expand_id", None)
        self.state, self.schedule, self.generators, self.deadline = state, schedule, generators, deadline
        self.constraint = constraint or NoConstraint()
        if schedule.temperature > 0 and (generators is None or len(generators) != state.ids.shape[0]):
            raise ValueError("sampling with temperature needs one torch.Generator per row")
        self.valid = state.valid
        planned = row_steps if row_steps is not None else torch.full((state.ids.shape[0],), schedule.steps)
        self.planned = planned.to(state.ids.device).clamp_min(1)
        self.steps_left = self.planned.clone()
        self.budget = torch.ceil(self.planned * (1 + schedule.overrun)).long()  # steps this pass may take, at most
        self.repairs = 0
        self.step = 0

    def pending(self) -> bool:
        """Whether the rows need another model call (False: every slot is committed and accepted)."""
        state, schedule, valid = self.state, self.schedule, self.valid
        if not state.masked.any():
            again = self.constraint.remask(state) & valid
            content = valid & (state.ids != self.pad_id)  # judge the share on the fill's own tokens
            again &= ((again & content).sum(1) <= schedule.max_repair_share * content.sum(1).clamp_min(1))[:, None]
            if self.repairs >= schedule.max_repair_rounds or not again.any():
                return False
            self.repairs += 1
            state.masked |= again
            state.ids[again] = self.mask_id
            share = again.sum(1).float() / valid.sum(1).clamp_min(1).float()
            self.steps_left = torch.ceil(self.planned * share * schedule.repair_pace).long().clamp_min(1)
            self.budget = torch.ceil(self.steps_left * (1 + schedule.overrun)).long()
        return True

    def fed_ids(self, spare: int | None = None) -> torch.Tensor:
        """The windows [R, W] as the model runs them for the next step: the state's tokens, with this
        step's drafts (asked of the drafter here) at the slots they guess. ``spare``: the slots the
        drafts may add to the step, over all rows (default: the schedule's ``lookahead_slots`` less
        one per active row)."""
        self.drafts = None
        if self.drafter is not None:
            active = int(self.state.masked.any(1).sum())
            spare = self.schedule.lookahead_slots - active if spare is None else spare
            per_row = min(self.schedule.lookahead, spare // max(active, 1))
            if per_row > 0:
                self.drafts = self._drafts(per_row)
        return self.state.ids if self.drafts is None else torch.where(self.drafts >= 0, self.drafts, self.state.ids)

    def _drafts(self, lookahead: int) -> torch.Tensor | None:
        """The drafter's guesses kept where they are a run of up to ``lookahead`` masked slots from a
        greedy row's frontier slot on, in its hole; None where there is none."""
        state = self.state
        guess = self.drafter(state, lookahead).to(state.ids.device)
        front = self.frontier()
        in_hole = state.hole == torch.where(front, state.hole, -2).max(1, keepdim=True).values
        after = front.long().cumsum(1) > 0  # slots at or after the frontier
        ok = state.masked & (guess >= 0) & (guess != self.pad_id) & (guess != self.mask_id) & in_hole
        kept = after & ok & ((after & ~ok).long().cumsum(1) == 0)  # a run from the frontier on
        kept &= kept.long().cumsum(1) <= lookahead
        if self.schedule.temperature > 0 and self.generators is not None:  # sampled rows keep one slot a step
            greedy = torch.tensor([g is None for g in self.generators], device=kept.device)
            kept &= greedy[:, None]
        return torch.where(kept, guess, -1) if kept.any() else None

    def frontier(self) -> torch.Tensor:
        """[R, W] each row's first masked slot (window slots are in document order)."""
        masked = self.state.masked
        return masked & (masked.long().cumsum(1) == 1)

    def live(self) -> torch.Tensor:
        """[R, W] the slots a step may commit, whose logits ``advance`` takes: every masked slot, or
        with a frontier schedule each row's first masked slot and the slot after each drafted one."""
        if not self.schedule.frontier:
            return self.state.masked
        front = self.frontier()
        if self.drafts is None:
            return front
        drafted = self.drafts >= 0
        after = torch.zeros_like(drafted)
        after[:, 1:] = drafted[:, :-1] & (self.state.hole[:, 1:] == self.state.hole[:, :-1])
        return front | (after & self.state.masked)

    def _taken(self, pick: torch.Tensor, token: torch.Tensor, allowed: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        """[R, W] the live slots after a row's frontier that a step commits too: each next one while
        the slot before it is committed with the token drafted there (its state read that token)."""
        taken = torch.zeros_like(pick)
        for r in (self.drafts >= 0).any(1).nonzero().flatten().tolist():
            slots = candidates[r].nonzero().flatten().tolist()  # the frontier, then one slot after each draft, in order
            for before, k in zip(slots, slots[1:]):
                if not (pick[r, before] or taken[r, before]) or int(token[r, before]) != int(self.drafts[r, before]) \
                        or not allowed[r, k]:
                    break
                taken[r, k] = True
        return taken

    @torch.inference_mode()
    def advance(self, logits: torch.Tensor) -> Step:
        """One step from ``logits`` [n, V] of the n live slots (row-major); commits in place."""
        state, schedule, constraint = self.state, self.schedule, self.constraint
        mask_id, pad_id, generators = self.mask_id, self.pad_id, self.generators
        candidates = self.live()
        logits[:, mask_id] = float("-inf")
        hurry = self.deadline is not None and time.monotonic() >= self.deadline
        expand = self.expand_id
        if expand is not None:  # no growing a hole without a spare slot, nor at a row's last step
            full = spare(state.hole, state.ids, state.masked, pad_id).gather(1, state.hole.clamp_min(0)) == 0
            logits[(full | (self.budget <= 1)[:, None] | hurry)[candidates], expand] = float("-inf")
        if state.no_pad is not None:
            logits[state.no_pad[candidates], pad_id] = float("-inf")
        if state.only is not None:
            which = state.only[candidates]
            bound = which >= 0
            if bound.any():
                logits[bound] = logits[bound].masked_fill(~state.only_sets[which[bound]], float("-inf"))
        noise = None
        if schedule.temperature > 0:  # one generator per row: a row's draws do not depend on its batch
            noise = row_noise(generators, candidates.sum(1).tolist(), logits.shape[-1])
        logp_all = torch.log_softmax(logits.float(), dim=-1)
        tok_m, logp_m, conf_m, score_m = propose(logp_all, schedule, noise)
        pad_logp = scatter(logp_all[:, pad_id], candidates, 0.0)
        token = scatter(tok_m, candidates, pad_id)
        logp = scatter(logp_m, candidates, 0.0)
        conf = scatter(conf_m, candidates, 0.0)
        score = scatter(score_m, candidates, float("-inf"))
        row_of = numbered(candidates)  # a slot's row of logp_all

        def alternatives(r: int, k: int) -> list[int]:  # what propose picks at slot k of row r once its proposal is ruled out
            i = int(row_of[r, k])
            order = ranked(logp_all[i], schedule, None if noise is None else noise[i], schedule.alternatives + 1)[0][1:]
            return order[logp_all[i, order] > float("-inf")].tolist()

        grows = candidates & (token == expand) if expand is not None else torch.zeros_like(candidates)
        steered, allowed = constraint.steer(state, token, candidates & ~grows, alternatives if schedule.alternatives else None)
        allowed = (allowed | grows) & candidates  # a new tensor: later steps narrow it in place (expand is no text)
        changed = candidates & (steered != token)
        if changed.any():  # the constraint took an alternative: judge it as propose would have
            i = row_of[changed]
            token = steered
            logp[changed], conf[changed], score[changed] = judge_tokens(logp_all[i], sampling_dist(logp_all[i], schedule),
                                                                        token[changed], schedule)
        first = candidates if self.drafts is None else candidates & self.frontier()  # (the rest: after drafts)
        refused = candidates & ~allowed
        if refused.any():  # (a row's frontier is judged as without drafts: its slot alone)
            rescue(constraint, state, candidates, allowed, logp_all, (token, logp, conf), among=first)
        if state.ends is not None:
            logp = end_logprob(logp, token == pad_id, candidates, state, logp_all, row_of)
        if schedule.policy == "left-to-right":  # the autoregressive-equivalent order in each hole, never past a refusal
            score = torch.where(candidates, -hole_rank(state.hole).float(), float("-inf"))
            allowed &= ~past_refusal(state.hole, refused)
        if schedule.pad_in_order:  # a fill may end only where everything before it is decided
            allowed &= (token != pad_id) | first_masked(state.hole, state.masked)
        k = tokens_this_step(first.sum(1), self.steps_left)
        pick = choose(score, conf, allowed & first, k, schedule.threshold)
        stuck = first.any(1) & ~pick.any(1)  # nothing allowed in a row: take its best slot
        if stuck.any():
            pick |= choose(score, conf, first, stuck.long(), None) & stuck[:, None]
        if self.drafts is not None:
            pick |= self._taken(pick, token, allowed, candidates)
            token = torch.where(candidates & ~pick, torch.full_like(token, pad_id), token)  # (only hurry commits those)
        commit_pad = pick & (token == pad_id)
        tail = pad_tail(state.hole, commit_pad | (~state.masked & (state.ids == pad_id) & self.valid), state.masked & ~pick)
        token = torch.where(tail, torch.full_like(token, pad_id), token)
        logp = torch.where(tail, pad_logp, logp)
        pick |= tail
        if hurry:  # (a frontier schedule's other masked slots: pad, as ``token`` has them)
            pick = state.masked.clone()
        else:  # rows at the end of their step budget commit everything left
            pick |= state.masked & (self.budget <= 1)[:, None]
        state.ids = torch.where(pick, token, state.ids)
        state.logprob = torch.where(pick, logp, state.logprob)
        state.masked = state.masked & ~pick
        if expand is not None:
            reshape(state, expand, mask_id, pad_id)
        self.steps_left = (self.steps_left - 1).clamp_min(1)
        self.budget -= 1
        self.step += 1
        return Step(self.step, state.ids.clone(), state.masked.clone(), state.logprob.clone(), pick, not state.masked.any())


def committed_scores(state: Windows, pad_id: int, holes: int) -> torch.Tensor:
    """[R, holes] the log-probability of each row's committed tokens in each hole, pads left out.
    Under a frontier schedule a hole's committed tokens are its fill's first ones, and every log-
    probability is at most 0, so this is at least the score the fill will end with (Fill.score):
    it can only fall. (Another schedule may end a fill before tokens it committed: no such bound.)"""
    content = ~state.masked & state.valid & (state.ids != pad_id)
    lp = torch.where(content, state.logprob.float(), 0.0)
    out = torch.zeros((state.ids.shape[0], holes), dtype=lp.dtype, device=lp.device)
    return out.scatter_add_(1, state.hole.clamp_min(0), lp)


@torch.inference_mode()
def denoise_steps(
    model: DiffusionModel,
    ctx: Bound,
    state: Windows,
    schedule: Schedule,
    generators: list[torch.Generator] | None = None,
    constraint: Constraint | None = None,
    cancel: CancelFlag | None = None,
    deadline: float | None = None,
    row_steps: torch.Tensor | None = None,
    drafter: Callable[[Windows, int], torch.Tensor] | None = None,
) -> Iterator[Step]:
    """Denoise ``state`` in place, yielding a Step after each model call.

    ``row_steps`` [R] gives each row its own number of steps (default: schedule.steps for all),
    so a row behaves the same whatever it is batched with. ``deadline`` is a time.monotonic()
    value: once passed, the next step commits everything. Raises Cancelled if ``cancel`` is set
    between steps.
    """
    den = Denoiser(model, state, schedule, generators, constraint, deadline, row_steps, drafter)
    rows = ActiveRows(model, ctx, state.pos)
    while den.pending():
        if cancel is not None and cancel.is_set():
            raise Cancelled("fill cancelled")
        # Logits only for masked slots: committed ones need none (the vocabulary projection is
        # the largest cost of a step for a small model).
        ids = den.fed_ids()
        candidates = den.live()
        active = candidates.any(1)
        hidden = rows.hidden(ids, den.valid, active)
        yield den.advance(model.logits(hidden[candidates[active]]))


def denoise(model: DiffusionModel, ctx: Bound, state: Windows, schedule: Schedule, **kwargs) -> tuple[Windows, int]:
    """Drain denoise_steps; return the final state and the number of model calls."""
    steps = 0
    for _ in denoise_steps(model, ctx, state, schedule, **kwargs):
        steps += 1
    return state, steps


def with_steps(schedule: Schedule, steps: int) -> Schedule:
    return replace(schedule, steps=max(1, steps))
