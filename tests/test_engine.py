"""Engine-level behaviour with the tiny random model (see conftest.py)."""

from __future__ import annotations

import gc
import math

import msgspec
import pytest

import infill.engine.finish as finish_module
from infill.engine.fill import Engine, EngineConfig, candidate_plan, segment_texts, suffix_head, validate
from infill.engine.finish import join_line_break
from infill.model.budget import budget_split
from infill.errors import InfillError, RequestError
from infill.text.holes import find_holes
from infill.protocol import FillRequest, Hole, SamplingOptions

CODE = "def add(a, b):\n    return a + b\n\n"


def test_budget_split_prefers_prefix():
    assert budget_split([10, 5], 100, 0.75) == [(0, 10), (5, 0)]  # everything fits
    assert budget_split([500, 500], 64, 0.75) == [(0, 48), (16, 0)]
    assert budget_split([500, 5], 64, 0.75) == [(0, 59), (5, 0)]  # a short suffix leaves room
    assert budget_split([5, 500], 64, 0.75) == [(0, 5), (59, 0)]
    keep = budget_split([300, 100, 300], 64, 0.75)
    assert sum(a + b for a, b in keep) <= 64 and keep[0][1] > keep[2][0]


def test_prepare_trims_to_budget_keeping_text_near_the_hole(tiny_engine):
    engine = Engine(tiny_engine.model, tiny_engine.tokenizer, EngineConfig(context_tokens=64), model_id="t")
    prefix = "".join(f"x{i} = {i} * {i}\n" for i in range(400))
    suffix = "".join(f"y{i} = {i} + {i}\n" for i in range(400))
    p = engine.prepare(FillRequest(text=prefix + suffix, holes=[Hole(len(prefix), len(prefix), 8)]))
    pre, suf = p.segments
    assert len(pre) + len(suf) <= 64
    # prefix-heavy: 75% of the budget, less up to one eighth so its start stays put while typing
    assert 48 - 8 <= len(pre) <= 48 and len(suf) == 16
    tok = engine.tokenizer
    assert prefix.endswith(tok.decode(pre)) and "x399 = 399 * 399\n" in tok.decode(pre)
    assert suffix.startswith(tok.decode(suf)) and tok.decode(suf).startswith("y0 = 0")


@pytest.mark.parametrize(
    "holes",
    [[], [Hole(0, 99)], [Hole(-1, 0)], [Hole(3, 2)], [Hole(2, 5), Hole(4, 6)], [Hole(5, 5), Hole(2, 2)],
     [Hole(0, 0, 0)], [Hole(0, 0, 513)]],
)
def test_validate_rejects(holes, tiny_engine):
    req = FillRequest(text="0123456789", holes=holes)
    with pytest.raises(RequestError):
        validate(req)
    with pytest.raises(InfillError):
        tiny_engine.fill(req)


def test_validate_accepts_adjacent_and_replacing_holes():
    validate(FillRequest(text="0123456789", holes=[Hole(0, 2), Hole(2, 2), Hole(2, 4), Hole(10, 10)]))
    assert segment_texts(FillRequest(text="0123456789", holes=[Hole(1, 3), Hole(5, 5)])) == ["0", "34", "56789"]


def test_fill_returns_one_fill_per_hole_with_timings(tiny_engine):
    text = CODE + "def sub(a, b):\n    return \n"
    req = FillRequest(text=text, holes=[Hole(5, 5, 4), Hole(len(text) - 1, len(text) - 1, 6)])
    r = tiny_engine.fill(req)
    assert len(r.fills) == 2
    for f in r.fills:
        assert isinstance(f.text, str) and math.isfinite(f.score) and f.score <= 0
    t = r.timings
    assert t.total_ms > 0 and t.denoise_ms > 0 and t.context_ms > 0 and t.tokenize_ms > 0
    assert t.steps > 0 and t.context_tokens > 0 and t.candidates == 2 and 0 <= t.tokens_filled <= 10
    assert r.model == "tiny-test"


def test_two_holes_are_denoised_jointly_in_one_pass(tiny_engine, monkeypatch):
    model = tiny_engine.model
    widths, contexts = [], []
    real_hidden, real_encode = model.window_hidden, model.encode_context

    def window_hidden(ids, pos, valid, ctx):
        widths.append(tuple(ids.shape))
        return real_hidden(ids, pos, valid, ctx)

    def encode_context(ids, seg):
        contexts.append(tuple(ids.shape))
        return real_encode(ids, seg)

    monkeypatch.setattr(model, "window_hidden", window_hidden)
    monkeypatch.setattr(model, "encode_context", encode_context)
    text = "a = 1\nb = \nc = \nd = 4\n"
    req = FillRequest(text=text, holes=[Hole(10, 10, 4), Hole(15, 15, 6)], options=SamplingOptions(candidates=1))
    r = tiny_engine.fill(req)
    assert len(r.fills) == 2
    assert len(contexts) == 1  # the context is encoded once
    # One denoising loop: every model call sees one row holding both windows (4 + 6 slots).
    assert widths == [(1, 10)] * r.timings.steps
    assert r.timings.steps == math.ceil(10 / tiny_engine.config.tokens_per_step)


def _requests(options: SamplingOptions) -> list[FillRequest]:
    texts = [
        CODE + "x = <FILL:6>\n",
        "import os\n\nprint(os.path.join(<FILL:5>, 'b'))\n",
        "for i in range(10):\n    <FILL:8>\n    print(i)\n",
        "class A:\n    def f(self):\n        return <FILL:6>\n\n    def g(self):\n        return <FILL:3>\n",
    ]
    out = []
    for t in texts:
        text, holes = find_holes(t)
        out.append(FillRequest(text=text, holes=holes, options=options))
    return out


@pytest.mark.parametrize("options", [SamplingOptions(steps=4), SamplingOptions(steps=3, policy="margin", candidates=3)])
def test_fill_batch_equals_single_fills_greedy(tiny_engine, options):
    reqs = _requests(options)
    single = [tiny_engine.fill(r) for r in reqs]
    batch = tiny_engine.fill_batch(reqs)
    assert [[f.text for f in r.fills] for r in batch] == [[f.text for f in r.fills] for r in single]
    assert [r.timings.steps for r in batch] == [r.timings.steps for r in single]
    for b, s in zip(batch, single):
        assert [f.score for f in b.fills] == pytest.approx([f.score for f in s.fills], abs=1e-4)


def test_candidate_plan():
    assert candidate_plan(SamplingOptions(), 2) == [(1.0, 0), (0.5, 0)]
    assert candidate_plan(SamplingOptions(temperature=0.5, candidates=4, seed=7), 2) == [(1.0, 7), (0.5, 7), (1.0, 8), (0.5, 8)]
    # left to right: every row the whole window; a greedy request's first row greedy (None), the rest draws
    assert candidate_plan(SamplingOptions(seed=3), 4, left_to_right=True) == [(1.0, None), (1.0, 4), (1.0, 5), (1.0, 6)]
    assert candidate_plan(SamplingOptions(temperature=0.5, candidates=2, seed=7), 4, True) == [(1.0, 7), (1.0, 8)]
    assert candidate_plan(SamplingOptions(), 1, left_to_right=True) == [(1.0, None)]


def test_suffix_head_is_the_text_after_a_hole_up_to_its_nth_line_of_code():
    after = ")\n\n    y = x\n    return y\n\n\ndef g():\n    pass\n"
    assert suffix_head(after, 1) == ")\n"
    assert suffix_head(after, 3) == ")\n\n    y = x\n    return y\n"
    assert suffix_head(after, 99) == after and suffix_head("", 4) == ""
    assert suffix_head("x" * 5000, 4, chars=100) == "x" * 100


def test_fill_batch_equals_single_fills_default_schedule(tiny_engine):
    reqs = _requests(SamplingOptions())
    single = [tiny_engine.fill(r) for r in reqs]
    batch = tiny_engine.fill_batch(reqs)
    assert [[f.text for f in r.fills] for r in batch] == [[f.text for f in r.fills] for r in single]
    assert [r.timings.steps for r in batch] == [r.timings.steps for r in single]


def test_a_hole_after_indentation_is_filled_from_the_line_start():
    from infill.engine.fill import line_start_holes
    from infill.engine.finish import drop_indent

    text = "def f():\n    x = 1\n    \n"
    req = FillRequest(text=text, holes=[Hole(23, 23, 8)])
    moved, indents = line_start_holes(req)
    assert moved.holes[0].start == 19 and moved.holes[0].end == 23 and indents == ["    "]
    assert drop_indent("    return x\n", "    ") == "return x\n"
    assert drop_indent("  y = 2", "    ") == "y = 2"
    same, none = line_start_holes(FillRequest(text="a = \n", holes=[Hole(4, 4, 8)]))
    assert same.holes[0].start == 4 and none == [""]


def test_indented_hole_fill_is_relative_to_the_original_cursor(tiny_engine):
    text = "def f():\n    x = 1\n    \n"
    r = tiny_engine.fill(FillRequest(text=text, holes=[Hole(23, 23, 8, min_tokens=1)]))
    assert not r.fills[0].text.startswith("    ")


def test_an_invalid_fill_is_cut_back_to_its_longest_valid_prefix(tiny_engine, monkeypatch):
    from infill.protocol import Fill

    text = "def main(xs):\n    print()\n"
    req = FillRequest(text=text, holes=[Hole(24, 24, 8, min_tokens=1)], language="python")
    real = tiny_engine.decode_row

    def decode_row(ids, logprob, hole, heals, path):
        fills, score, filled = real(ids, logprob, hole, heals, path)
        return [Fill(text="xs))", score=fills[0].score)], score, filled

    monkeypatch.setattr(tiny_engine, "decode_row", decode_row)
    r = tiny_engine.fill(req)
    assert r.fills[0].text == "xs" and r.fills[0].valid is True


def test_a_fill_that_leaves_a_cut_blocks_closer_stray_is_reported_invalid(tiny_engine, monkeypatch):
    """It adds no error (the stray `});` was there), but the document it leaves does not parse: it is
    not presented as valid, nor traded for an empty fill claimed valid (stay_quiet)."""
    from infill.protocol import Fill

    text = "function run(items) {\n  \n    console.log(item);\n  });\n  return items;\n}\n"
    at = text.index("  \n") + 2
    real = tiny_engine.decode_row
    monkeypatch.setattr(tiny_engine, "decode_row", lambda *a: ([Fill(text="items.sort();", score=0.0)], *real(*a)[1:]))
    req = FillRequest(text=text, holes=[Hole(at, at, 8)], language="javascript", options=SamplingOptions(candidates=1))
    r = tiny_engine.fill(req)
    assert r.fills[0].text == "items.sort();" and r.fills[0].valid is False


def test_a_fill_no_prefix_of_which_parses_is_cut_and_closed(tiny_engine, monkeypatch):
    from infill.protocol import Fill

    text = "def f():\n    y = {\n        'a': 1,\n"  # the '{' is the fill's to close
    looping = "        'b': 2,\n        'c': 3,\n        'd"  # a fill the window ended mid-entry
    real = tiny_engine.decode_row
    monkeypatch.setattr(tiny_engine, "decode_row", lambda *a: ([Fill(text=looping, score=0.0)], *real(*a)[1:]))
    req = FillRequest(text=text, holes=[Hole(len(text), len(text), 16, min_tokens=1)], language="python", options=SamplingOptions(candidates=1))
    r = tiny_engine.fill(req)
    assert r.fills[0].text == "        'b': 2,\n        'c': 3,\n        }\n" and r.fills[0].valid is True


def test_a_fill_cut_and_closed_takes_what_ends_its_statement_where_it_needs_one(tiny_engine, monkeypatch):
    from infill.protocol import Fill

    text = "int main(void) {\n    foo(1, \n    return 0;\n}\n"  # the window ran out in the call's arguments
    real = tiny_engine.decode_row
    monkeypatch.setattr(tiny_engine, "decode_row", lambda *a: ([Fill(text="2, 3, 4, 5", score=0.0)], *real(*a)[1:]))
    at = text.index("\n    return")
    r = tiny_engine.fill(FillRequest(text=text, holes=[Hole(at, at, 8)], language="c", options=SamplingOptions(candidates=1)))
    assert r.fills[0].text == "2, 3, 4, 5);" and r.fills[0].valid is True


def test_a_fill_where_only_a_statements_end_was_cut_is_that_end(tiny_engine, monkeypatch):
    from infill.protocol import Fill

    text = "int main(void) {\n    foo(1, 2)\n    return 0;\n}\n"  # the call's `;` cut: the model writes nothing
    real = tiny_engine.decode_row
    monkeypatch.setattr(tiny_engine, "decode_row", lambda *a: ([Fill(text="", score=0.0)], *real(*a)[1:]))
    at = text.index("\n    return")
    r = tiny_engine.fill(FillRequest(text=text, holes=[Hole(at, at, 8)], language="c", options=SamplingOptions(candidates=1)))
    assert r.fills[0].text == ";" and r.fills[0].valid is True
    # but not a separator that parses (C's comma operator) where the document it leaves stays broken
    text = "int f(void) {\n  y = (e - e / (D\n      e / (F - 1)) / 365;\n  return y;\n}\n"
    at = text.index("\n      e")
    r = tiny_engine.fill(FillRequest(text=text, holes=[Hole(at, at, 8)], language="c", options=SamplingOptions(candidates=1)))
    from infill.syntax.constraint import is_valid

    assert is_valid("c", text, [(at, at)], [","]) and r.fills[0].text != "," and r.fills[0].valid is False


@pytest.mark.parametrize("constrained", [True, False])
def test_a_fill_that_loops_is_cut_where_it_starts_to(tiny_engine, monkeypatch, constrained):
    from infill.protocol import Fill

    text = "def f(x):\n    \n    return x\n"  # the hole after the empty line's indentation
    looping = "    x = 1\n    x = 1\n    x"  # the same line again, and again where the window ran out
    real = tiny_engine.decode_row
    monkeypatch.setattr(tiny_engine, "decode_row", lambda *a: ([Fill(text=looping, score=0.0)], *real(*a)[1:]))
    r = tiny_engine.fill(FillRequest(text=text, holes=[Hole(14, 14, 16)], language="python",
                                     options=SamplingOptions(candidates=1, constrained=constrained)))
    assert r.fills[0].text == "x = 1" and r.fills[0].valid is (True if constrained else None)


def test_a_loop_is_kept_where_only_the_whole_fill_can_be_valid(tiny_engine, monkeypatch):
    from infill.protocol import Fill

    text = "def f(x):\n    y = 2\n    \n    return y\n"
    whole = "    x = 1\n    x = 1\n"
    real = tiny_engine.decode_row
    monkeypatch.setattr(tiny_engine, "decode_row", lambda *a: ([Fill(text=whole, score=0.0)], *real(*a)[1:]))
    # a cut that cutting back can only make blank (or leave invalid): the whole fill is kept
    monkeypatch.setattr(finish_module, "cut_repeats", lambda fill, *a: "    )\n")
    r = tiny_engine.fill(FillRequest(text=text, holes=[Hole(24, 24, 16)], language="python", options=SamplingOptions(candidates=1)))
    assert r.fills[0].valid is True and r.fills[0].text == "x = 1\n    x = 1"


def test_cutting_back_skips_the_prefixes_that_hold_the_first_error(tiny_engine, monkeypatch):
    from infill.syntax import constraint as constraints
    from infill.engine.finish import MAX_CUTS
    from infill.protocol import Fill

    text = "def main(xs):\n    y = \n    return xs\n"
    long_fill = "xs + 1) + " + " + ".join(str(i) for i in range(20))  # the stray ')' is the first error
    real, parses = tiny_engine.decode_row, []
    monkeypatch.setattr(tiny_engine, "decode_row", lambda *a: ([Fill(text=long_fill, score=0.0)], *real(*a)[1:]))
    real_first = constraints.RequestCheck.first_error
    monkeypatch.setattr(constraints.RequestCheck, "first_error", lambda self, *a: parses.append(1) or real_first(self, *a))
    req = FillRequest(text=text, holes=[Hole(22, 22, 48, min_tokens=1)], language="python", options=SamplingOptions(candidates=1))
    r = tiny_engine.fill(req)
    assert r.fills[0].text == "xs + 1" and r.fills[0].valid is True
    assert len(tiny_engine.tokenizer.encode(long_fill)) > 3 * MAX_CUTS and len(parses) <= 3


def test_a_fill_does_not_leave_an_empty_line_before_the_line_break_after_it():
    assert join_line_break("x = 1\n", "\n    return x\n") == "x = 1"
    assert join_line_break("x = 1\r\n", "\r\nreturn x") == "x = 1"
    assert join_line_break("x = 1\n", "    return x\n") == "x = 1\n"  # the text after goes on the next line
    assert join_line_break("\n", "\n") == ""  # a blank fill adds no empty line
    assert join_line_break("\n", "x") == "\n"
    assert join_line_break("a\nb\n", "\n") == "a\nb"


def test_a_candidate_with_code_beats_a_blank_one(tiny_engine, monkeypatch):
    from infill.protocol import FillRequest, Hole, SamplingOptions

    real, seen = Engine.decode_row, []

    def decode_row(self, ids, logprob, hole, heals, path):  # row 0: a blank fill scored best; row 1: code
        fills, _, filled = real(self, ids, logprob, hole, heals, path)
        seen.append(len(seen))
        blank = seen[-1] == 0
        return [msgspec.structs.replace(f, text="\n" if blank else "x") for f in fills], (0.0 if blank else -5.0), filled

    monkeypatch.setattr(Engine, "decode_row", decode_row)
    res = tiny_engine.fill(FillRequest(text="y = \n", holes=[Hole(4, 4, 8)], options=SamplingOptions(candidates=2, constrained=False)))
    assert len(seen) == 2 and res.fills[0].text == "x"


def test_precision(tiny_model_dir):
    import torch

    from infill.model.device import fast_bf16, resolve_dtype

    assert resolve_dtype("fp32", torch.device("cuda")) == torch.float32
    assert resolve_dtype("bf16", torch.device("cpu")) == torch.bfloat16
    assert resolve_dtype("auto", torch.device("cpu")) == (torch.bfloat16 if fast_bf16(torch.device("cpu")) else torch.float32)
    with pytest.raises(InfillError, match="precision"):
        resolve_dtype("fp8", torch.device("cpu"))
    engine = Engine.load(EngineConfig(model_dir=tiny_model_dir, device="cpu", precision="bf16"))
    assert engine.dtype == torch.bfloat16
    text, holes = find_holes("def f(a, b):\n    return <FILL:6>\n")
    result = engine.fill(FillRequest(text=text, holes=holes, options=SamplingOptions(steps=3)))
    assert len(result.fills) == 1 and result.timings.steps >= 1


def _scripted_rounds(monkeypatch, texts):
    """Make round k's every candidate decode to texts[k]; return the (policy, head_only) of each round."""
    from infill.protocol import Fill

    rounds, real_chunk, real_decode = [], Engine._fill_chunk, Engine.decode_row

    def fill_chunk(self, prepared, *a):
        rounds.append((prepared[0].request.options.policy, prepared[0].shape.head_only))
        return real_chunk(self, prepared, *a)

    def decode_row(self, *a):
        fills, score, filled = real_decode(self, *a)
        return [Fill(text=texts[len(rounds) - 1], score=fills[0].score)], score, filled

    monkeypatch.setattr(Engine, "_fill_chunk", fill_chunk)
    monkeypatch.setattr(Engine, "decode_row", decode_row)
    return rounds


BODY_AFTER = "def f(xs):\n    t = 0\n\n        t += x\n    return t\n"  # the hole (at 21) must open a block


def test_an_invalid_constrained_fill_is_retried_left_to_right_as_a_headers_head(tiny_engine, monkeypatch):
    rounds = _scripted_rounds(monkeypatch, ["    t = 1", "    for x in xs"])
    r = tiny_engine.fill(FillRequest(text=BODY_AFTER, holes=[Hole(21, 22, 12, min_tokens=1)], language="python"))
    # only a header fits there: both rounds fill its head alone (shape.first_round_shape)
    assert rounds == [("confidence", True), ("left-to-right", True)]
    assert r.fills[0].text == "    for x in xs:\n" and r.fills[0].valid is True and r.timings.rounds == 2


def test_a_fill_that_dedents_out_of_the_indentation_before_the_hole_is_not_passed_off_as_valid(tiny_engine, monkeypatch):
    # The hole comes after a method's indentation (the engine fills it from the line's start): a
    # fill whose first line sits at the class's level parses there, but inserted after the user's
    # indentation (its body then as deep as its header) it would not; it is invalid, both rounds,
    # and a cursor completion says nothing.
    text = "class A:\n    def f(self):\n        return 1\n        \n    def g(self):\n        return 2\n"
    at = text.index("        \n") + 8
    dedented, kept = "    def h(self):\n        return 3\n", "        x = 1\n"
    rounds = _scripted_rounds(monkeypatch, [dedented] * 4 + [kept])
    r = tiny_engine.fill(FillRequest(text=text, holes=[Hole(at, at, 12)], language="python"))
    assert r.fills[0].text == "" and r.timings.rounds == 2
    r = tiny_engine.fill(FillRequest(text=text, holes=[Hole(at, at, 12, min_tokens=1)], language="python"))
    assert r.fills[0].valid is False  # a hole that must be filled: the fill, marked invalid
    r = tiny_engine.fill(FillRequest(text=text, holes=[Hole(at, at, 12)], language="python"))
    assert len(rounds) == 5
    assert r.fills[0].text == "x = 1" and r.fills[0].valid is True


def test_a_retry_that_finds_nothing_valid_keeps_the_first_rounds_fill(tiny_engine, monkeypatch):
    rounds = _scripted_rounds(monkeypatch, ["    t = 1", "    t = 2"])
    r = tiny_engine.fill(FillRequest(text=BODY_AFTER, holes=[Hole(21, 22, 12, min_tokens=1)], language="python"))
    assert len(rounds) == 2 and r.fills[0].text == "    t = 1:\n" and r.fills[0].valid is False and r.timings.rounds == 2


@pytest.mark.parametrize("options", [SamplingOptions(retry=False), SamplingOptions(deadline_ms=10_000), SamplingOptions(constrained=False)])
def test_no_retry_when_asked_for_none_under_a_deadline_or_unconstrained(tiny_engine, monkeypatch, options):
    rounds = _scripted_rounds(monkeypatch, ["    t = 1", "    for x in xs"])
    r = tiny_engine.fill(FillRequest(text=BODY_AFTER, holes=[Hole(21, 22, 12, min_tokens=1)], language="python", options=options))
    assert len(rounds) == 1 and r.timings.rounds == 1


def test_drafts_are_the_first_requests_alone_every_n_steps_as_text_for_its_hole(tiny_engine, monkeypatch):
    """fill_batch's on_draft streams requests[0]'s drafts (as the engine client's does), every
    ``drafts`` steps, each hole's text as the final fill gives it: without the line's indentation
    that the engine moved into the hole (line_start_holes), which a model writes first."""
    monkeypatch.setattr(tiny_engine, "config", EngineConfig(**{**tiny_engine.config.__dict__, "max_batch_slots": 1}))
    decode_hole = tiny_engine.decode_hole  # (the tiny random model writes no indentation: this one does)
    monkeypatch.setattr(tiny_engine, "decode_hole", lambda *a: "    " + decode_hole(*a))
    options = SamplingOptions(steps=6, candidates=1, constrained=False, retry=False)
    first = FillRequest(text="def f(x):\n    \n", holes=[Hole(14, 14, 6)], language="python", options=options)
    other = FillRequest(text="y = ", holes=[Hole(4, 4, 6)], language="python", options=options)
    drafts = []
    tiny_engine.fill_batch([first, other], on_draft=drafts.append, drafts=2)  # one chunk each (max_batch_slots 1)
    assert [d.step for d in drafts] == [2, 4, 6]
    assert all(len(d.texts) == 1 and not d.texts[0][:1].isspace() for d in drafts), drafts


def test_the_garbage_collector_is_paused_during_a_fill_and_restored_after(tiny_engine):
    seen = []
    request = FillRequest(text="def f(x):\n    return \n", holes=[Hole(20, 20, 8)], language="python")
    assert gc.isenabled()
    tiny_engine.fill(request, on_draft=lambda d: seen.append(gc.isenabled()))
    assert seen and not any(seen) and gc.isenabled()
    gc.disable()  # a caller's choice stands
    try:
        tiny_engine.fill(request)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_fill_the_window_ended_mid_line_is_cut_with_a_line_break_where_the_text_after_it_starts_a_line(tiny_engine, monkeypatch):
    from infill.protocol import Fill

    text = "def f(a):\n    b = a\n\n    return a\n"
    hole = len("def f(a):\n    b = a\n")  # the text after the hole starts a line of its own
    looping = "    c = a + 1, a - 1, a * 2"  # the window ended before the line did
    real = tiny_engine.decode_row
    monkeypatch.setattr(tiny_engine, "decode_row", lambda *a: ([Fill(text=looping, score=0.0)], *real(*a)[1:]))
    req = FillRequest(text=text, holes=[Hole(hole, hole + 1, 16, min_tokens=1)], language="python",
                      options=SamplingOptions(candidates=1, retry=False))
    r = tiny_engine.fill(req)
    assert r.fills[0].text == looping + "\n" and r.fills[0].valid is True
    mid_line = FillRequest(text="def f(a):\n    c = \n", holes=[Hole(18, 18, 16, min_tokens=1)], language="python",
                           options=SamplingOptions(candidates=1, retry=False))
    monkeypatch.setattr(tiny_engine, "decode_row", lambda *a: ([Fill(text="a)) + (", score=0.0)], *real(*a)[1:]))
    assert "\n" not in tiny_engine.fill(mid_line).fills[0].text  # the text after it goes on with the line: no break


def _result(texts, valid):
    from infill.protocol import Fill, FillResult, Timings

    return FillResult(fills=[Fill(text=t, score=-1.0, valid=valid) for t in texts], timings=Timings(), model="m")


def test_a_cursor_completion_that_cannot_be_made_valid_stays_quiet():
    """Issue 25 step 8: no suggestion (valid) instead of a broken one, where nothing is needed there."""
    from infill.engine.finish import stay_quiet

    text = "def f(a):\n    return a\n\n\nx = f(1)\n"
    at = text.index("\n\n\nx") + 1
    cursor = FillRequest(text=text, holes=[Hole(at, at, 8)], language="python")
    quiet = stay_quiet(cursor, _result(["x = = 1"], False))
    assert [(f.text, f.valid) for f in quiet.fills] == [("", True)]
    kept = _result(["y = 2\n"], True)
    assert stay_quiet(cursor, kept) is kept  # a valid fill is left alone


def test_a_hole_that_must_be_filled_keeps_its_invalid_fill():
    from infill.engine.finish import stay_quiet

    text = "def f(a):\n    return \n"
    at = text.index("return ") + len("return ")
    broken = _result(["a +"], False)
    must = FillRequest(text=text, holes=[Hole(at, at, 8, min_tokens=1)], language="python")
    assert stay_quiet(must, broken) is broken  # an explicit hole: reported invalid, never emptied
    needs_code = FillRequest(text="if x:\n", holes=[Hole(6, 6, 8)], language="python")
    assert stay_quiet(needs_code, broken) is broken  # the block needs a body: empty does not parse either
    unconstrained = FillRequest(text=text, holes=[Hole(at, at, 8)], language="python",
                                options=SamplingOptions(constrained=False))
    assert stay_quiet(unconstrained, broken) is broken


# A hole cut where `else {` stood: the `}` that closed its block is stray further down.
BROKEN_JS = "function f(x) {\n  if (x) {\n    a();\n  }\n    b();\n  }\n  return 1;\n}\n"
AFTER_IF = BROKEN_JS.index("  }\n    b") + 3


def _fill_with(tiny_engine, monkeypatch, texts, request):
    """``request`` filled by ``tiny_engine`` whose candidate rows decode to ``texts`` (the first scored best)."""
    real, seen = Engine.decode_row, []

    def decode_row(self, ids, logprob, hole, heals, path):
        fills, _, filled = real(self, ids, logprob, hole, heals, path)
        k = len(seen) % len(texts)
        seen.append(k)
        return [msgspec.structs.replace(f, text=texts[k]) for f in fills], -float(k), filled

    monkeypatch.setattr(Engine, "decode_row", decode_row)
    return tiny_engine.fill(request)


def test_a_fill_that_mends_the_document_its_hole_broke_is_cut_where_it_has(tiny_engine, monkeypatch):
    req = FillRequest(text=BROKEN_JS, holes=[Hole(AFTER_IF, AFTER_IF, 16)], language="javascript",
                      options=SamplingOptions(candidates=1))
    r = _fill_with(tiny_engine, monkeypatch, [" else { b(); c();"], req)
    assert r.fills[0].text == " else {" and r.fills[0].valid is True  # the body is the text after the hole's
    line = BROKEN_JS.index("if (x)")  # the `if (x) {` line cut: a fill that writes the whole block again
    text = BROKEN_JS[:line] + BROKEN_JS[line + len("if (x) {") :]
    req = FillRequest(text=text, holes=[Hole(line, line, 16)], language="javascript", options=SamplingOptions(candidates=1))
    r = _fill_with(tiny_engine, monkeypatch, ["if (y) {\n    a();\n  }\n"], req)
    assert r.fills[0].text == "if (y) {" and r.fills[0].valid is True
    # a fill that does not mend it is kept as it is, but not valid: it adds no error, yet the body after
    # the hole keeps its closer stray and the document does not parse (SyntaxConstraint.strays)
    r = _fill_with(tiny_engine, monkeypatch, [" // done"], msgspec.structs.replace(req, holes=[Hole(AFTER_IF, AFTER_IF, 16)], text=BROKEN_JS))
    assert r.fills[0].text == " // done" and r.fills[0].valid is False


def test_a_candidate_that_mends_the_document_beats_a_likelier_one_that_leaves_it_broken(tiny_engine, monkeypatch):
    req = FillRequest(text=BROKEN_JS, holes=[Hole(AFTER_IF, AFTER_IF, 16)], language="javascript",
                      options=SamplingOptions(candidates=2))
    r = _fill_with(tiny_engine, monkeypatch, [" a();", " else {"], req)  # the first scored best, both valid
    assert r.fills[0].text == " else {"


def test_a_table_row_the_window_cuts_short_is_closed_and_ended_with_the_default_model(one_torch_thread):
    """A row whose values need more tokens than the window has: the layout says the row's '{' is the
    fill's to close (the next row starts a line at its indentation), and what ends the row follows."""
    from infill.syntax.constraint import is_clean

    engine = Engine.load(EngineConfig(device="cpu"))
    rows = "".join(f"{{{i}, 0x{0x3ff00000 + i * 0x80000:08x}, 0x00000000, 0x{0x3ff00000 + i * 0x40000:08x}}},\n" for i in range(1, 7))
    head = "static const struct { int n; unsigned int a, b, c; } table[] = {\n" + rows + "{7, 0x40380000"
    text = head + "\n{8, 0x40400000, 0x00000000, 0x40200000},\n};\n"
    for window in (6, 12):
        request = FillRequest(text=text, holes=[Hole(len(head), len(head), window)], language="c")
        fill = engine.fill(request).fills[0]
        assert fill.valid is True and fill.text.rstrip().endswith("},"), (window, fill.text)
        assert is_clean("c", text, [(len(head), len(head))], [fill.text])
    # What a fill leaves for later ones (its context's states, its tokens as draft sources) is
    # dropped on request (benchmarks time both modes from the same state); the fill is the same.
    assert engine.model._rows and engine.recent_fills
    engine.forget(contexts=False)
    assert engine.model._rows and not engine.recent_fills
    engine.forget()
    assert not engine.model._rows
    assert engine.fill(request).fills[0].text == fill.text


def test_a_header_typed_above_its_body_is_completed_as_one_in_one_round_with_the_default_model(default_engine, one_torch_thread):
    """A function's header retyped above its body: the fill that completes the header is judged
    with that body (Python's region_end), so it is valid at once and no retry round runs."""
    engine = default_engine
    text = ("import types\n\n\ndef isgenerator(object):\n    return isinstance(object, types.GeneratorType)\n\n\nd"
            "\n    \"\"\"Return true if the object is a coroutine.\"\"\"\n    return isinstance(object, types.CoroutineType)\n")
    at = text.index("d\n    ") + 1
    result = engine.fill(FillRequest(text=text, holes=[Hole(at, at)], language="python", options=SamplingOptions(candidates=1)))
    fill = result.fills[0]
    assert fill.valid is True and fill.text.startswith("ef ") and fill.text.rstrip().endswith(":"), fill.text
    assert result.timings.rounds == 1


def test_a_struct_whose_opening_line_was_cut_is_opened_again_as_the_documents_own_structs_open(default_engine, one_torch_thread):
    """The hole took ``type pass struct {``: its fields and ``}`` after it are stray. The model's
    own fill (a method again) and its branches that go on from its line leave them stray; the
    branch begun as the document's own lines that open such a block begin (``type``: syntax
    document.block_heads) mends the document, and that fill is the one kept."""
    text = ("package pass\n\nimport \"fmt\"\n\ntype Phase struct {\n\tName string\n\tRun  func(*Func)\n}\n\n"
            "func (p *Phase) String() string {\n\treturn fmt.Sprintf(\"phase %s\", p.Name)\n}\n\n"
            "\n\tname     string\n\trequired bool\n\tdisabled bool\n}\n\nfunc (p *pass) enabled() bool {\n\treturn !p.disabled\n}\n")
    from infill.syntax.constraint import is_clean

    at = text.index("\n\tname ")
    fill = default_engine.fill(FillRequest(text=text, holes=[Hole(at, at, max_tokens=32)], language="go",
                                           options=SamplingOptions(constrained=True))).fills[0]
    assert fill.valid is True and fill.text.startswith("type ") and fill.text.endswith(" struct {"), fill.text
    assert is_clean("go", text, [(at, at)], [fill.text])


def test_a_keyword_cut_inside_its_second_token_is_written_again_whole(default_engine, one_torch_thread):
    """``els|e:`` is `` el`` + ``s`` to the tokenizer: taking back ``s`` alone left the context
    ending in `` el``, which the model went on as a name (``els = pool``); the word's tokens are
    taken back together, and the fill writes `` else`` as one token."""
    text = ("def pick(r, n):\n    if r is None:\n        r = n\n    elif r < 0:\n        raise ValueError\n"
            "    els\n        c = r * n\n    return c\n")
    at = text.index("els\n") + 3
    assert [default_engine.tokenizer.decode([t]) for t in default_engine.tokenizer.encode(text[:at])[-2:]] == [" el", "s"]
    fill = default_engine.fill(FillRequest(text=text, holes=[Hole(at, at)], language="python",
                                           options=SamplingOptions(candidates=1))).fills[0]
    assert fill.text == "e:" and fill.valid, fill


def test_a_causal_models_fill_inside_brackets_is_scored_by_the_text_after_it_going_on(default_engine, one_torch_thread):
    """The default model is causal: its end-of-text token is never its word on where a fill
    inside brackets ends (it gives it about -20 there). The fill's end is scored as the model's
    probability that the text after the hole (``)``) goes on there."""
    text = "import os\n\n\ndef load(base, name):\n    return open(os.path.join())\n"
    at = text.index("join(") + len("join(")
    fill = default_engine.fill(FillRequest(text=text, holes=[Hole(at, at)], language="python",
                                           options=SamplingOptions(candidates=1))).fills[0]
    assert fill.text == "base, name" and fill.valid
    assert fill.score > -3.0, fill.score  # its 4 tokens' and its end's log-probability (the pad's alone: about -20)


def test_a_fill_that_falls_under_its_floor_stops_there_and_says_so(default_engine, one_torch_thread):
    """The default model's schedule is left to right, so a fill's committed tokens only lower its
    score: once they are under ``min_score`` the fill would not be shown, and it stops there, empty,
    unjudged, scored by what it had. A floor under every score changes nothing."""
    text = "import os\n\n\ndef load(base, name):\n    for alias in \n"
    at = text.index("in ") + len("in ")
    def fill(floor):
        default_engine.forget(contexts=False)  # no drafts from the fill before
        return default_engine.fill(FillRequest(text=text, holes=[Hole(at, at)], language="python",
                                               options=SamplingOptions(candidates=1, min_score=floor)))
    whole, low, high = fill(None), fill(-1000.0), fill(-0.05)
    assert whole.fills[0].text and whole.fills[0].score < -0.05, whole.fills[0]
    assert not whole.below_floor and not low.below_floor
    assert [(f.text, f.score, f.valid) for f in low.fills] == [(f.text, f.score, f.valid) for f in whole.fills]
    assert high.below_floor and high.fills[0].text == "" and high.fills[0].valid is None
    assert whole.fills[0].score <= high.fills[0].score < -0.05  # what it had: at least what the whole fill scores
    assert high.timings.steps < whole.timings.steps and high.timings.rounds == 1
    assert default_engine.recent_fills  # what it had: the next keystroke's drafts
    # and what it had, as text and each token's log-probability, which sum to its score
    (had,) = high.partial
    assert had.text and whole.fills[0].text.startswith(had.text.rstrip("\n")), (had, whole.fills[0])
    assert len(had.ends) == len(had.logprobs) and had.ends == sorted(had.ends) and had.ends[-1] == len(had.text)
    assert sum(had.logprobs) == pytest.approx(high.fills[0].score, abs=1e-4) and max(had.logprobs) <= 0
    assert not whole.partial and not low.partial
