"""Sampler invariants, with a scripted model (exact control of logits) and a tiny random model."""

from dataclasses import replace
import math
import threading

import pytest
import torch

from infill.errors import Cancelled
from infill.model.seam import Capabilities
from infill.model.network import BoundContext, DiffusionLM, ModelConfig
from infill.decode.sampler import (Schedule, Windows, choose, committed_scores, denoise, denoise_steps, pad_tail, propose,
                            ranked, tokens_this_step, top_p_filter)

V = 16
PAD, MASK = 0, 1


class Scripted:
    """A stand-in model: logits favour token ``3 + slot index`` with a per-slot confidence."""

    def __init__(self, confidence=None, pad_from=None):
        self.mask_id, self.pad_id = MASK, PAD  # what the sampler reads of the seam, besides its two methods
        self.capabilities = Capabilities(exact_segment_cache=True)
        self.calls = 0
        self.rows: list[int] = []  # rows of each call
        self.confidence = confidence  # [W] logit margins; higher = more confident
        self.pad_from = pad_from  # slots from here on prefer pad

    def logits(self, h):
        return h

    def window_hidden(self, ids, pos, valid, ctx):
        self.calls += 1
        R, W = ids.shape
        self.rows.append(R)
        logits = torch.zeros(R, W, V)
        for w in range(W):
            tok = PAD if self.pad_from is not None and w >= self.pad_from else 3 + (w % (V - 3))
            logits[:, w, tok] = self.confidence[w] if self.confidence is not None else 5.0
        return logits


def fresh(R=1, W=8, holes=None):
    hole = torch.zeros(R, W, dtype=torch.long) if holes is None else torch.tensor(holes).expand(R, W).clone()
    valid = hole >= 0
    return Windows(
        ids=torch.where(valid, MASK, PAD),
        pos=torch.arange(W).expand(R, W).clone(),
        hole=hole,
        masked=valid.clone(),
        logprob=torch.zeros(R, W),
    )


def empty_ctx(R):
    return BoundContext([], [], torch.zeros(R, 0, dtype=torch.bool))


def test_k_per_step_takes_exactly_the_requested_steps():
    for W, steps in [(8, 4), (8, 8), (8, 3), (7, 2), (5, 1)]:
        model = Scripted()
        state, n = denoise(model, empty_ctx(1), fresh(W=W), Schedule(steps=steps))
        assert n == steps == model.calls
        assert not state.masked.any()
        assert (state.ids == torch.arange(3, 3 + W)).all()


def test_committed_slots_are_never_rewritten():
    model = Scripted()
    seen = {}
    for step in denoise_steps(model, empty_ctx(1), fresh(W=8), Schedule(steps=4)):
        for w in range(8):
            if not step.masked[0, w]:
                seen.setdefault(w, int(step.ids[0, w]))
                assert int(step.ids[0, w]) == seen[w]
        assert int(step.committed.sum()) == 2


def test_confidence_policy_commits_most_confident_first():
    conf = torch.tensor([1.0, 9.0, 2.0, 8.0])
    model = Scripted(confidence=conf)
    first = next(denoise_steps(model, empty_ctx(1), fresh(W=4), Schedule(steps=2)))
    assert first.committed[0].tolist() == [False, True, False, True]


def test_threshold_schedule_commits_all_confident_slots_and_at_least_one():
    # Four sure slots (p ~ 1) and four unsure ones (p ~ 0.2): step 1 commits the sure ones,
    # then the unsure ones go one per step: 1 + 4 steps.
    conf = torch.tensor([20.0] * 4 + [1.0] * 4)
    model = Scripted(confidence=conf)
    state, n = denoise(model, empty_ctx(1), fresh(W=8), Schedule(steps=8, threshold=0.9))
    assert n == 5
    assert not state.masked.any()


def test_pad_terminates_the_window_and_every_slot_is_filled_or_padded():
    model = Scripted(pad_from=3)
    state, n = denoise(model, empty_ctx(1), fresh(W=8), Schedule(steps=8))
    assert state.ids[0, :3].tolist() == [3, 4, 5]
    assert (state.ids[0, 3:] == PAD).all()
    assert n < 8  # committing a pad fills the rest of the window at once
    assert not (state.ids == MASK).any()


def test_an_end_with_an_end_set_is_scored_as_that_set_not_as_the_pad():
    # Slot 3's logits: pad 5.0 and every other token 0.0 (the mask token is never proposed). With
    # tokens 7 and 9 as the text after the hole, the pad committed there is scored as their joint
    # log-probability; without, as the pad.
    end = torch.tensor([[-1, -1, -1, 0, 0, 0]])
    logp = torch.log_softmax(torch.tensor([5.0, float("-inf")] + [0.0] * (V - 2)), -1)
    for ends in (end, None):
        state = fresh(W=6)
        if ends is not None:
            state.ends, state.end_sets = ends, torch.zeros(1, V, dtype=torch.bool)
            state.end_sets[0, [7, 9]] = True
        denoise(Scripted(pad_from=3), empty_ctx(1), state, Schedule(steps=6, frontier=True, policy="left-to-right"))
        assert state.ids[0].tolist() == [3, 4, 5, PAD, PAD, PAD]
        want = torch.logsumexp(logp[[7, 9]], 0) if ends is not None else logp[PAD]
        assert float(state.logprob[0, 3]) == pytest.approx(float(want), abs=1e-5)
        assert state.logprob[0, :3].tolist() == pytest.approx([float(logp[0])] * 3, abs=1e-5)  # (5.0 at their token)


def test_pad_tail_is_per_hole():
    hole = torch.tensor([[0, 0, 0, 1, 1, 1]])
    committed_pad = torch.tensor([[False, True, False, False, False, False]])
    masked = torch.ones(1, 6, dtype=torch.bool)
    assert pad_tail(hole, committed_pad, masked).tolist() == [[False, False, True, False, False, False]]


def test_batch_padding_slots_are_left_alone():
    holes = [0, 0, 0, -1, -1]
    model = Scripted()
    state, _ = denoise(model, empty_ctx(1), fresh(W=5, holes=holes), Schedule(steps=2))
    assert (state.ids[0, 3:] == PAD).all()
    assert state.ids[0, :3].tolist() == [3, 4, 5]


def test_cancel_stops_within_one_step():
    model = Scripted()
    flag = threading.Event()
    gen = denoise_steps(model, empty_ctx(1), fresh(W=8), Schedule(steps=8), cancel=flag)
    next(gen)
    flag.set()
    with pytest.raises(Cancelled):
        next(gen)
    assert model.calls == 1


def test_deadline_commits_everything_at_the_next_step():
    model = Scripted()
    state, n = denoise(model, empty_ctx(1), fresh(W=8), Schedule(steps=8), deadline=0.0)
    assert n == 1 and not state.masked.any()


def test_tokens_this_step_spreads_evenly():
    remaining, total = 10, 0
    for left in range(4, 0, -1):
        k = int(tokens_this_step(torch.tensor([remaining]), left))
        remaining -= k
        total += k
    assert total == 10 and remaining == 0


def test_choose_respects_allowed():
    score = torch.tensor([[0.9, 0.8, 0.7]])
    allowed = torch.tensor([[False, True, True]])
    pick = choose(score, score, allowed, torch.tensor([1]), None)
    assert pick.tolist() == [[False, True, False]]


def test_top_p_keeps_the_smallest_nucleus():
    logp = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    out = top_p_filter(logp, 0.7).exp()
    assert out[0, 2:].sum() == 0
    assert math.isclose(float(out[0, 0]), 0.5 / 0.8, rel_tol=1e-5)


def _tiny():
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=64, d_model=32, n_layers=2, n_heads=2, d_ff=64)
    return DiffusionLM(cfg).eval()


def _tiny_fill(model, seed, temperature=1.0, rows=2):
    ctx_ids = torch.randint(3, 64, (1, 10), generator=torch.Generator().manual_seed(1))
    cache = model.encode_context(ctx_ids, torch.zeros(1, 10, dtype=torch.long))
    bound = model.bind_context(cache, torch.zeros(rows, dtype=torch.long), torch.arange(10).expand(rows, 10))
    state = fresh(R=rows, W=6)
    state.pos = state.pos + 10
    gens = [torch.Generator().manual_seed(seed + r) for r in range(rows)]
    denoise(model, bound, state, Schedule(steps=3, temperature=temperature, top_p=0.95), generators=gens)
    return state.ids


def test_same_seed_same_fill_and_rows_are_independent_of_batching():
    model = _tiny()
    a, b = _tiny_fill(model, seed=7), _tiny_fill(model, seed=7)
    assert torch.equal(a, b)
    single = _tiny_fill(model, seed=7, rows=1)
    assert torch.equal(single[0], a[0])
    others = [_tiny_fill(model, seed=s) for s in range(8, 12)]
    assert any(not torch.equal(a, o) for o in others)


def test_two_holes_are_filled_jointly_in_one_pass_per_step():
    model = Scripted()
    holes = [0, 0, 0, 0, 1, 1, 1, 1]
    state, n = denoise(model, empty_ctx(1), fresh(W=8, holes=holes), Schedule(steps=4))
    assert n == model.calls == 4  # one model call per step covers both holes
    assert not state.masked.any()


def test_left_to_right_policy_commits_in_position_order():
    conf = torch.tensor([1.0, 9.0, 2.0, 8.0])
    model = Scripted(confidence=conf)
    order = [step.committed[0].nonzero().flatten().tolist() for step in
             denoise_steps(model, empty_ctx(1), fresh(W=4), Schedule(steps=4, policy="left-to-right"))]
    assert order == [[0], [1], [2], [3]]


def test_sampling_builds_no_autograd_graph():
    model = _tiny()
    ctx = model.bind_context(model.encode_context(torch.tensor([[5, 6, 7]]), torch.zeros(1, 3, dtype=torch.long)),
                             torch.tensor([0]), torch.tensor([[0, 1, 2]]))
    state = fresh(W=4)
    state.pos = state.pos + 3
    denoise(model, ctx, state, Schedule(steps=2))
    assert not state.logprob.requires_grad


def test_min_tokens_forbids_pad_in_the_first_slots():
    model = Scripted(pad_from=0)  # the model would rather leave the hole empty
    state = fresh(W=4)
    state.no_pad = torch.tensor([[True, False, False, False]])
    denoise(model, empty_ctx(1), state, Schedule(steps=4))
    assert state.ids[0, 0] != PAD and (state.ids[0, 1:] == PAD).all()


def test_a_fill_ends_only_where_everything_before_it_is_decided():
    # The model is sure slots 2.. are pad, unsure about slots 0-1: pad may not be committed
    # before slots 0-1 are, so the end is decided last.
    conf = torch.tensor([1.0, 1.0, 20.0, 20.0])
    model = Scripted(confidence=conf, pad_from=2)
    steps = list(denoise_steps(model, empty_ctx(1), fresh(W=4), Schedule(steps=4)))
    assert steps[0].committed[0].tolist()[:2] != [False, False]
    assert steps[0].ids[0, 2] == MASK or not steps[0].masked[0, :2].any()
    loose = list(denoise_steps(Scripted(confidence=conf, pad_from=2), empty_ctx(1), fresh(W=4), Schedule(steps=4, pad_in_order=False)))
    assert loose[0].committed[0, 2] or loose[0].committed[0, 3]


def test_first_masked_is_per_hole():
    from infill.decode.sampler import first_masked

    hole = torch.tensor([[0, 0, 0, 1, 1, -1]])
    masked = torch.tensor([[False, True, True, True, True, False]])
    assert first_masked(hole, masked).tolist() == [[False, True, False, True, False, False]]


def test_a_refusal_holds_back_only_its_own_holes_later_slots():
    from infill.decode.sampler import past_refusal

    hole = torch.tensor([[0, 0, 0, 1, 1, -1]])
    refused = torch.tensor([[False, True, False, False, False, False]])
    assert past_refusal(hole, refused).tolist() == [[False, True, True, False, False, False]]


def first_allowed(proposal, candidates, alternatives, ok):
    """A constraint's steer for a rule ``ok(slot, token)`` of single slots: a refused proposal
    takes the first alternative the rule allows, else the slot is refused."""
    tokens, allowed = proposal.clone(), candidates.clone()
    for r, k in candidates.nonzero().tolist():
        if not ok(k, int(tokens[r, k])):
            t = next((t for t in (alternatives(r, k) if alternatives else []) if ok(k, t)), None)
            if t is None:
                allowed[r, k] = False
            else:
                tokens[r, k] = t
    return tokens, allowed


class NoEndBefore:
    """A constraint that refuses to let the fill end (pad) before slot ``k``."""

    def __init__(self, k):
        self.k = k

    def steer(self, state, proposal, candidates, alternatives):
        return first_allowed(proposal, candidates, alternatives, lambda k, t: t != PAD or k >= self.k)

    def remask(self, state):
        return torch.zeros_like(state.masked)


def test_a_refused_end_gets_the_best_continuation_instead():
    model = Scripted(pad_from=1)  # the model would end the fill after one token
    state = fresh(W=5)
    denoise(model, empty_ctx(1), state, Schedule(steps=5), constraint=NoEndBefore(3))
    ids = state.ids[0].tolist()
    assert all(t not in (PAD, MASK) for t in ids[:3]) and ids[3:] == [PAD, PAD]


def test_finished_rows_are_left_out_of_the_model_calls():
    # Row 0 has 2 slots, row 1 has 8; both get 4 steps, so row 0 is done after 2 of them.
    model = Scripted()
    hole = torch.tensor([[0, 0, -1, -1, -1, -1, -1, -1], [0] * 8])
    state = Windows(ids=torch.where(hole >= 0, MASK, PAD), pos=torch.arange(8).expand(2, 8).clone(), hole=hole,
                    masked=hole >= 0, logprob=torch.zeros(2, 8))
    denoise(model, empty_ctx(2), state, Schedule(steps=4), row_steps=torch.tensor([2, 4]))
    assert model.rows == [2, 2, 1, 1]
    assert (state.ids[1] == torch.arange(3, 11)).all() and (state.ids[0, :2] == torch.tensor([3, 4])).all()


def test_active_rows_give_the_same_states_as_all_rows():
    from infill.decode.sampler import ActiveRows

    model = _tiny()
    ctx_ids = torch.randint(3, 64, (3, 10), generator=torch.Generator().manual_seed(1))
    cache = model.encode_context(ctx_ids, torch.zeros(3, 10, dtype=torch.long))
    pos = torch.arange(10, 16).expand(3, 6).clone()
    ids = torch.randint(3, 64, (3, 6), generator=torch.Generator().manual_seed(2))
    valid = torch.ones(3, 6, dtype=torch.bool)
    full = model.window_hidden(ids, pos, valid, model.bind_context(cache, torch.arange(3), torch.arange(10).expand(3, 10)))
    bound = model.bind_context(cache, torch.arange(3), torch.arange(10).expand(3, 10))
    rows = ActiveRows(model, bound, pos)
    selected = []
    real_select = type(bound).select

    def select(self, which):
        selected.append(which.tolist())
        return real_select(self, which)

    type(bound).select = select
    try:
        # 2 of 3 active: run along, no copy; 1 of 3: narrowed (from the rows held); all again: from the whole context.
        for active, copies in (([True, False, True], []), ([False, False, True], [[2]]), ([True, True, True], [[2], [0, 1, 2]])):
            out = rows.hidden(ids, valid, torch.tensor(active))
            assert torch.allclose(out, full[torch.tensor(active)], atol=1e-5)
            assert selected == copies
    finally:
        type(bound).select = real_select


class EndOnlyAtFirst:
    """A constraint that lets one slot a step through: the first masked one."""

    def steer(self, state, proposal, candidates, alternatives):
        from infill.decode.sampler import first_masked

        return proposal, candidates & first_masked(state.hole, state.masked)

    def remask(self, state):
        return torch.zeros_like(state.masked)


def test_a_held_back_row_commits_what_is_left_after_its_step_budget():
    model = Scripted()
    state, n = denoise(model, empty_ctx(1), fresh(W=8), Schedule(steps=4, overrun=0.25), constraint=EndOnlyAtFirst())
    assert n == 5 and not state.masked.any()  # one slot a step for 4 steps, then the other 4 at once
    state, n = denoise(Scripted(), empty_ctx(1), fresh(W=8), Schedule(steps=4, overrun=1.0), constraint=EndOnlyAtFirst())
    assert n == 8


class Refuses:
    """A constraint that refuses some tokens everywhere."""

    def __init__(self, tokens):
        self.tokens = set(tokens)

    def steer(self, state, proposal, candidates, alternatives):
        return first_allowed(proposal, candidates, alternatives, lambda k, t: t not in self.tokens)

    def remask(self, state):
        return torch.zeros_like(state.masked)


class Ranked:
    """A stand-in model whose every slot ranks tokens 3, 4, 5, ... in that order."""

    def __init__(self):
        self.mask_id, self.pad_id = MASK, PAD  # what the sampler reads of the seam, besides its two methods
        self.capabilities = Capabilities(exact_segment_cache=True)

    def logits(self, h):
        return h

    def window_hidden(self, ids, pos, valid, ctx):
        R, W = ids.shape
        return torch.tensor([-float(abs(t - 3)) if t >= 3 else -20.0 for t in range(V)]).expand(R, W, V).clone()


def test_a_refused_token_gets_the_best_allowed_one_instead():
    state = fresh(W=4)
    denoise(Ranked(), empty_ctx(1), state, Schedule(steps=4, pad_in_order=False), constraint=Refuses({3, 4}))
    assert state.ids[0].tolist() == [5, 5, 5, 5]  # the third choice, the first two refused
    state = fresh(W=4)
    denoise(Ranked(), empty_ctx(1), state, Schedule(steps=4, pad_in_order=False, alternatives=1), constraint=Refuses({3, 4}))
    assert 5 not in state.ids[0].tolist()  # not searched deep enough: held back, then forced


class RefusesAt:
    """A constraint that refuses every proposal at one slot, and can name a token it allows there."""

    def __init__(self, slot, rescue=None):
        self.slot, self.rescue, self.asked = slot, rescue, []

    def steer(self, state, proposal, candidates, alternatives):
        out = candidates.clone()
        out[:, self.slot] = False
        return proposal, out

    def remask(self, state):
        return torch.zeros_like(state.masked)

    def first_admissible(self, state, row, slot, tokens):
        self.asked.append((slot, tokens[:3]))
        return self.rescue if slot == self.slot and self.rescue in tokens else None


def test_left_to_right_never_commits_past_a_refused_slot():
    state = fresh(W=6)
    steps = list(denoise_steps(Scripted(), empty_ctx(1), state, Schedule(steps=3, policy="left-to-right", pad_in_order=False),
                               constraint=RefusesAt(2)))
    for s in steps:  # what a step commits lies left of every slot still masked after it
        masked = s.masked[0].tolist()
        first = masked.index(True) if True in masked else len(masked)
        assert all(i < first for i in s.committed[0].nonzero().flatten().tolist())
    assert [s.committed[0].nonzero().flatten().tolist() for s in steps][:2] == [[0, 1], [2]]  # slot 2 forced alone
    assert not state.masked.any()


def test_a_stuck_slot_takes_the_best_token_the_constraint_allows_from_deep_in_its_ranking():
    c = RefusesAt(0, rescue=12)  # far below alternatives' reach: Ranked puts 12 ninth
    state = fresh(W=1)
    denoise(Ranked(), empty_ctx(1), state, Schedule(steps=1, pad_in_order=False, alternatives=2), constraint=c)
    assert state.ids[0].tolist() == [12] and c.asked[0][1] == [3, 4, 5]
    state = fresh(W=1)  # a constraint that cannot name one: the best slot is forced with its proposal
    denoise(Ranked(), empty_ctx(1), state, Schedule(steps=1, pad_in_order=False, alternatives=2), constraint=RefusesAt(0))
    assert state.ids[0].tolist() == [3]


def test_a_hole_stuck_beside_one_that_goes_on_is_rescued():
    c = RefusesAt(0, rescue=12)  # hole 0's only slot is refused; hole 1 has slots it allows
    state = fresh(W=3, holes=[0, 1, 1])
    steps = denoise_steps(Ranked(), empty_ctx(1), state, Schedule(steps=3, pad_in_order=False, alternatives=2), constraint=c)
    next(steps)
    assert c.asked and c.asked[0][0] == 0  # asked in the first step, not once hole 1 is done
    list(steps)
    assert state.ids[0, 0] == 12


def test_left_to_right_holes_side_by_side_go_on_together():
    from infill.decode.sampler import hole_rank

    assert hole_rank(torch.tensor([[0, 0, 0, 1, 1, -1]])).tolist() == [[0, 1, 2, 0, 1, 0]]
    state = fresh(W=6, holes=[0, 0, 0, 1, 1, 1])
    steps = list(denoise_steps(Scripted(), empty_ctx(1), state, Schedule(steps=3, policy="left-to-right", pad_in_order=False)))
    assert steps[0].committed[0].nonzero().flatten().tolist() == [0, 3]  # each hole's first slot, not hole 0's first two


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_ranked_tokens_are_what_propose_picks_once_the_better_ones_are_ruled_out(temperature):
    torch.manual_seed(0)
    logp = torch.log_softmax(torch.randn(5, 40), dim=-1)
    noise = torch.rand(5, 40) if temperature else None
    schedule = Schedule(steps=1, temperature=temperature)
    order, _ = ranked(logp, schedule, noise, depth=4)
    banned = torch.zeros_like(logp, dtype=torch.bool)
    for j in range(4):
        token = propose(logp.masked_fill(banned, float("-inf")), schedule, noise)[0]
        assert torch.equal(order[:, j], token)
        banned[torch.arange(5), token] = True


# -- variable length (a model with an expand token: DreamOn) -------------------------------------

EXPAND = 2


def test_reshape_grows_at_an_expand_and_closes_up_after_a_delete():
    from infill.decode.sampler import reshape

    # hole 0: [a, <expand>, b, spare]; hole 1: [c, pad (deleted), d, spare]; -1: batch padding
    state = Windows(ids=torch.tensor([[10, EXPAND, 11, PAD, 12, PAD, 13, PAD, PAD]]), pos=torch.arange(9)[None],
                    hole=torch.tensor([[0, 0, 0, 0, 1, 1, 1, 1, -1]]), masked=torch.zeros(1, 9, dtype=torch.bool),
                    logprob=torch.arange(9, dtype=torch.float)[None] / -10)
    reshape(state, EXPAND, MASK, PAD)
    assert state.ids.tolist() == [[10, MASK, MASK, 11, 12, 13, PAD, PAD, PAD]]
    assert state.masked.tolist() == [[False, True, True, False, False, False, False, False, False]]
    assert state.logprob[0, [0, 3, 4, 5]].tolist() == pytest.approx([0.0, -0.2, -0.4, -0.6])  # kept with their tokens
    # a hole with no spare slot left: the expand slot is only masked again, nothing is pushed out
    full = Windows(ids=torch.tensor([[10, EXPAND, 11]]), pos=torch.arange(3)[None], hole=torch.zeros(1, 3, dtype=torch.long),
                   masked=torch.zeros(1, 3, dtype=torch.bool), logprob=torch.zeros(1, 3))
    reshape(full, EXPAND, MASK, PAD)
    assert full.ids.tolist() == [[10, MASK, 11]] and full.masked.tolist() == [[False, True, False]]


class Growing(Scripted):
    """A variable-length stand-in that always wants to grow: expand is every slot's first choice."""

    def __init__(self):
        super().__init__()
        self.capabilities = Capabilities(exact_segment_cache=True, expand_id=EXPAND)

    def window_hidden(self, ids, pos, valid, ctx):
        logits = super().window_hidden(ids, pos, valid, ctx)
        logits[..., EXPAND] = 50.0
        return logits


def test_a_hole_grows_into_its_spare_slots_and_no_further():
    state = fresh(W=8)
    state.ids[0, 2:], state.masked[0, 2:] = PAD, False  # two live slots, six spare
    steps = list(denoise_steps(Growing(), empty_ctx(1), state, Schedule(steps=8)))
    assert not state.masked.any() and len(steps) <= 8  # ends within its step budget
    assert (state.ids[0] != PAD).all() and not (state.ids[0] == EXPAND).any()  # grew to the whole window
    assert state.masked.sum() == 0 and max(int(s.masked.sum()) for s in steps) > 2  # more masked slots than it began with


def test_a_growing_hole_stops_at_its_last_step():
    state = fresh(W=8)
    state.ids[0, 1:], state.masked[0, 1:] = PAD, False
    steps = list(denoise_steps(Growing(), empty_ctx(1), state, Schedule(steps=2)))
    assert len(steps) == 2 and not state.masked.any() and not (state.ids == EXPAND).any()


def test_a_deleted_slot_closes_up_behind_what_was_committed_after_it():
    class Ends(Growing):  # slot 1 wants to be deleted; slots 2-3 are surer than slot 0
        def window_hidden(self, ids, pos, valid, ctx):
            logits = Scripted.window_hidden(self, ids, pos, valid, ctx)
            logits[:, 1, PAD] = 60.0
            return logits

    model = Ends()
    model.confidence = torch.tensor([5.0, 1.0, 30.0, 30.0, 1.0, 1.0])
    state = fresh(W=6)
    state.ids[0, 4:], state.masked[0, 4:] = PAD, False
    denoise(model, empty_ctx(1), state, Schedule(steps=6))
    assert state.ids[0].tolist() == [3, 5, 6, PAD, PAD, PAD]  # slot 1 deleted; a fixed window would end the fill at it


# -- speculative left-to-right steps (Schedule.lookahead, a drafter) -------------------------------


class Counting(Scripted):
    """A left-to-right stand-in: a slot's favourite token is one more than the token before it
    (the first slot's: 3), read from the ids the model is run with (drafts included)."""

    def window_hidden(self, ids, pos, valid, ctx):
        self.calls += 1
        R, W = ids.shape
        logits = torch.zeros(R, W, V)
        for r in range(R):
            for w in range(W):
                before = 2 if w == 0 else int(ids[r, w - 1])
                logits[r, w, 3 + (before - 2) % (V - 3)] = 5.0
        return logits


def test_speculative_steps_commit_the_guessed_run_and_give_the_same_fill():
    def drafter(state, k):  # right for two slots, then wrong
        out = torch.full(state.ids.shape, -1)
        f = int(state.masked[0].nonzero()[0])
        truth = [3 + i for i in range(8)]
        guess = truth[f : f + 2] + [9] * k
        out[0, f : f + k] = torch.tensor(guess[:k])[: 8 - f]
        return out

    plain = Counting()
    want, plain_steps = denoise(plain, empty_ctx(1), fresh(W=8), Schedule(steps=8, policy="left-to-right", frontier=True))
    model = Counting()
    got, steps = denoise(model, empty_ctx(1), fresh(W=8), Schedule(steps=8, policy="left-to-right", frontier=True, lookahead=4),
                         drafter=drafter)
    assert got.ids.tolist() == want.ids.tolist() == [[3, 4, 5, 6, 7, 8, 9, 10]]
    assert plain_steps == 8 and steps == 3  # each call commits the frontier, two guessed right, and the slot after them


def test_a_wrong_draft_commits_only_the_frontier_and_sampled_rows_never_speculate():
    wrong = lambda state, k: torch.where(state.masked, 42, -1)  # noqa: E731
    schedule = Schedule(steps=8, policy="left-to-right", frontier=True, lookahead=3)
    got, steps = denoise(Counting(), empty_ctx(1), fresh(W=4), schedule, drafter=wrong)
    assert got.ids.tolist() == [[3, 4, 5, 6]] and steps == 4
    right = lambda state, k: torch.where(state.masked, torch.arange(3, 7).expand_as(state.ids), -1)  # noqa: E731
    sampled = replace(schedule, temperature=0.7)
    den_steps = list(denoise_steps(Counting(), empty_ctx(1), fresh(W=4), sampled, generators=[torch.Generator().manual_seed(0)],
                                   drafter=right))
    assert len(den_steps) == 4  # a row that samples commits one slot a step


def test_committed_scores_sum_each_holes_committed_tokens_without_pads_or_batch_padding():
    # row 0: hole 0 has two committed tokens and a pad, hole 1 one committed and one masked; row 1: padding at the end
    ids = torch.tensor([[5, 6, 0, 7, 3], [5, 3, 3, 3, 0]])
    state = Windows(ids=ids, pos=torch.zeros_like(ids), hole=torch.tensor([[0, 0, 0, 1, 1], [0, 0, 1, 1, -1]]),
                    masked=ids == 3, logprob=torch.tensor([[-0.5, -1.0, -9.0, -2.0, 0.0], [-0.25, 0.0, 0.0, 0.0, -7.0]]))
    assert committed_scores(state, pad_id=0, holes=2).tolist() == [[-1.5, -2.0], [-0.25, 0.0]]
