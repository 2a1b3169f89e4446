"""Prompt-lookup drafts (infill/engine/drafts.py) and speculative steps through the engine."""

from __future__ import annotations

import torch

from infill.decode.sampler import Windows
from infill.engine.drafts import PromptLookup
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
    lookup = PromptLookup(segments, rows=[0], recent=[[5, 6, 1, 2], [5, 6, 3, 4]])
    assert lookup.guess(0, 0, [], 2) == [3, 4]  # "5 6" in the latest fill
    assert lookup.guess(0, 0, [3], 2) == [4]  # "5 6 3": the trigram
    assert lookup.guess(0, 0, [1, 5, 6], 2) == [1, 5]  # the fill repeating itself comes first


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
