"""Stand-in fills tell a Python hole's shape: a block opener after it, its first line's widths."""

from dataclasses import replace

import pytest

from infill.protocol import FillRequest, Hole, SamplingOptions
from infill.lang.python.shape import Shape, before_opener, first_round_shape, shape_of, strict_shape
from infill.syntax.steering import Lexer
from infill.syntax.languages import grammar
from infill.syntax.document import Document, hole_context


def request(doc: str, language: str = "python", constrained: bool = True) -> FillRequest:
    i = doc.index("|")
    return FillRequest(text=doc[:i] + doc[i + 1 :], holes=[Hole(i, i, 16)], language=language,
                       options=SamplingOptions(constrained=constrained))


@pytest.mark.parametrize(
    "doc, opener, first",
    [
        # a body with its header cut out: the fill must open a block, at the level before it
        ("def f(xs):\n    t = 0\n|        t += x\n    return t\n", ":\n", (4,)),
        ("def f(xs):\n    t = 0\n|\n        t += x\n    return t\n", ":", (4,)),  # the hole ends its line
        # after a header, deeper than it; a body line of its own level continues
        ("def f(xs):\n    for x in xs:\n|            t += x\n", ":\n", (8,)),
        # a statement of the body's level, or a header at a level out of it (``def g():`` at 0)
        ("def f(xs):\n    t = 0\n|    return t\n", "", (4, 0)),
        # a body whose ``except`` follows: only a ``try:`` opens it
        ("def f(x):\n|        y = int(x)\n    except ValueError:\n        y = 0\n    return y\n", ":\n", (4,)),
        # an elif chain: only the branch's level keeps it whole
        ("def f(c):\n    if c:\n        x = 1\n|    elif d:\n        x = 2\n", "", (8,)),
        # the first line of a call, a dict, a list of calls cut out: the fill opens what the text after it closes
        ("def f(log):\n    if log:\n|\n            'a %s' % x, sep=1)\n    return 1\n", "(", (8,)),
        ("def f():\n|        'a': 1,\n        'b': [2, 3],\n    }\n    return d\n", "{\n", (4,)),
        ("x = 1\n|\n    a, b=1)\n]\n", "(", (0,)),  # the '[' the fill opens itself
    ],
)
def test_stand_in_fills_tell_the_opener_and_the_first_lines_widths(doc, opener, first):
    shape = shape_of(request(doc))
    assert shape.opener == opener
    assert shape.first_indents == first
    assert shape.levels is not None


def test_the_first_round_fills_a_headers_head_alone_where_only_a_header_fits():
    only_header = shape_of(request("def f(xs):\n    t = 0\n|        t += x\n    return t\n"))
    assert only_header.opener == ":\n" and only_header.header_indents == (4,)
    assert first_round_shape(only_header) == strict_shape(only_header) and strict_shape(only_header).head_only
    either = shape_of(request("def f(xs):\n    if xs:\n        t = 0\n|\n    return t\n"))  # a statement fits at 8 or 4
    assert either.opener == "" and first_round_shape(either) == either


def test_levels_are_read_with_a_stand_in_where_the_empty_hole_breaks_the_tree():
    doc = ("def f(xs):\n    r = []\n    for i in xs:\n|            r.append(i)\n        elif i:\n            r.pop()\n"
           "        else:\n            r.pop()\n    return r\n")
    req = request(doc)
    g = grammar("python")
    assert hole_context(Document(g, req.text, [(req.holes[0].start, req.holes[0].end)]), 0).lang.levels is None
    shape = shape_of(req)
    assert shape == Shape(opener=":\n", first_indents=(8,), levels=(0, 4), header_indents=(8,), header_opener=":\n")


@pytest.mark.parametrize(
    "doc, language, constrained",
    [
        ("def f(xs):\n    t = |\n        t += x\n", "python", True),  # mid-line
        ("def f(xs):\n    t = 0\n|        t += x\n", "python", False),  # unconstrained
        ("function f() {\n|\n}\n", "javascript", True),  # no offside rule
        ("def f(xs):\n    t = 0\n|", "python", True),  # nothing after the hole
        ('def f(xs):\n    """Docs.\n|\n    """\n', "python", True),  # in a string's text
    ],
)
def test_no_shape_where_stand_ins_cannot_tell(doc, language, constrained):
    assert shape_of(request(doc, language, constrained)) == Shape()


def test_the_syntax_checks_reuse_the_document_shape_finding_parsed(monkeypatch):
    from infill.syntax import constraint as constraints

    req = request("def f(xs):\n    t = 0\n|")  # nothing after the hole: no shape, but a parsed document
    shape = shape_of(req)
    assert shape == Shape() and shape.doc is not None
    monkeypatch.setattr(constraints, "Document", lambda *a, **k: pytest.fail("the document was parsed again"))
    assert constraints.RequestCheck(req, shape).doc is shape.doc


def test_the_steering_lexer_reads_the_opener_and_the_first_lines_widths():
    req = request("def f(xs):\n    t = 0\n|        t += x\n    return t\n")
    shape = shape_of(req)
    g = grammar("python")
    ctx = before_opener(hole_context(Document(g, req.text, [(req.holes[0].start, req.holes[0].end)]), 0), shape)
    lx = Lexer(g.spec, ctx)
    assert not lx.accepts(lx.start, "        for x in xs")  # the first line at a width where no line parses
    st, ok = lx.feed(lx.start, "    for x in xs")
    assert ok and lx.can_end(st)  # the ':' follows, then the body
    st, ok = lx.feed(lx.start, "    for x in xs:")
    assert ok and not lx.can_end(st)  # a second ':'
    st, ok = lx.feed(lx.start, "    for x in xs\n")
    assert not ok  # a header's line break before its ':' (CPython's verdict on the line)


def test_the_steering_lexer_reads_a_bracket_opener():
    req = request("def f(log):\n    if log:\n|\n            'a %s' % x)\n    return 1\n")
    shape = shape_of(req)
    g = grammar("python")
    plain = hole_context(Document(g, req.text, [(req.holes[0].start, req.holes[0].end)]), 0)
    assert plain.surplus  # the text after the hole closes a bracket nothing opened
    ctx = before_opener(plain, shape)
    assert ctx.next_char == "(" and not ctx.surplus and not ctx.lang.colon_rest
    lx = Lexer(g.spec, ctx)
    st, ok = lx.feed(lx.start, "        print")
    assert ok and lx.can_end(st)  # the '(' follows
    st, ok = lx.feed(lx.start, "        print(x")
    assert ok and not lx.can_end(st)  # its own brackets stay the fill's to close
    st, ok = lx.feed(lx.start, "        print  # say")
    assert ok and not lx.can_end(st)  # a comment would swallow the '('


def test_the_engine_reads_the_opener_after_the_hole_and_puts_it_into_the_fill(tiny_engine, monkeypatch):
    seen = []
    real = tiny_engine.tokenizer.encode_batch
    monkeypatch.setattr(tiny_engine.tokenizer, "encode_batch", lambda texts: seen.append(texts) or real(texts))
    req = request("def f(xs):\n    t = 0\n|        t += x\n    return t\n")
    res = tiny_engine.fill(req)
    assert seen[-1][1].startswith(":\n        t += x")  # the model reads the ':' after the hole
    assert res.fills[0].text.endswith(":\n")  # and the fill brings it
    assert res.fills[0].text.startswith("    ")  # the known indentation (lead) comes first
    if res.fills[0].valid:  # a random model may get stuck where only a header's head fits: then no verdict on the rest
        assert not res.fills[0].text.startswith("     ")
    prepared = tiny_engine.prepare(req)
    assert prepared.leads[-1] == tiny_engine.indent_tokens(4) != []  # the known indentation, committed up front
    assert tiny_engine.tokenizer.decode(prepared.leads[-1]) in ("   ", "    ")  # the last space may go with the word


def test_a_fill_that_opens_what_the_text_after_it_closes_is_valid(tiny_engine):
    req = request("def f(log):\n    if log:\n|\n            'a %s' % x, sep=1)\n    return 1\n")
    res = tiny_engine.fill(req)
    assert res.fills[0].text.endswith("(") and res.fills[0].valid is True
    text = req.text[: req.holes[0].start] + res.fills[0].text + req.text[req.holes[0].end :]
    compile(text, "<fill>", "exec")  # CPython agrees


def test_no_opener_for_unconstrained_fills(tiny_engine):
    prepared = tiny_engine.prepare(request("def f(xs):\n    t = 0\n|        t += x\n", constrained=False))
    assert prepared.shape == Shape() and prepared.leads == [[]]
    assert tiny_engine.tokenizer.decode(prepared.segments[1]).startswith("        t += x")


def test_a_retry_fills_a_header_where_only_a_header_parses():
    # After an ``if`` body, before a body one level deeper: a statement fits only inside the body
    # (12); a header (``else:``) at 8, or at 4. The retry's header goes at the deepest of those.
    req = request("def f(s):\n    for c in s:\n        if c:\n            out = 1\n|            out = 2\n    return out\n")
    shape = shape_of(req)
    assert shape.opener == "" and shape.first_indents == (12, 8, 4)
    assert shape.header_indents == (8,) and shape.header_opener == ":\n"
    strict = strict_shape(shape)
    assert strict.opener == ":\n" and strict.first_indents == (8,) and strict.head_only
    g = grammar("python")
    ctx = before_opener(hole_context(Document(g, req.text, [(req.holes[0].start, req.holes[0].end)]), 0), strict)
    lx = Lexer(g.spec, ctx)
    for head in ("        else", "        if c == 2", "        for x in y", "        while (n := 3) > 2"):
        st, ok = lx.feed(lx.start, head)
        assert ok and lx.can_end(st), head
    for wrong in ("        out = 2", "        else:", "        # note", "        if c\n", "        print(c)"):
        assert not lx.accepts(lx.start, wrong), wrong
    st, ok = lx.feed(lx.start, "        el")
    assert ok  # may yet be ``elif`` or ``else``


def test_no_retry_header_at_the_top_level_where_a_statement_fits():
    shape = shape_of(request("def f(xs):\n    t = 0\n|    return t\n"))
    assert shape.first_indents == (4, 0) and shape.header_indents == ()
    assert strict_shape(shape) == replace(shape, closes=True)  # the retry only closes what it opens


def _retry_lexer(text: str) -> Lexer:
    req = request(text)
    g = grammar("python")
    ctx = before_opener(hole_context(Document(g, req.text, [(req.holes[0].start, req.holes[0].end)]), 0),
                        strict_shape(shape_of(req)))
    return Lexer(g.spec, ctx)


def test_a_retry_header_before_an_except_is_a_try():
    lx = _retry_lexer("def f(s):\n    n = 0\n|        n = int(s)\n    except ValueError:\n        pass\n    return n\n")
    assert lx.ctx.lang.head_words == ("try",)
    st, ok = lx.feed(lx.start, "    try")
    assert ok and lx.can_end(st)
    for wrong in ("    if s", "    for c in s", "    def g()"):
        assert not lx.accepts(lx.start, wrong), wrong


def test_a_retry_closes_the_brackets_the_text_after_it_leaves_open():
    text = "def f():\n    names = {\n        1: 'one',\n|    return names\n"
    lx = _retry_lexer(text)
    assert lx.ctx.unclosed == 1 and lx.ctx.closes
    st, ok = lx.feed(lx.start, "        2: 'two',\n")
    assert ok and not lx.can_end(st)  # the dict is still open
    st, ok = lx.feed(st, "    }\n")
    assert ok and lx.can_end(st)
    first = Lexer(lx.spec, replace(lx.ctx, closes=False))  # the first round lets the fill end open
    assert first.can_end(first.feed(first.start, "        2: 'two',\n")[0])


def test_a_header_may_go_as_deep_as_the_lines_after_the_hole_show():
    # The levels say 0 and 4, the ':' one unit deeper (8); the body after the hole is at 8 and
    # the line after it at 6: only a header at 6 parses.
    shape = shape_of(request("def f(arr):\n    i = 1\n    while i < len(arr):\n|        ind = i\n      i += 1\n    return i\n"))
    assert shape.opener == ":\n" and shape.first_indents == (6,)


def test_first_lines_of_bracketed_statements_cut_from_real_code_get_their_bracket():
    """Lines of the standard library that open a bracket the next lines close, cut out: the shape
    puts that bracket after the hole, and steering and the judge accept the line's own head."""
    import sysconfig
    from pathlib import Path

    g = grammar("python")
    seen = ok = 0
    for name in ("argparse.py", "smtplib.py", "pdb.py", "enum.py"):
        text = (Path(sysconfig.get_paths()["stdlib"]) / name).read_text(encoding="utf-8")
        lines = text.split("\n")
        cuts = [i for i, ln in enumerate(lines) if ln.rstrip().endswith(("(", "[", "{")) and not ln.lstrip().startswith("#")]
        for i in cuts[:: max(1, len(cuts) // 10)][:10]:
            start = sum(len(ln) + 1 for ln in lines[:i])
            req = FillRequest(text=text[:start] + text[start + len(lines[i]) :], holes=[Hole(start, start, 32)],
                              language="python", options=SamplingOptions())
            shape = shape_of(req)
            if not shape.opener:
                continue  # e.g. a header line whose ':' follows the brackets' close: no stand-in tells
            seen += 1
            body = lines[i].rstrip()
            head = body[: len(body) - len(shape.opener)]
            ctx = before_opener(hole_context(Document(g, req.text, [(start, start)]), 0), shape)
            lx = Lexer(g.spec, ctx)
            st, accepted = lx.feed(lx.start, head)
            ok += body.endswith(shape.opener) and accepted and lx.can_end(st) and shape.doc.valid([(head + shape.opener).encode()])
    assert seen >= 20 and ok >= 0.9 * seen, (ok, seen)
