"""A hole that must end with nested block headers: found by stand-ins, filled as several holes."""

import re

import pytest
import torch

from infill.lang.python import scaffold
from infill.syntax.constraint import RequestCheck, for_chunk
from infill.protocol import Fill, FillRequest, FillResult, Hole, SamplingOptions, Timings
from infill.decode.sampler import Windows
from infill.lang.python.shape import Shape, shape_of

# A loop and the ``if`` in it cut out above their body, whose ``else`` follows.
NESTED = "def f(s):\n    out = ''\n|            out += c\n        else:\n            out = c\n    return out\n"
# ... and with the ``else`` at the hole's line, right after it: the ``if`` needs a body line first.
CLAUSE = "def f(s):\n    out = ''\n|        else:\n            out += c\n    return out\n"


def request(doc: str) -> FillRequest:
    i = doc.index("|")
    return FillRequest(text=doc[:i] + doc[i + 1 :], holes=[Hole(i, i, 64, min_tokens=1)], language="python",
                       options=SamplingOptions(candidates=1))


@pytest.mark.parametrize(
    "doc, lines",
    [
        (NESTED, ((4, True), (8, True))),
        (CLAUSE, ((4, True), (8, True), (12, False))),
        ("def f(s):\n    out = ''\n|    return out\n", ()),  # a statement fits
        ("def f(s):\n    out = ''\n|        out += c\n    return out\n", ()),  # one header fits
    ],
)
def test_stand_ins_find_the_headers_the_text_after_the_hole_needs(doc, lines):
    assert tuple((width, bool(words)) for width, words in shape_of(request(doc)).scaffold) == lines


def test_a_loop_is_tried_where_the_text_after_breaks_out_of_it_and_only_a_loop_may_open_it():
    doc = "def f(s):\n    n = 0\n|            break\n        n += 1\n    return n\n"
    (outer, words), (inner, inner_words) = shape_of(request(doc)).scaffold
    assert (outer, inner) == (4, 8)
    assert {"for", "while"} <= set(words) and "if" not in words  # 'break' needs a loop around it
    assert "if" in inner_words and "else" not in inner_words  # no 'if' before it to go on with


# A header before the hole: its body, then 'except:'.
AFTER = "def f(x):\n    try:\n        if x:\n|        return 0\n    return 1\n"


def test_after_a_header_a_scaffold_may_end_the_try_it_is_in():
    ((width, words),) = shape_of(request(AFTER)).scaffold
    assert width == 4 and "except" in words and "if" not in words


# The end of the file inside a ``try`` whose last line is a header: its body, then an ``except:``.
TAIL = "def f(s):\n    try:\n        n = int(s)\n        if n < 0:\n|"


@pytest.mark.parametrize(
    "doc, lines, after_header",
    [
        (TAIL, ((4, True), (8, False)), True),
        ("try:\n    import x\n|", ((0, True), (4, False)), False),
        ("def f(s):\n    n = 0\n|", (), False),  # nothing is owed: no shape, as before
        ("def f(s):\n    if s:\n|", (), False),  # a body is owed, and a statement is one
    ],
)
def test_at_the_end_of_the_file_a_scaffold_writes_the_clause_a_try_still_needs(doc, lines, after_header):
    shape = shape_of(request(doc))
    assert tuple((width, bool(words)) for width, words in shape.scaffold) == lines
    assert shape.scaffold_after_header is after_header
    if lines:
        assert shape.scaffold[0][1] == ("except", "finally")


def test_a_header_after_the_free_lines_is_not_read_as_a_body_of_the_header_before_them():
    req = request(TAIL)  # the free lines hold the 'if' body; the 'except' head comes after them
    split, shape = scaffold.split(req, shape_of(req))
    free, head, body = RequestCheck(split, shape).lexers
    assert free.ctx.lang.after_colon and not head.ctx.lang.after_colon and body.ctx.lang.after_colon
    req = request(AFTER)  # the same, with text after the hole
    split, shape = scaffold.split(req, shape_of(req))
    free, head = RequestCheck(split, shape).lexers
    assert head.accepts(head.start, "except") and not head.accepts(head.start, "return")
    assert head.due(head.start, ending=False) == ["except", "finally"]
    assert head.due(head.feed(head.start, "except")[0], ending=False) == []  # only before the head's first word
    # A loop at the level of the body the free lines hold (after 'if not d:', then an 'else:' there, say).
    req = request("def f(d):\n    if not d:\n|                break\n            n = 1\n        n = 2\n    return n\n")
    split, shape = scaffold.split(req, shape_of(req))
    free, loop, _ = RequestCheck(split, shape).lexers
    assert loop.ctx.lang.first_indents == (8,) and loop.accepts(loop.start, "for")


# Inside a dict whose '}' and the loop over it were cut out: the loop's body follows the hole.
BRACKETS = "def f(xs):\n    names = {\n        1: 'one',\n|            out.append(names[x])\n    return out\n"


def test_inside_brackets_a_scaffold_closes_them_before_its_headers():
    shape = shape_of(request(BRACKETS))
    assert shape.scaffold_closes and [w for w, _ in shape.scaffold] == [4, 8] and "for" in shape.scaffold[0][1]
    req = request(BRACKETS)
    split, lines = scaffold.split(req, shape)
    free, loop, _ = RequestCheck(split, lines).lexers
    assert free.ctx.base == ("{",) and not free.can_end(free.feed(free.start, "        2: 'two',\n")[0])
    assert free.can_end(free.feed(free.start, "        2: 'two',\n    }\n    out = []")[0])
    assert loop.ctx.base == () and loop.accepts(loop.start, "for x in xs") and not loop.accepts(loop.start, "return")
    # brackets the text after the hole closes: no scaffold, as before
    assert shape_of(request("def f():\n    d = {\n        1: 'one',\n|    }\n    return d\n")) == Shape()


def test_a_stuck_heads_first_slot_may_take_a_header_word_the_model_ranks_low(list_tokenizer):
    req = request(AFTER)
    split, shape = scaffold.split(req, shape_of(req))
    widths = [h.max_tokens for h in split.holes]
    hole = torch.cat([torch.full((w,), i) for i, w in enumerate(widths)])[None]
    c = for_chunk([split], [0], hole, list_tokenizer(["<pad>", "<mask>", "<eos>", "return", "except", "finally", " x"]), 0, 1, [shape])
    ids = torch.full(hole.shape, 1)
    state = Windows(ids=ids, pos=torch.arange(ids.shape[1])[None], hole=hole, masked=torch.ones_like(ids, dtype=torch.bool),
                    logprob=torch.zeros(ids.shape))
    head = widths[0]  # the head's first slot
    assert c.first_admissible(state, 0, head, [3, 6]) == 4  # 'return', ' x': neither; 'except' is offered


def test_split_puts_a_hole_at_each_headers_head_and_join_makes_one_fill_again():
    req = request(NESTED)
    shape = shape_of(req)
    split, lines = scaffold.split(req, shape)
    assert len(split.holes) == 3 and [h.min_tokens for h in split.holes] == [0, 1, 1]
    fills = ["res = []\n    ", "for c in s", "if c"]  # free lines that end in a new line's indentation
    text = "".join(p + f for p, f in zip([split.text[: split.holes[0].start], *(split.text[a.end : b.start] for a, b in zip(split.holes, split.holes[1:]))], fills))
    assert text.endswith("res = []\n    \n    for c in s:\n        if c")
    assert [(x.hole, x.seam, x.width, x.head) for x in lines.scaffold_holes] == [(0, 4, None, False), (1, None, 4, True), (2, None, 8, True)]
    result = FillResult(fills=[Fill(text=f, score=-1.0, valid=True) for f in fills], timings=Timings(), model="m")
    joined = scaffold.join(req, split, result)
    assert [f.text for f in joined.fills] == ["res = []\n    for c in s:\n        if c:\n"]
    assert joined.fills[0].valid is True and joined.fills[0].score == -3.0  # the three fills' joint log-probability
    bare = scaffold.join(req, split, result, free=False)
    assert bare.fills[0].text == "    for c in s:\n        if c:\n"  # no blank line where the free lines were


def test_the_free_lines_after_a_header_hold_its_body():
    req = request(AFTER)
    split, shape = scaffold.split(req, shape_of(req))
    free = RequestCheck(split, shape).lexers[0]
    assert free.ctx.lang.after_colon and not free.can_end(free.start)  # the scaffolded tree cannot tell it follows a header


def test_a_scaffold_stays_within_the_holes_window():
    req = request(CLAUSE)  # 64 tokens; three scaffold lines of HEAD_WINDOW (16) each
    shape = shape_of(req)
    split, _ = scaffold.split(req, shape)
    assert scaffold.fits(req, shape) and sum(h.max_tokens for h in split.holes) <= 64
    small = FillRequest(text=req.text, holes=[Hole(req.holes[0].start, req.holes[0].end, 32, min_tokens=1)], language="python")
    assert not scaffold.fits(small, shape)


def test_the_syntax_checks_hold_each_scaffold_hole_to_its_line():
    req = request(CLAUSE)
    split, shape = scaffold.split(req, shape_of(req))
    check = RequestCheck(split, shape)
    free, outer, inner, body = (lx.ctx.lang for lx in check.lexers)  # their Python parts
    assert free.seam_here == 4 and not free.head_only and not free.after_colon
    assert outer.head_only and outer.colon_rest and outer.first_indents == (4,)
    assert inner.head_only and inner.first_indents == (8,) and inner.levels == (0, 4)
    assert not body.head_only and body.first_indents == (12,) and body.levels == (0, 4, 8)


def test_each_scaffold_line_starts_with_its_indentation_committed(tiny_engine):
    req = request(NESTED)
    split, shape = scaffold.split(req, shape_of(req))
    prepared = tiny_engine.prepare(split, shape)
    assert prepared.leads == [[], tiny_engine.indent_tokens(4), tiny_engine.indent_tokens(8)] and prepared.leads[2]


def test_the_engine_fills_a_scaffolded_hole_with_its_headers(tiny_engine):
    r = tiny_engine.fill(request(NESTED))
    assert len(r.fills) == 1
    assert re.search(r"(^|\n)    \S[^\n]*:\n        \S[^\n]*:\n$", r.fills[0].text), r.fills[0].text


def test_unconstrained_requests_are_not_scaffolded():
    req = request(NESTED)
    assert shape_of(FillRequest(text=req.text, holes=req.holes, language="python",
                                options=SamplingOptions(constrained=False))) == Shape()
