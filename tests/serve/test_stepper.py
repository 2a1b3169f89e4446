"""The step-level engine API (infill/engine/stepper.py): requests join and leave a running batch."""

from __future__ import annotations

import threading

import pytest
import torch

from infill.engine.stepper import Stepper
from infill.errors import Cancelled
from infill.protocol import FillRequest, Hole, SamplingOptions

CODE = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    "


def req(text=CODE, n=8, language="python", **opts) -> FillRequest:
    return FillRequest(text=text, holes=[Hole(len(text), len(text), n)], language=language,
                       options=SamplingOptions(**opts))


def drain(stepper, limit=500):
    done = []
    for _ in range(limit):
        if not stepper.slots:
            return done
        done.extend(stepper.step())
    raise AssertionError("the stepper did not finish")


@pytest.mark.parametrize("language", ["python", None])
def test_one_request_alone_fills_as_the_engine_does(tiny_engine, language):
    r = req(language=language)
    want = tiny_engine.fill(r)
    st = Stepper(tiny_engine)
    slot = st.add(r)
    drain(st)
    assert slot.error is None
    assert [f.text for f in slot.result.fills] == [f.text for f in want.fills]


def test_requests_join_a_running_batch_and_leave_when_done(tiny_engine):
    st = Stepper(tiny_engine)
    a = st.add(req(n=16, steps=8))
    st.step()
    assert st.last_call == [(a.id, a.rows)]
    two_holes = "x = 1\n\ny = 2\n"
    b = st.add(FillRequest(text=two_holes, holes=[Hole(5, 5, 4), Hole(12, 12, 6)], options=SamplingOptions(steps=2)))
    st.step()  # b's rows joined a's running batch: one model call over both
    assert {sid for sid, _ in st.last_call} == {a.id, b.id}
    done = drain(st)
    assert b in done and a in done and not st.slots
    assert len(b.result.fills) == 2 and len(a.result.fills) == 1


def test_cancel_takes_effect_at_the_next_step_and_rows_leave(tiny_engine):
    st = Stepper(tiny_engine)
    flag = threading.Event()
    a = st.add(req(n=16, steps=8), cancel=flag)
    b = st.add(req(n=16, steps=8, seed=1, temperature=0.5))
    st.step()
    flag.set()
    done = st.step()
    assert a in done and isinstance(a.error, Cancelled)
    assert [sid for sid, _ in st.last_call] == [b.id]
    drain(st)
    assert b.result is not None and st.live_rows == 0


def test_drafts_every_n_steps(tiny_engine):
    st = Stepper(tiny_engine)
    drafts = []
    st.add(req(n=16, steps=8, constrained=False), on_draft=drafts.append, draft_every=2)
    drain(st)
    assert [d.step for d in drafts] == [2, 4, 6]
    assert all(len(d.texts) == 1 for d in drafts)



def test_rows_that_finish_leave_the_model_call_and_the_others_go_on_alike(tiny_engine, monkeypatch):
    from infill.decode import sampler

    held = []
    real = sampler.ActiveRows.hidden

    def spy(self, ids, valid, active):
        out = real(self, ids, valid, active)
        held.append(None if self.held is None else self.held.tolist())
        return out

    monkeypatch.setattr(sampler.ActiveRows, "hidden", spy)
    r = req(n=24, candidates=4, constrained=False, retry=False)

    def run(finish_others: bool):
        held.clear()
        st = Stepper(tiny_engine)
        slot = st.add(r)
        assert slot.rows == 4
        st.step()
        if finish_others:  # rows 1-3 end here, as short candidates do
            with torch.inference_mode():
                slot.state.masked[1:] = False
        drain(st)
        return slot.state.ids[0].tolist(), list(held)

    alone, calls = run(True)
    assert calls[0] is None and calls[1:] and all(h == [0] for h in calls[1:]), "one row left: only it runs"
    together, calls = run(False)
    assert all(h is None for h in calls)
    assert alone == together, "a row's fill does not depend on the rows run along with it"


def test_a_fill_under_its_floor_stops_and_leaves_as_the_engines_does(default_engine, one_torch_thread):
    """The default model's schedule is left to right: a slot whose committed tokens already score
    under its request's ``min_score`` leaves the batch then, with the engine's result (empty,
    unjudged, below_floor), while the slot beside it fills on to its end."""
    text = "import os\n\n\ndef load(base, name):\n    for alias in \n"
    at = text.index("in ") + len("in ")
    def request(floor):
        return FillRequest(text=text, holes=[Hole(at, at)], language="python",
                           options=SamplingOptions(candidates=1, min_score=floor))
    default_engine.forget(contexts=False)
    want = default_engine.fill(request(-0.05))
    assert want.below_floor
    default_engine.forget(contexts=False)
    st = Stepper(default_engine)
    whole, high = st.add(request(None)), st.add(request(-0.05))
    left = []
    while st.slots:
        left.append((st.step(), [s.id for s in st.slots]))
    assert high.error is None and whole.error is None
    assert high.result.below_floor and not whole.result.below_floor and whole.result.fills[0].text
    got, exp = high.result.fills[0], want.fills[0]
    assert (got.text, got.valid) == (exp.text, exp.valid) == ("", None)
    # (the scores agree to the kernels' rounding: the stepper runs both slots' rows in one call, the
    # engine each request's alone, and on a CPU without AVX-512 a call's row count picks the kernel)
    assert got.score == pytest.approx(exp.score, abs=0.05)
    assert high.result.timings.steps == want.timings.steps < whole.result.timings.steps
    out_at = next(i for i, (done, _) in enumerate(left) if high in done)
    assert whole.id in left[out_at][1]  # it left while the other went on
