"""Prompt-lookup drafts (infill/engine/drafts.py) and speculative steps through the engine."""

from __future__ import annotations

import torch

from infill.decode.sampler import Windows
from infill.engine.drafts import PromptLookup, RecentFills
from infill.protocol import FillRequest, Hole, SamplingOptions

M, PAD = 1, 0


def state(ids, hole, masked):
    ids = torch.tensor([ids])
    return Windows(ids=ids, pos=torch.arange(ids.shape[1])[None], hole=torch.tensor([hole]), masked=torch.tensor([masked]),
                   logprob=torch.zeros(ids.shape, dtype=torch.float))


def test_a_draft_copies_what_followed_the_text_before_the_frontier_elsewhere():
    # prefix "... 7 8 9 10 ... 7 8", hole, suffix "7 8 11": the latest place 7 8 occurs that is not the hole's own edge
    segments = [[[5, 7, 8, 9, 10, 6, 7, 8], [12, 7, 8, 11]]]
    lookup = PromptLookup(segments, rows=[0])
    assert lookup.guess(0, 0, [], 3) == [11]  # "6 7 8" only at the hole's edge; "7 8" last in the suffix
    assert lookup.guess(0, 0, [9], 2) == [10, 6]  # "8 9" after the fill's first token
    s = state([9, M, M, M, PAD], [0, 0, 0, 0, 0], [False, True, True, True, False])
    assert lookup(s, 2).tolist() == [[-1, 10, 6, -1, -1]]  # from the frontier slot on, in its hole
    assert lookup(s, 8).tolist() == [[-1, 10, 6, 7, -1]]  # no further than the hole's masked slots
    assert PromptLookup([[[1, 2, 3], [4]]], rows=[0]).guess(0, 0, [], 2) == []  # "2 3" only at the hole's edge


def test_speculative_steps_with_the_default_model_take_fewer_calls_for_the_same_fill(one_torch_thread):
    """On code that repeats itself, drafts are taken: fewer model calls write the same fill."""
    from dataclasses import replace

    from infill.engine.fill import Engine, EngineConfig

    plain = Engine.load(EngineConfig(device="cpu", lookahead=0))
    fast = Engine(plain.model, plain.tokenizer, replace(plain.config, lookahead=4), plain.model_id)
    lines = "".join(f"    total_{i} = compute_value(items[{i}], scale={i})\n" for i in range(8))
    text = "def f(items):\n" + lines + "    total_8 = "
    request = FillRequest(text=text + "\n", holes=[Hole(len(text), len(text), 24)], language="python",
                          options=SamplingOptions(candidates=1))
    want, got = plain.fill(request), fast.fill(request)
    assert got.fills[0].text == want.fills[0].text and "compute_value(items[8]" in got.fills[0].text
    assert got.timings.steps < want.timings.steps, (got.timings.steps, want.timings.steps)


def test_recent_fills_are_looked_up_latest_first_after_the_fill_itself():
    segments = [[[5, 6], [9]]]  # nothing in the request follows "6"
    assert PromptLookup(segments, rows=[0]).guess(0, 0, [], 2) == []
    lookup = PromptLookup(segments, rows=[0], recent=[[[5, 6, 1, 2], [5, 6, 3, 4]]])
    assert lookup.guess(0, 0, [], 2) == [3, 4]  # "5 6" in the latest fill
    assert lookup.guess(0, 0, [3], 2) == [4]  # "5 6 3": the trigram
    assert lookup.guess(0, 0, [1, 5, 6], 2) == [1, 5]  # the fill repeating itself comes first


def test_a_request_drafts_from_its_own_documents_recent_fills_only():
    segments = [[[5, 6], [9]], [[5, 6], [8]]]
    lookup = PromptLookup(segments, rows=[0, 1], recent=[[[5, 6, 1, 2]], []])
    assert lookup.guess(0, 0, [], 2) == [1, 2]
    assert lookup.guess(1, 0, [], 2) == []  # request 1's document wrote nothing after "5 6"


def test_recent_fills_are_kept_per_document_the_latest_documents_only():
    recent = RecentFills(per_document=2, documents=2)
    recent.add("a.py", [1]), recent.add("a.py", [2]), recent.add("a.py", [3])
    recent.add(None, [4])
    assert recent.of("a.py") == [[2], [3]] and recent.of(None) == [[4]] and recent.of("b.py") == []
    recent.add("a.py", [5])  # a.py is again the latest: b.py, next, pushes out None
    recent.add("b.py", [6])
    assert recent.of(None) == [] and recent.of("a.py") == [[3], [5]] and len(recent) == 3
    recent.clear()
    assert not recent


def test_a_documents_fill_is_the_same_whatever_another_document_was_filled_before(one_torch_thread):
    """Another document's fill (the server's warm-up, a file typed in before) leaves no drafts for
    this one: the same fill, score and steps as from a fresh engine. (With one pool of recent fills,
    this two-hole fill scored -6.167 after the warm-up's fill and -5.975 without: a step of several
    drafted slots rounds otherwise, and in the language server it then wrote `max(lo, hi)` for
    `x, lo, hi`.)"""
    from infill.engine.fill import Engine, EngineConfig
    from infill.lsp.server import _WARM_UP_TEXT

    engine = Engine.load(EngineConfig(device="cpu"))
    text = "def clamp(x, lo, hi):\n    if x < lo:\n        return \n    if x > hi:\n        return \n    return x\n"
    first, second = text.index("return ") + 7, text.rindex("return ") + 7
    holes = FillRequest(text=text, holes=[Hole(first, first, 16), Hole(second, second, 16)], language="python",
                        options=SamplingOptions(steps=8, retry=False), path="file:///ws/holes.py")
    at = _WARM_UP_TEXT.index("return ") + 7
    other = FillRequest(text=_WARM_UP_TEXT, holes=[Hole(at, at, 16)], language="python",
                        options=SamplingOptions(steps=8, candidates=1), path="warm-up.py")

    def seen(result):
        return [(f.text, f.score) for f in result.fills], result.timings.steps

    engine.forget()
    alone = seen(engine.fill(holes))
    engine.forget()
    assert engine.fill(other).fills[0].text and engine.recent_fills.of("warm-up.py")
    assert seen(engine.fill(holes)) == alone
    assert engine.recent_fills.of("file:///ws/holes.py")  # its own fills: its next fill's drafts


def test_a_fill_like_the_last_one_takes_fewer_calls_for_the_same_text(one_torch_thread):
    """The next keystroke's fill drafts from the last one's tokens: the same text in fewer calls."""
    from infill.engine.fill import Engine, EngineConfig

    engine = Engine.load(EngineConfig(device="cpu", lookahead=4))
    # (a text with no near tie on its way: bf16 logits tie often, and a step of several slots
    # rounds its products otherwise than a step of one; "read_lines ... return " ties '.' and ']')
    text = "import json\n\n\ndef load(path):\n    with open(path) as f:\n        return "
    request = FillRequest(text=text + "\n", holes=[Hole(len(text), len(text), 24)], language="python",
                          options=SamplingOptions(candidates=1))
    engine.recent_fills.clear()
    first = engine.fill(request)
    again = engine.fill(request)
    assert again.fills[0].text == first.fills[0].text and len(first.fills[0].text) > 8
    assert again.timings.steps < first.timings.steps, (again.timings.steps, first.timings.steps)
