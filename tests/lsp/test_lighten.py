"""Under load, elastic fills give up candidates, then steps (infill.lsp.scheduler.lighten)."""

from infill.protocol import FillRequest, Hole, SamplingOptions
from infill.lsp.scheduler import lighten


def test_lighten_sheds_candidates_then_steps():
    r = FillRequest(text="x = ", holes=[Hole(4, 4, 32)])
    assert lighten(r, 1, candidates=2, tokens_per_step=2) is r
    two = lighten(r, 2, candidates=2, tokens_per_step=2).options
    assert (two.candidates, two.steps) == (1, None)  # half the work: one candidate, usual steps
    eight = lighten(r, 8, candidates=2, tokens_per_step=2).options
    assert (eight.candidates, eight.steps) == (1, 8)  # a quarter: one candidate, half of 16 steps
    mine = FillRequest(text="x = ", holes=[Hole(4, 4, 32)], options=SamplingOptions(steps=12, candidates=4))
    assert lighten(mine, 4, candidates=2, tokens_per_step=2).options.candidates == 1
    assert lighten(mine, 4, candidates=2, tokens_per_step=2).options.steps == 12
    three = lighten(mine, 8, candidates=2, tokens_per_step=2).options
    assert (three.candidates, three.steps) == (1, 12)
    thr = FillRequest(text="x = ", holes=[Hole(4, 4, 32)], options=SamplingOptions(threshold=0.9, candidates=1))
    assert lighten(thr, 8, candidates=2, tokens_per_step=2) is thr  # nothing it can shed

