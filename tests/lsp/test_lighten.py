"""Under load, elastic fills give up candidates, then steps (infill.lsp.scheduler.lighten)."""

import math

from infill.protocol import FillRequest, Hole, SamplingOptions
from infill.lsp.scheduler import lighten


def two_per_step(slots: int) -> int:  # the engine's step rule at tokens_per_step=2
    return math.ceil(slots / 2)


def test_lighten_sheds_candidates_then_steps():
    r = FillRequest(text="x = ", holes=[Hole(4, 4, 32)])
    assert lighten(r, 1, candidates=2, default_steps=two_per_step) is r
    two = lighten(r, 2, candidates=2, default_steps=two_per_step).options
    assert (two.candidates, two.steps) == (1, None)  # half the work: one candidate, usual steps
    eight = lighten(r, 8, candidates=2, default_steps=two_per_step).options
    assert (eight.candidates, eight.steps) == (1, 8)  # a quarter: one candidate, half of 16 steps
    mine = FillRequest(text="x = ", holes=[Hole(4, 4, 32)], options=SamplingOptions(steps=12, candidates=4))
    assert lighten(mine, 4, candidates=2, default_steps=two_per_step).options.candidates == 1
    assert lighten(mine, 4, candidates=2, default_steps=two_per_step).options.steps == 12
    three = lighten(mine, 8, candidates=2, default_steps=two_per_step).options
    assert (three.candidates, three.steps) == (1, 12)
    thr = FillRequest(text="x = ", holes=[Hole(4, 4, 32)], options=SamplingOptions(threshold=0.9, candidates=1))
    assert lighten(thr, 8, candidates=2, default_steps=two_per_step) is thr  # nothing it can shed



def test_lighten_asks_the_engine_for_its_step_rule():
    r = FillRequest(text="x = ", holes=[Hole(4, 4, 32)])
    asked = []

    def rule(slots: int) -> int:  # whatever the engine's rule is, lighten starts from it
        asked.append(slots)
        return 7

    assert lighten(r, 8, candidates=2, default_steps=rule).options.steps == 4  # 7 steps / 2 left to shed
    assert asked == [32]


def test_engine_default_steps_is_the_schedule_it_runs(tiny_engine):
    for slots in (1, 8, 9, 32):
        assert tiny_engine.schedule(SamplingOptions(), slots).steps == tiny_engine.default_steps(slots)
    assert tiny_engine.default_steps(9) == math.ceil(9 / tiny_engine.config.tokens_per_step)
