"""Syntax constraints: validity against a baseline, steering, repair, selection, truncation."""

import logging
from dataclasses import replace

import pytest
import torch

from infill.model.seam import Capabilities

from infill.syntax.constraint import RequestCheck, SyntaxConstraint, block_heads, block_tails, for_chunk, is_clean, is_valid, mendable, reopens, request_valid
from infill.syntax.languages import grammar
from infill.model.network import BoundContext
from infill.protocol import FillRequest, Hole, SamplingOptions
from infill.decode.sampler import Schedule, Windows, denoise
from infill.lang.python.shape import shape_of, strict_shape
from infill.syntax.steering import Lexer
from infill.lang.python.blocks import levels_with, method_region, offside_end, offside_method_region
from infill.syntax.document import Document, error_spans, hole_context, open_string, truncate_completion


def cursor(text: str, marker: str = "|") -> tuple[str, int]:
    i = text.index(marker)
    return text[:i] + text[i + len(marker) :], i


def valid_at(language: str, text_with_cursor: str, fill: str) -> bool:
    text, i = cursor(text_with_cursor)
    return is_valid(language, text, [(i, i)], [fill])


# ---------------------------------------------------------------------------------------------
# Validity: no ERROR or MISSING node that the document did not already have.


@pytest.mark.parametrize(
    "language, doc, fill, ok",
    [
        ("python", "def f(a, b):\n    return |\n", "a + b", True),
        ("python", "def f(a, b):\n    return |\n", "a + (b", False),
        ("python", "def f(a, b):\n    return |\n", "a +", False),
        ("python", "s = '漢字😀'\nx = foo(|\n", "1)", True),  # byte offsets after non-ASCII text
        ("python", "s = '漢字😀'\nx = foo(|\n", "1", False),  # a half-typed line must be finished
        ("javascript", "function f(a) {\n  return |;\n}\n", "a.map((x) => x * 2)", True),
        ("javascript", "function f(a) {\n  return |;\n}\n", "a.map((x) => x * 2", False),
        ("go", "package main\n\nfunc f(a int) int {\n\treturn |\n}\n", "a * 2", True),
        ("go", "package main\n\nfunc f(a int) int {\n\treturn |\n}\n", "a * {2", False),
        ("rust", "fn f(a: i32) -> i32 {\n    |\n}\n", "a * 2", True),
        ("c", "int f(int a) {\n    return |;\n}\n", "a * 2", True),
        ("c", "int f(int a) {\n    return |;\n}\n", "a * 2;}", False),
    ],
)
def test_validity_on_clean_and_half_typed_documents(language, doc, fill, ok):
    assert valid_at(language, doc, fill) is ok


@pytest.mark.parametrize(
    "text, at",
    [
        ("package x\nusing namespace\n", [15]),  # Go's top-level terminator is a token its grammar hides
        ("package x\nvar a = 1 var b = 2\n", [19]),
        ("package x\n\nvar a = 1\n\nfunc f() {}\n", []),
    ],
)
def test_errors_of_tokens_a_grammar_hides_are_found(text, at):
    root = grammar("go").parse(text.encode())
    assert root.root_node.has_error is bool(at)
    assert [(e.start, e.end) for e in error_spans(root.root_node)] == [(a, a) for a in at]


def test_a_go_fill_that_leaves_two_statements_on_one_line_is_invalid():
    doc = "package x\n\ntype T struct {\n\tA int\n}\n\n|\n\nconst (\n\tB = 1\n)\n"
    assert valid_at("go", doc, "type U uint32") is True
    assert valid_at("go", doc, "using namespace") is False


def test_validity_is_judged_against_the_documents_own_errors():
    doc = "def f(a):\n    b = [1,, 2]\n    return a +|\n\ndef g(:\n    pass\n"  # b and g are broken, and stay broken
    text, i = cursor(doc)
    d = Document(grammar("python"), text, [(i, i)])
    assert d.baseline, "the document has an error of its own"
    assert d.end <= text.index("def g"), "g is outside the judged region (the compiler judges it)"
    assert d.valid([b" 1"])
    assert not d.valid([b" (1"])
    assert not d.valid([b" 1\n    if"])


def test_a_fill_that_mends_a_cut_whose_error_swallowed_the_next_declaration_is_valid():
    # The cut left `import { bindCallbackIn` whose ERROR takes in the `export function` header after
    # it, so the top-level nodes around the hole end inside that declaration.
    doc = ("import { Observable } from '../Observable';\nimport { bindCallbackIn|\n\n"
           "export function bindNodeCallback(\n  callbackFunc: (...args: any[]) => void,\n): void;\n\n"
           "export function other(a: number): number {\n  return a;\n}\n")
    assert valid_at("typescript", doc, "ternals } from './bindCallbackInternals';") is True
    assert valid_at("typescript", doc, "ternals } from") is False
    assert valid_at("typescript", doc, "ternals }") is False
    # where a compiler judges too (Python): a stub's `...` cut after its first `.` swallowed the next
    # `@overload` into its ERROR, so the region ended between that decorator and its `def`
    stub = ("@overload\ndef only(\n    iterable: Iterable[_T], *, too_long: Optional[_Raisable] = ...\n) -> Optional[_T]: .|\n"
            "@overload\ndef only(\n    iterable: Iterable[_T], default: _U\n) -> Union[_T, _U]: ...\n")
    assert valid_at("python", stub, "..") is True
    assert valid_at("python", stub, "") is False and valid_at("python", stub, ". 1") is False
    assert valid_at("python", stub + "def broken(:\n", "..") is False  # an error of the document's own: never valid


@pytest.mark.parametrize(
    "before, valid",
    [
        ("def f(a):\n    try:\n        return a\n    except TypeError:\n        return None\n", True),  # the body joins f
        ("x = 1\n", False),  # the body is indented under a plain statement
    ],
)
def test_a_header_replaced_at_a_top_level_nodes_start_is_judged_with_the_node_before(before, valid):
    # The hole is the whole `def g` line: a comment there leaves g's body to whatever stands above,
    # which the compiler accepts or not; the judge must see that node to agree with it.
    text = before + "\n\ndef g(b):\n    \"\"\"Doc.\"\"\"\n    return b\n"
    start = text.index("def g")
    end = text.index("\n", start)
    fill = "\n\n# This"
    filled = text[:start] + fill + text[end:]
    try:
        compile(filled, "<fill>", "exec")
        compiles = True
    except SyntaxError:
        compiles = False
    assert compiles is valid
    assert is_valid("python", text, [(start, end)], [fill]) is valid
    assert is_valid("python", text, [(start, end)], ["def h(b):"]) is True


@pytest.mark.parametrize(
    "language, doc, good, bad",
    [
        # A file cut mid-block (its first line is a stray 'else:', its last an open call) with a
        # half-typed string at the cursor: the original's one error swallows the whole file.
        ("python", "        else:\n            x = 2\n\nclass A:\n    def f(self):\n        names = [\n"
                   "            'a',\n            'de|\n            'c',\n        ]\n        return foo(\n",
         "st',", "st']"),
        ("javascript", "x = 1;\n}\n\nfunction f() {\n  const names = [\n    'a',\n    'de|\n    'c',\n  ];\n"
                       "  return 1;\n}\n\nfunction g(\n", "st',", "st'])"),
    ],
)
def test_errors_the_originals_error_at_the_hole_swallowed_stay_the_documents(language, doc, good, bad):
    assert valid_at(language, doc, good), "the cut's errors far from the hole are not the fill's"
    assert not valid_at(language, doc, bad)


def test_a_fill_that_leaves_a_closer_stray_is_invalid_though_taking_its_line_out_does_the_same():
    text = ("fn f(node: &N) {\n    for el in node.pairs() {\n        let (it, p) = el.into_tuple();\n"
            "        if let Some(p) = p {\n            g(p);\n        }\n    }\n}\n\nfn h() {}\n")
    s = text.index("if let")
    e = text.index("{", s) + 1
    assert is_valid("rust", text, [(s, e)], ["if p.is_some() {"])
    assert not is_valid("rust", text, [(s, e)], ["g(it);"]), "the block's '}' is left stray"


@pytest.mark.parametrize(
    "doc, blank, closing",
    [
        # The hole at the end of the file, after a dict whose '}' it took: the unclosed '{' is its error.
        ("d = {\n    'a': 1,\n|", "", "    'b': 2,\n}\n"),
        # A header whose body the hole took: CPython puts the error at the header's line break.
        ("def f(x):\n    if x:\n|", "    \n", "        return 1\n"),
        # A stray 'else:' right after the hole (it took the 'if' and its body).
        ("def f(x):\n|    else:\n        return 2\n", "", "    if x:\n        return 1\n"),
    ],
)
def test_errors_that_only_whitespace_parts_from_a_hole_are_the_fills_business(doc, blank, closing):
    text, i = cursor(doc)
    d = Document(grammar("python"), text, [(i, i)])
    assert not d.valid([blank.encode()]), "a blank fill leaves the document broken at the hole"
    assert d.valid([closing.encode()])


def test_errors_inside_a_replaced_span_are_the_fills_business():
    text = "x = 1\ny = foo(((\nz = 2\n"
    s, e = text.index("foo"), text.index("\nz")
    assert is_valid("python", text, [(s, e)], ["foo(1)"])
    assert not is_valid("python", text, [(s, e)], ["foo((1)"])


def test_several_holes_are_judged_together():
    text = "a = [1, 2]\nb = (3, 4)\n"
    holes = [(text.index("1"), text.index("1") + 1), (text.index("3"), text.index("3") + 1)]
    assert is_valid("python", text, holes, ["[0]", "{5: 6}"])
    assert not is_valid("python", text, holes, ["[0]", "{5: 6"])


def test_unknown_language_is_not_judged():
    assert is_valid("cobol-unknown", "x", [(0, 0)], ["y"]) is None
    assert is_valid(None, "x", [(0, 0)], ["y"]) is None


# ---------------------------------------------------------------------------------------------
# Steering: the cheap lexer over the hole's known left part.


def lexer_at(language: str, doc: str) -> Lexer:
    text, i = cursor(doc)
    g = grammar(language)
    return Lexer(g.spec, hole_context(Document(g, text, [(i, i)]), 0))


@pytest.mark.parametrize(
    "language, doc, text, ok",
    [
        ("python", "y = foo(a, |)\n", "b", True),
        ("python", "y = foo(a, |)\n", "b)", False),  # the ')' after the hole needs that '('
        ("python", "y = foo(a, |\n", "b)", True),  # nothing after the hole closes it
        ("python", "y = foo(a, |)\n", "b]", False),  # does not match the innermost '('
        ("python", "y = |\n", "1)", False),  # matches nothing
        ("python", "y = |\n", "(1, [2])", True),
        ("python", "y = |\n", "')'", True),  # brackets in strings are text
        ("python", "y = |\n", "'a\n'", False),  # a one-line string across a line
        ("python", "y = |\n", '"""a\n)"""', True),
        ("python", "y = |\n", "1  # )", True),
        ("python", "def f():\n|", "return 1", False),  # a block must be indented
        ("python", "def f():\n|", "    return 1", True),
        ("python", "def f():\n    if x:\n        y = 1\n|", "    z = 2", True),  # dedent to a level
        ("python", "def f():\n    if x:\n        y = 1\n|", "      z = 2", False),  # to no level
        ("python", "def f():\n    y = 1\n|", "        z = 2", False),  # deeper after no ':'
        ("python", "def f():\n    y = (1,\n|", "            2)", True),  # inside brackets: free
        ("javascript", "foo(|);\n", "`a${b}c`", True),
        ("javascript", "foo(|);\n", "`)`", True),
        ("javascript", "foo(|);\n", "a})", False),
        ("go", "package main\nfunc f() {\n\tg(|)\n}\n", "'('", True),
        ("rust", "fn f<'a>(x: &'a str) {\n    g(|);\n}\n", "'(', &'a x", True),
        ("rust", "fn f() {\n    g(|);\n}\n", "'a'))", False),
        ("c", "int f() {\n    g(|);\n}\n", "\"(\", '}'", True),
    ],
)
def test_steering_refuses_only_what_cannot_be_undone(language, doc, text, ok):
    lx = lexer_at(language, doc)
    assert lx.accepts(lx.start, text) is ok


@pytest.mark.parametrize(
    "doc, fill, ok",
    [
        ("def f(xs):\n    t = 0\n|        t += x\n", "    for x in xs:\n", True),
        ("def f(xs):\n    t = 0\n|        t += x\n", "    x = 1\n", False),  # the body is left behind
        ("def f(xs):\n    t = 0\n|        t += x\n", "", False),
        ("def f(xs):\n    t = 0\n|    return t\n", "    if t:\n", False),  # a ':' with no body
        ("def f(xs):\n    t = 0\n|    return t\n", "    t += 1\n", True),
        ("def f(xs):\n    for x in xs:\n|\n        t += x\n", "        pass", True),  # the line ends at the hole
        ("def f(xs):\n    for x in xs:\n        t = |\n    return t\n", "1", True),
        ("def f(xs):\n    for x in xs:\n        t = |\n    return t\n", "g(", False),  # its own bracket open
        ("def f(xs):\n    if xs:\n        t = 1\n    |\n", "else:", False),  # nothing after: no body
        ("def f(xs):\n    if xs:\n        t = 1\n|  # note\n\n    return t\n", "    t = 2\n", True),
        # an else: continues a statement whose block the fill must end in
        ("def f(c):\n    if c:\n        x = 1\n|    else:\n        x = 2\n", "        y = 1\n", True),
        ("def f(c):\n    if c:\n        x = 1\n|    else:\n        x = 2\n", "    y = 1\n", False),
        ("def f(c):\n    if c:\n        x = 1\n|    except E:\n        x = 2\n", "    if d:\n", False),
        # the rest of the line is a header's ':': the fill ends the header's head
        ("def f(xs):\n    for x in |:\n        pass\n", "xs", True),
        ("def f(xs):\n    for x in |:\n        pass\n", "xs:", False),
        # a decorator ends a fill only right above the definition it belongs to
        ("class A:\n    @x\n|\n\n    @y\n    def g(self):\n        pass\n", "    def f(self):\n        pass\n", True),
        ("class A:\n    @x\n|\n\n    @y\n    def g(self):\n        pass\n", "    @classmethod\n", False),
        ("x = 1\n|\n\n\ndef g():\n    pass\n", "\n@pytest.mark.skip\n", False),
        ("x = 1\n\n\n|\ndef g():\n    pass\n", "@pytest.mark.skip", True),
        ("x = 1\n\n\n|def g():\n    pass\n", "@pytest.mark.skip\n", True),
        ("class A:\n    |\n    def g(self):\n        pass\n", "@property", True),
    ],
)
def test_python_fills_end_where_the_text_after_them_may_follow(doc, fill, ok):
    lx = lexer_at("python", doc)
    st, fine = lx.feed(lx.start, fill)
    assert fine and lx.can_end(st) is ok


def test_steering_is_incremental_across_token_boundaries():
    lx = lexer_at("python", "y = |\n")
    st = lx.start
    for piece in ['"', '"', '"', "a\n)", '"""']:  # a triple quote split over three tokens
        assert lx.accepts(st, piece)
        st, ok = lx.feed(st, piece)
        assert ok
    assert st.kind == "" and not st.stack
    assert lx.can_end(st)


def test_a_fill_may_not_end_inside_a_string_or_with_its_own_brackets_open():
    lx = lexer_at("python", "y = |\n")
    assert lx.can_end(lx.feed(lx.start, "1")[0])
    assert not lx.can_end(lx.feed(lx.start, "'abc")[0])
    assert not lx.can_end(lx.feed(lx.start, "foo(1")[0])
    lx = lexer_at("python", "y = foo(|)\n")
    assert not lx.can_end(lx.feed(lx.start, "1  # c")[0])  # the comment would swallow the ')'
    assert lx.can_end(lx.feed(lx.start, "1")[0])


def test_closers_needed_counts_what_the_fill_must_still_close():
    lx = lexer_at("python", "y = |\n")
    assert [lx.closers_needed(lx.feed(lx.start, t)[0]) for t in ("1", "[1, (2", "[f('abc", "[1])")] == [0, 2, 3, 0]
    lx = lexer_at("python", "y = {\n    'a': 1,\n|")  # nothing after the hole closes the '{'
    assert lx.closers_needed(lx.feed(lx.start, "'b': [2")[0]) == 1  # the '{' is not the fill's to close...
    retry = Lexer(lx.spec, replace(lx.ctx, closes=True))
    assert retry.closers_needed(retry.feed(retry.start, "'b': [2")[0]) == 2  # ...unless the fill closes


def test_a_headers_head_alone_is_one_line_at_its_width():
    lx = lexer_at("python", "def f(s):\n    n = 0\n|\n            n += 1\n")
    head = Lexer(lx.spec, replace(lx.ctx, next_char=":", lang=replace(lx.ctx.lang, head_only=True, colon_rest=True, first_indents=(4,))))
    assert head.accepts(head.start, "    for c in s")
    assert not head.accepts(head.start, "\n    for c in s")  # no blank line before it
    assert not head.accepts(head.start, "        ")  # indented past its width: no later token mends that


def test_closers_needed_counts_a_string_kept_back_for_lookahead():
    lx = lexer_at("python", "y = {\n    'a': 1,\n|")
    retry = Lexer(lx.spec, replace(lx.ctx, closes=True))
    st = retry.feed(retry.start, "'e")[0]
    assert st.tail  # "'e" might still begin a triple quote for all the lexer knows: it is kept back...
    assert retry.closers_needed(st) == 2  # ...but it opens a string either way


def test_close_appends_the_closers_of_what_a_fill_leaves_open():
    lx = lexer_at("python", "def f():\n    y = {\n        'a': 1,\n|")  # nothing after the hole closes the '{'
    assert lx.close("        'b': 2,\n        'c': 3,\n") == "        'b': 2,\n        'c': 3,\n        }\n"
    assert lx.close("        'b': [2, (3") == "        'b': [2, (3)]}"  # its own brackets first, innermost first
    assert lx.close("") == "}"
    assert lx.close("        'b': 'x") is None  # inside a string: no closers make sense
    assert lx.close("        'b': 2}\n") is None  # nothing left open
    inner = lexer_at("python", "x = f(|)\n")  # the ')' after the hole is not the fill's to close
    assert inner.close("a, [b") == "a, [b]" and inner.close("a") is None


def test_no_steering_inside_comments_interpolations_and_strings_a_fill_would_close():
    for language, doc in [
        ("python", "x = 1  # note|\ny = 2\n"),
        ("python", "x = f'{|}'\n"),  # an f-string's interpolation is code
        ("javascript", "x = `a ${|} b`;\n"),
        ("rust", 'fn f() { let s = r#"ab|"#; }\n'),  # a raw string's '"#' is no quote the lexer knows
    ]:
        text, i = cursor(doc)
        ctx = hole_context(Document(grammar(language), text, [(i, i)]), 0)
        assert ctx.in_text and not ctx.string, doc
    for doc in [
        'x = f("abc|\ny = "q")\n',  # a one-line string the line does not close: the quote it ends at is the next's
        'def f():\n    """Docs |\n    return 1\n\n\ndef g():\n    """More."""\n',  # a docstring whose quotes were cut
    ]:
        text, i = cursor(doc)
        ctx = hole_context(Document(grammar("python"), text, [(i, i)]), 0)
        assert not ctx.string, doc
    text, i = cursor('def f():\n    """Docs.\n\n    More |docs.\n    """\n    return 1\n')
    assert hole_context(Document(grammar("python"), text, [(i, i)]), 0).string == '"""'  # over lines, before clean text
    text = "x = 'abcdef'\n"  # a hole that replaces the string's closing quote: the fill must close it
    ctx = hole_context(Document(grammar("python"), text, [(7, 12)]), 0)
    assert ctx.in_text and not ctx.string


def test_a_hole_on_the_line_after_a_comment_that_holds_its_line_break_is_code():
    # tree-sitter-rust's doc comments end after their line break: a hole at the next line's start
    # (where the engine starts a hole after its line's indentation) is not in the comment, and a
    # header cut there leaves its body headless
    doc = "impl Foo {\n    /// Doc.\n    |\n        self.x + 1\n    }\n}\n"
    text, i = cursor(doc)
    start = text.rfind("\n", 0, i) + 1
    for hole in ((i, i), (start, i)):
        ctx = hole_context(Document(grammar("rust"), text, [hole]), 0)
        assert not ctx.in_text and ctx.headless > 0, hole
    text, i = cursor("impl Foo {\n    /// Doc.|\n    fn f() {}\n}\n")  # at the comment's end: in it
    assert hole_context(Document(grammar("rust"), text, [(i, i)]), 0).in_text


@pytest.mark.parametrize(
    "language, doc, quote",
    [
        ("python", "x = 'abc|def'\n", "'"),
        ("python", 'x = f"Hello, |{name}"\n', '"'),  # the text before an interpolation
        ("python", 'def f():\n    """Docs |"""\n', '"""'),
        ("javascript", "x = `a |${b} c`;\n", "`"),
        ("go", "package p\nvar x = \"s|\"\n", '"'),
        ("go", "package p\nvar x = `raw|`\n", "`"),
    ],
)
def test_a_hole_in_a_strings_text_is_steered_to_stay_in_it(language, doc, quote):
    lx = lexer_at(language, doc)
    assert not lx.ctx.in_text and lx.ctx.string == quote
    assert lx.accepts(lx.start, "world, (") and lx.can_end(lx.feed(lx.start, "world, (")[0])  # text: no brackets to close
    assert not lx.accepts(lx.start, "a" + quote + ", b")  # the text after the hole closes it
    assert lx.can_end(lx.feed(lx.start, "a\\")[0]) is (quote in lx.spec.raw)  # a backslash would escape what follows
    assert lx.closers_needed(lx.start) == 0 and lx.next_closer(lx.start) is None
    assert lx.accepts(lx.start, "a\nb") is (quote in ('"""', "`"))  # a line break only where the string may span lines


@pytest.mark.parametrize(
    "language, doc, quote",
    [
        ("python", "names = [\n    'o|\n    'b',\n]\n", "'"),  # typing a list's next item
        ("python", 'x = f("abc|\ny = "q")\n', '"'),
        ("javascript", "const s = 'he|\nconst t = 1;\n", "'"),
        ("go", 'package p\nvar x = "s|\n', '"'),
        ("c", "char c = 'a|\nint x;\n", "'"),
    ],
)
def test_a_hole_in_a_string_its_line_leaves_open_starts_in_it_and_must_close_it(language, doc, quote):
    lx = lexer_at(language, doc)
    assert not lx.ctx.in_text and not lx.ctx.string and lx.ctx.open_string == quote
    assert lx.start.kind == "str" and not lx.can_end(lx.start) and lx.next_closer(lx.start) == quote
    assert lx.closers_needed(lx.start) >= 1
    assert not lx.accepts(lx.start, "ab\n")  # no line break inside it
    closed = lx.feed(lx.start, "ab" + quote)
    assert closed[1] and closed[0].kind == ""  # its quote closes it: code again
    if doc.startswith("names"):
        assert lx.accepts(lx.start, "ption', 'c',\n    'd'") and lx.can_end(lx.feed(lx.start, "ption',")[0])


@pytest.mark.parametrize(
    "language, code, quote",
    [
        ("python", "    'o", "'"),
        ("python", "x = 'a' + \"b", '"'),
        ("python", "x = 'a'", ""),
        ("python", 'x = """doc', ""),  # a string that may span lines: not known to be left open
        ("python", "x = 1  # it's", ""),  # a comment
        ("python", 's = "a\\\\"b', ""),  # an escaped backslash, then the closing quote
        ("python", 's = "a\\"b', '"'),  # an escaped quote
        ("python", 's = "a\\\\', '"'),
        ("python", 's = "a\\', ""),  # right after a backslash: what it escapes is not known
        ("rust", "fn f<'a>(x: &'a str) -> char { 'b", ""),  # lifetimes; a ' opens a char literal only where one closes
        ("rust", 'let s = "ab', ""),  # Rust strings span lines
        ("rust", "    ('\\u{1e60}', '\\u{1e", "'"),  # a char literal begun with an escape (a table's row cut in it)
        ("rust", "    ('\\u{1e60}', '\\", ""),  # right after its backslash
        ("rust", "x.starts_with('\\n') && f::<'a", ""),  # closed, then a lifetime
        ("c", "char c = 'a", "'"),
        ("javascript", "f(`abc", ""),
        ("javascript", '/* "x */ y = "ab', '"'),
    ],
)
def test_open_string_reads_the_quote_a_line_leaves_open(language, code, quote):
    assert open_string(grammar(language).spec, code) == quote


def test_a_refused_proposal_of_the_quote_that_closes_the_string_ends_the_fill(list_tokenizer):
    tok = list_tokenizer(["<pad>", "<mask>", "<eos>", "world", '")', ", name"])
    req = request('print("Hello, |")\n', window=3)
    c = for_chunk([req], [0], torch.zeros(1, 3, dtype=torch.long), tok, 0, 1)
    world, close, more = (tok.vocab.index(t) for t in ("world", '")', ", name"))
    state = windows([[world, MASK, MASK]], [[False, True, True]])
    tokens, allowed = c.steer(state, torch.tensor([[world, close, PAD]]), state.masked.clone(), lambda r, k: [more])
    assert tokens[0, 1] == PAD and allowed[0, 1]



def test_a_healed_word_is_read_once(list_tokenizer):
    """The engine took the cut word's last token back (token healing): the first slot writes it
    again, so the constraint reads that token without the healed bytes, and judges the row's
    fills (which come without them) against the document as it is."""
    tok = list_tokenizer(["<pad>", "<mask>", "<eos>", " return", " x", ")"])
    ret, x, close = (tok.vocab.index(t) for t in (" return", " x", ")"))
    req = request("def f(x):\n    ret|\n", window=3)
    hole = torch.zeros(1, 3, dtype=torch.long)
    state = windows([[MASK, MASK, MASK]], [[True, True, True]])
    healed = for_chunk([req], [0], hole, tok, 0, 1, heals=[[b" ret"]])
    plain = for_chunk([req], [0], hole, tok, 0, 1)
    proposal = torch.tensor([[ret, x, PAD]])
    assert healed.steer(state, proposal, state.masked.clone())[1].tolist() == [[True, True, True]]
    assert plain.steer(state, proposal, state.masked.clone())[1].tolist() == [[True, False, True]], \
        "read twice, 'ret return' is a statement that ' x' cannot follow"
    assert healed.steer(state, torch.tensor([[x, close, PAD]]), state.masked.clone())[1][0, 0].item() is False, \
        "the healed slot takes only tokens that start with the healed bytes"
    assert healed.judge(0, ["urn x"]) and not healed.judge(0, ["urn x)"])


# ---------------------------------------------------------------------------------------------
# The Constraint protocol on sampler state, with a character tokenizer and a scripted model.

VOCAB = ["<pad>", "<mask>", "<eos>", "b", ")", "(", " ", "\n", "]", "x", "{"]
PAD, MASK = 0, 1
TOK = {s: i for i, s in enumerate(VOCAB)}


class CharTokenizer:
    def token_bytes(self, t: int) -> bytes:
        return b"" if t < 3 else VOCAB[t].encode()

    def encode(self, text: str) -> list[int]:
        return [TOK[c] for c in text]


def request(doc: str, language="python", window=4, **options) -> FillRequest:
    text, i = cursor(doc)
    return FillRequest(text=text, holes=[Hole(i, i, window)], language=language, options=SamplingOptions(**options))


def windows(ids: list[list[int]], masked: list[list[bool]] | None = None) -> Windows:
    t = torch.tensor(ids)
    m = torch.tensor(masked) if masked is not None else torch.zeros_like(t, dtype=torch.bool)
    return Windows(ids=t, pos=torch.arange(t.shape[1]).expand_as(t).clone(), hole=torch.zeros_like(t), masked=m, logprob=torch.zeros(t.shape))


def constraint_for(req: FillRequest, rows: int = 1) -> SyntaxConstraint:
    hole = torch.zeros(rows, req.holes[0].max_tokens, dtype=torch.long)
    return for_chunk([req], [0] * rows, hole, CharTokenizer(), PAD, MASK)


@pytest.mark.parametrize(
    "doc, text, ok",
    [
        ("def f(x):\n    |\n", "y = = 1", False),  # the second '=' breaks the line
        ("def f(x):\n    |\n", "y = x + 1", True),
        ("def f(x):\n    |\n", "if x == 1\n", False),  # a header's line break before its ':'
        ("def f(x):\n    |\n", "if x == 1:\n        return 1", True),
        ("def f(x):\n    y = |\n", "= 1", False),  # the line began before the hole
        ("def f(x):\n    y = |\n", "x(1)", True),
        ("def f(x):\n    y = = |\n", "1", True),  # already wrong before the hole: not the fill's doing
        ("def f(x):\n    |\n", "x = (1,\n  2 3)", False),  # a logical line over two lines
    ],
)
def test_steering_refuses_what_makes_a_python_line_certainly_wrong(doc, text, ok):
    lx = lexer_at("python", doc)
    assert lx.feed(lx.start, text, final=True)[1] is ok


def test_a_python_fill_may_not_end_its_line_certainly_wrong():
    lx = lexer_at("python", "def f(x):\n    y = |\n    return y\n")
    assert not lx.can_end(lx.feed(lx.start, "x +")[0])
    assert lx.can_end(lx.feed(lx.start, "x + 1")[0])

def test_steering_judges_the_draft_left_to_right_from_the_first_masked_slot():
    c = constraint_for(request("y = [a, |]\n"))
    state = windows([[TOK["b"], MASK, MASK, MASK]], [[False, True, True, True]])
    proposal = torch.tensor([[TOK["b"], TOK[")"], TOK[")"], PAD]])
    allowed = c.steer(state, proposal, state.masked.clone())[1]
    assert allowed.tolist() == [[False, False, True, True]]  # slot 1 is refused; after it nothing is known
    proposal = torch.tensor([[TOK["b"], TOK["x"], TOK[")"], PAD]])  # slot 2 read after slot 1's proposal
    assert c.steer(state, proposal, state.masked.clone())[1].tolist() == [[False, True, False, True]]
    proposal = torch.tensor([[TOK["b"], TOK["x"], TOK["b"], PAD]])
    assert c.steer(state, proposal, state.masked.clone())[1].tolist() == [[False, True, True, True]]
    # only the slots asked about are judged; the others' proposals are read as the draft
    asked = torch.tensor([[False, False, True, False]])
    proposal = torch.tensor([[TOK["b"], TOK["x"], TOK[")"], PAD]])
    assert c.steer(state, proposal, asked)[1].tolist() == [[False, False, False, False]]


def test_a_frontier_step_has_every_slot_it_may_commit_judged():
    # a frontier schedule with speculative drafts asks its frontier and the slots after its drafts,
    # and commits them in one step while the drafts were right: none may go unjudged (before, the
    # walk stopped after two masked slots, and a third slot's ')' went through)
    req = request("y = [a, |]\n", window=6)
    c = for_chunk([req], [0], torch.zeros(1, 6, dtype=torch.long), CharTokenizer(), PAD, MASK, frontier=True)
    diffusion = for_chunk([req], [0], torch.zeros(1, 6, dtype=torch.long), CharTokenizer(), PAD, MASK)
    state = windows([[TOK["b"], MASK, MASK, MASK, MASK, MASK]], [[False, True, True, True, True, True]])
    asked = torch.tensor([[False, True, True, True, False, False]])
    proposal = torch.tensor([[TOK["b"], TOK["x"], TOK["b"], TOK[")"], TOK["x"], PAD]])
    assert c.steer(state, proposal, asked)[1].tolist() == [[False, True, True, False, False, False]]
    # a diffusion schedule's later slots read uncommitted drafts: they are judged two masked slots deep
    assert diffusion.steer(state, proposal, asked)[1].tolist() == [[False, True, True, True, False, False]]
    proposal = torch.tensor([[TOK["b"], TOK["x"], TOK["b"], TOK["x"], TOK[")"], PAD]])  # past the run: not judged
    assert c.steer(state, proposal, asked)[1].tolist() == [[False, True, True, True, False, False]]


def test_steering_replaces_a_refused_first_proposal_by_the_first_alternative_it_allows_and_walks_on():
    c = constraint_for(request("y = [a, |]\n"))
    state = windows([[TOK["b"], MASK, MASK, MASK]], [[False, True, True, True]])
    proposal = torch.tensor([[TOK["b"], TOK[")"], TOK[")"], PAD]])
    asked = []

    def alternatives(r, k):
        asked.append(k)
        return [TOK[")"], TOK["x"], TOK["b"]]

    tokens, allowed = c.steer(state, proposal, state.masked.clone(), alternatives)
    # slot 1 takes 'x' (')' is refused again); slot 2, read after it, is refused its ')' (only the
    # first masked slot looks for alternatives: the draft before later ones is not committed yet)
    assert tokens.tolist() == [[TOK["b"], TOK["x"], TOK[")"], PAD]] and asked == [1]
    assert allowed.tolist() == [[False, True, False, True]]
    tokens, allowed = c.steer(state, proposal, state.masked.clone(), lambda r, k: [TOK[")"]])
    assert tokens.tolist() == proposal.tolist() and allowed.tolist() == [[False, False, True, True]]


def test_a_refused_proposal_of_the_closer_the_text_after_the_hole_needs_ends_the_fill():
    # 'foo(a, b|)': the model proposes the ')' that follows the hole; the fill ends there rather
    # than run on with the next best token it is allowed ('foo(a, bx...')
    c = constraint_for(request("y = foo(a, |)\n"))
    state = windows([[TOK["b"], MASK, MASK, MASK]], [[False, True, True, True]])
    proposal = torch.tensor([[TOK["b"], TOK[")"], TOK[")"], PAD]])
    tokens, allowed = c.steer(state, proposal, state.masked.clone(), lambda r, k: [TOK["x"], TOK["b"]])
    assert tokens.tolist() == [[TOK["b"], PAD, TOK[")"], PAD]] and allowed.tolist() == [[False, True, True, True]]
    # slots committed after it (out of order) were written past the end the model now proposes: cut off
    state = windows([[TOK["b"], MASK, TOK["x"], MASK]], [[False, True, False, True]])
    tokens, allowed = c.steer(state, proposal, state.masked.clone(), lambda r, k: [TOK["x"], TOK["b"]])
    assert tokens[0, 1] == PAD and allowed[0, 1]
    # not where it may not end yet (its own '(' is open: that ')' is its own), nor before a hole's
    # least number of tokens, nor for a closer the text after the hole does not start with
    state = windows([[TOK["("], MASK, MASK, MASK]], [[False, True, True, True]])
    assert c.steer(state, torch.tensor([[PAD, TOK[")"], PAD, PAD]]), state.masked.clone(), None)[0][0, 1] == TOK[")"]
    state = windows([[TOK["b"], MASK, MASK, MASK]], [[False, True, True, True]])
    state.no_pad = torch.tensor([[True, True, False, False]])
    tokens, _ = c.steer(state, proposal, state.masked.clone(), lambda r, k: [TOK["x"]])
    assert tokens[0, 1] == TOK["x"]
    c = constraint_for(request("y = [foo(a, |)]\n"))
    state = windows([[TOK["b"], MASK, MASK, MASK]], [[False, True, True, True]])
    tokens, _ = c.steer(state, torch.tensor([[TOK["b"], TOK["]"], PAD, PAD]]), state.masked.clone(), lambda r, k: [TOK["x"]])
    assert tokens[0, 1] == TOK["x"]


def test_steering_keeps_room_in_the_window_for_what_the_fill_must_close():
    c = constraint_for(request("y = |\n"))
    state = windows([[TOK["("], TOK["("], MASK, MASK]], [[False, False, True, True]])
    proposal = torch.tensor([[PAD, PAD, TOK["x"], TOK[")"]]])
    # 'x' at slot 2 would leave one slot for the two ')' the fill needs: its alternative ')' is taken
    tokens, allowed = c.steer(state, proposal, state.masked.clone(), lambda r, k: [TOK["x"], TOK[")"]])
    assert tokens.tolist() == [[PAD, PAD, TOK[")"], TOK[")"]]] and allowed.tolist() == [[False, False, True, True]]
    # where a committed slot follows, how much room is left is not known: no refusal for it
    state = windows([[TOK["("], TOK["("], MASK, TOK[")"]]], [[False, False, True, False]])
    assert c.steer(state, proposal, state.masked.clone(), None)[1].tolist() == [[False, False, True, False]]


def test_a_stuck_slot_near_the_windows_end_may_take_the_closer_the_model_ranks_low():
    c = constraint_for(request("y = |\n"))
    state = windows([[TOK["("], TOK["("], MASK, MASK]], [[False, False, True, True]])
    assert c.first_admissible(state, 0, 2, [TOK["x"], TOK["b"]]) == TOK[")"]  # two ')' still to come, two slots left
    lx = lexer_at("python", "y = {\n    'a': 1,\n|")
    retry = Lexer(lx.spec, replace(lx.ctx, closes=True))
    assert [retry.next_closer(retry.feed(retry.start, t)[0]) for t in ("'b': [f('x", "'b': [2", "'b': 2", "'b': 2}")] == ["'", "]", "}", None]
    assert lx.next_closer(lx.feed(lx.start, "'b': 2")[0]) is None  # the '{' is not this fill's to close


def test_remask_flags_exactly_the_planted_bracket():
    c = constraint_for(request("y = foo(a, |)\n"))
    bad = windows([[TOK["b"], TOK[")"], PAD, PAD]])
    assert c.remask(bad).tolist() == [[False, True, True, True]]  # the ')' and the pads after it
    good = windows([[TOK["b"], PAD, PAD, PAD]])
    assert not c.remask(good).any()
    assert c.judge(0, ["b"]) is True and c.judge(0, ["b)"]) is False


def test_remask_judges_a_fill_that_said_all_as_far_as_it_is_kept():
    """A left-to-right fill ended at a line end (Engine.end_said) keeps its text up to there; the
    slots it wrote after it (the line after the hole, echoed: ``)``) are not its own, and a repair
    that blamed them would send back the fill it keeps."""
    c = constraint_for(request("y = foo(a, |\n)\n"))
    said = windows([[TOK["b"], TOK["\n"], TOK[")"], PAD]])
    assert c.remask(said).tolist() == [[False, False, True, False]]  # judged whole: the echoed ')' is an error
    c.keep(0, 0, 2)  # "b\n" kept
    assert not c.remask(said).any()


def test_remask_leaves_the_rows_of_a_request_that_has_a_valid_candidate():
    c = constraint_for(request("y = foo(a, |)\n"), rows=2)
    bad, good = [TOK["b"], TOK[")"], PAD, PAD], [TOK["b"], PAD, PAD, PAD]
    assert c.remask(windows([bad, bad])).tolist() == [[False, True, True, True]] * 2
    assert not c.remask(windows([bad, good])).any()  # selection takes the valid one: no steps for the other


def test_remask_blames_an_error_outside_the_fill_on_the_fills_brackets():
    c = constraint_for(request("function f() {\n    |\n}\nlet y = 1;\n", language="javascript", window=4))
    state = windows([[TOK["{"], TOK["x"], PAD, PAD]])  # '{' never closed: MISSING '}' at the end of the file
    flagged = c.remask(state)[0].tolist()
    assert flagged[0] and not flagged[1]


class Planted:
    """A scripted model: its first draft has a stray ')' at slot 1; asked again, it proposes pad."""

    def __init__(self):
        self.mask_id, self.pad_id = MASK, PAD  # what the sampler reads of the seam, besides its two methods
        self.capabilities = Capabilities(exact_segment_cache=True)
        self.calls = 0

    def logits(self, h):
        return h

    def window_hidden(self, ids, pos, valid, ctx):
        self.calls += 1
        R, W = ids.shape
        logits = torch.zeros(R, W, len(VOCAB))
        first = [TOK["b"], TOK[")"], PAD, PAD]
        for w in range(W):
            tok = first[w] if self.calls == 1 or w != 1 else PAD
            logits[:, w, tok] = 10.0
        return logits


def test_repair_fixes_a_planted_unbalanced_bracket():
    req = request("y = foo(a, |)\n")
    model = Planted()
    state = windows([[MASK] * 4], [[True] * 4])
    c = constraint_for(req)
    c.checks[0].lexers = [None]  # no steering (it would refuse the ')' in the draft): repair alone
    state, _ = denoise(model, BoundContext([], [], torch.zeros(1, 0, dtype=torch.bool)), state, Schedule(steps=1, max_repair_rounds=2, pad_in_order=False), constraint=c)
    assert model.calls == 2  # one draft, one repair round
    assert state.ids.tolist() == [[TOK["b"], PAD, PAD, PAD]]
    assert c.judge(0, ["b"]) is True


def test_unknown_or_unconstrained_requests_get_no_constraint(caplog):
    with caplog.at_level(logging.WARNING):
        assert constraint_for(request("x = |", language="klingon-lang")) is None
    assert "klingon-lang" in caplog.text
    assert constraint_for(request("x = |", language=None)) is None
    assert constraint_for(request("x = |", constrained=False)) is None


def test_a_broken_constraint_lets_the_fill_go_on(monkeypatch):
    c = constraint_for(request("y = foo(a, |)\n"))
    monkeypatch.setattr(RequestCheck, "valid", lambda self, fills: 1 / 0)
    monkeypatch.setattr(c.checks[0].doc, "errors", lambda fills: 1 / 0)
    state = windows([[TOK["b"], TOK[")"], PAD, PAD]])
    assert not c.remask(state).any()
    assert c.judge(0, ["b"]) is None


# ---------------------------------------------------------------------------------------------
# Syntax-aware truncation of cursor completions.


@pytest.mark.parametrize(
    "language, prefix, fill, suffix, expected",
    [
        ("python", "x = foo(a, ", "b)\ny = 2\n", "\n", "b)"),  # argument list
        ("python", "x = [1, ", "2, 3]\nprint(x)", "\n", "2, 3]"),
        ("python", "def f():\n    return g(", "1)\n    print(2)", "\n", "1)"),
        ("python", "def f():\n    x = 1\n    ", "y = 2\n    return y\n\ndef g():\n    pass", "\n", "y = 2\n    return y"),  # block
        ("python", "if x:", "\n    return 1\nprint(2)", "\n", "\n    return 1"),  # statement
        ("python", "x = 1", "\ny = 2", "\n", "\ny = 2"),  # module level: nothing to end
        ("python", "def f():\n    x = 1\n    ", "y = 2\n    z = 3", "\n    return z\n", "y = 2\n    z = 3"),  # block goes on
        ("javascript", "function f(a) {\n  const x = foo(a, ", "b);\n  return x;\n}\n", "\n}\n", "b)"),
        ("javascript", "function f(a) {\n  const x = ", "a + 1;\n  return x;\n}\n\nfunction g() {}", "\n", "a + 1;"),
        ("go", "package main\n\nfunc f() int {\n\tx := ", "1\n\treturn x\n}\n", "\n}\n", "1"),
        ("rust", "fn f() -> i32 {\n    let x = g(", "1, 2);\n    x\n}\n", "\n}\n", "1, 2);"),  # its line's ';' too
        ("c", "int f(void) {\n    int x = g(", "1, 2);\n    return x;\n}\n", "\n}\n", "1, 2);"),
        ("java", "class A {\n  int f() {\n    return g(", "1);\n  }\n}\n", "\n  }\n}\n", "1);"),
        ("python", "    def f(sel", "f, x):\n        return x", "\n        pass\n", "f, x):"),  # a header keeps its ':'
        # a cut inside its line that leaves an error there goes on to the line's end, in every language
        ("javascript", "function f(pa", "rams, b) {", "\n  return b;\n}\n", "rams, b) {"),
        ("java", "class A {\n  void f(Callback cb", "ack) {", "\n    run();\n  }\n}\n", "ack) {"),
        ("cpp", "int f() {\n  send(resul", "t(req.id));", "\n  return 0;\n}\n", "t(req.id));"),
        ("go", "package main\n\nvar xs = []T{\n\t{\"a\", \"b", "\"},", "\n\t{\"c\", \"d\"},\n}\n", "\"},"),
        ("python", "if g(", "x):\n    y = 1\nz = 2", "\n", "x):"),
        ("cobol-unknown", "x = foo(", "1)\ny", "\n", "1)\ny"),
        ("python", "x = foo(", "   ", "\n", "   "),
    ],
)
def test_truncation_cuts_at_the_end_of_the_unit_around_the_cursor(language, prefix, fill, suffix, expected):
    assert truncate_completion(language, prefix, fill, suffix) == expected


@pytest.mark.parametrize("language, prefix, fill, suffix, expected", [
    ("javascript", "function f(pa", "rams, b) {", "\n  return b;\n}\n", "rams, b) {"),
    ("go", "package main\n\nvar xs = []T{\n\t{\"a\", \"b", "\"},\n\t{\"x", "\n\t{\"c\", \"d\"},\n}\n", "\"},"),
    ("python", "if g(", "x):\n    y = 1\nz = 2", "\n", "x):"),
])
def test_the_constraint_truncates_in_its_region_parsed_incrementally(language, prefix, fill, suffix, expected):
    # a second hole earlier keeps its text; the region's tree is edited, not parsed anew
    text = "\n" + prefix + suffix
    req = FillRequest(text=text, holes=[Hole(0, 0, 4), Hole(len(prefix) + 1, len(prefix) + 1, 8)], language=language)
    check = RequestCheck(req)
    c = SyntaxConstraint([check], torch.zeros(1, 12, dtype=torch.long), CharTokenizer(), PAD, MASK)
    parses = []
    real = check.doc.parse
    check.doc.parse = lambda fills: parses.append(fills) or real(fills)
    assert c.truncate(0, 1, fill) == expected == truncate_completion(language, *check.doc.region_text(1)[:1], fill, check.doc.region_text(1)[1])
    assert parses and all(f[0] == b"" for f in parses)


def test_truncation_keeps_non_ascii_fills_whole_characters():
    assert truncate_completion("python", "x = foo(", "'漢字😀')\ny = 1", "\n") == "'漢字😀')"


# ---------------------------------------------------------------------------------------------
# The engine: constrained by default, valid candidates first.


def test_engine_marks_fills_valid_and_reports_constraint_time(tiny_engine):
    req = request("def f(a, b):\n    return |\n", window=8)
    res = tiny_engine.fill(req)
    assert isinstance(res.fills[0].valid, bool)
    assert res.timings.constrain_ms > 0
    off = tiny_engine.fill(request("def f(a, b):\n    return |\n", window=8, constrained=False))
    assert off.fills[0].valid is None and off.timings.constrain_ms == 0


def test_engine_fills_unknown_languages_unconstrained(tiny_engine):
    res = tiny_engine.fill(request("x = |\n", language="klingon-lang", window=4))
    assert res.fills[0].valid is None


def test_engine_prefers_valid_candidates(tiny_engine, monkeypatch):
    monkeypatch.setattr(SyntaxConstraint, "judge", lambda self, r, texts: r == 1)  # only row 1 is valid
    monkeypatch.setattr(SyntaxConstraint, "remask", lambda self, state: torch.zeros_like(state.masked))
    res = tiny_engine.fill(request("x = |\n", window=8, candidates=2))
    assert res.fills[0].valid is True


def test_truncation_keeps_the_line_break_when_the_suffix_starts_a_new_line():
    from infill.syntax.document import truncate_completion

    prefix = "def f(x):\n    if x:\n"
    fill = "        return 1\n    y = 2\n"
    suffix = "    return 0\n"
    out = truncate_completion("python", prefix, fill, suffix)
    assert out.endswith("\n")


@pytest.mark.parametrize("fill, ok", [("ef b():", True), ("ef b(x, y=2):", True), ("ef = 1", False), ("", False)])
def test_a_python_header_typed_above_its_body_is_judged_with_that_body(fill, ok):
    # The user retypes a function's header: the document's tree makes the body after ``d`` statements
    # of their own, and the region a fill is judged in holds them (the offside rule: they are the
    # header's body), so a fill that writes a header is valid and one that leaves them stray is not.
    text = "def a():\n    return 1\n\n\nd|\n    x = 2\n    return x\n\n\nz = 3\n"
    doc, at = cursor(text)
    d = Document(grammar("python"), doc, [(at, at)])
    assert d.local == b"d\n    x = 2\n    return x\n"  # up to its body's last line, not the blank ones
    assert valid_at("python", text, fill) is ok


def test_fills_are_judged_in_the_top_level_nodes_around_the_holes():
    text = "import os\n\n\ndef f():\n    return 1\n\n\ndef g():\n    return 2\n\n\nx = 3\n"
    g = grammar("python")
    one = text.index("1")
    d = Document(g, text, [(one, one + 1)])
    assert d.local == b"def f():\n    return 1\n"
    two = text.index("2")
    d = Document(g, text, [(one, one + 1), (two, two + 1)])  # both functions, and what lies between
    assert d.local.startswith(b"def f") and d.local.endswith(b"return 2\n")
    gap = text.index("\n\ndef g") + 1  # between the functions: both neighbours
    d = Document(g, text, [(gap, gap)])
    assert d.local.startswith(b"def f") and d.local.endswith(b"return 2\n")
    end = len(text)
    assert Document(g, text, [(end, end)]).local == b"x = 3\n"
    # An unterminated string is caught inside the region even where the whole file would accept it.
    assert not d.valid([b'"""\n'])


CLASS = ("import os\n\n\nclass C:\n    x = 1\n\n    def a(self):\n        return 1\n\n    @property\n    def b(self):\n"
         "        y = 2\n        return y\n\n    def c(self):\n        pass\n")


def test_a_hole_in_a_method_is_judged_in_that_method_after_an_if_header():
    g = grammar("python")
    at = CLASS.index("y = 2") + 4
    d = Document(g, CLASS, [(at, at + 1)])
    assert d.local == b"if 1:\n    @property\n    def b(self):\n        y = 2\n        return y\n\n"
    assert d.valid([b"3"]) and not d.valid([b"(3"])
    assert not d.valid([b"3\nz = 1"]) and not d.valid([b"3\n    z = 1"])  # the method's other lines break
    assert d.region_text(0)[0].startswith("if 1:\n    @property\n")
    x = CLASS.index("x = 1")  # at the class's own level: the top-level region
    assert Document(g, CLASS, [(x, x + 5)]).local.startswith(b"class C:")


def test_a_fill_that_leaves_the_method_is_judged_in_the_top_level_region():
    g = grammar("python")
    end = CLASS.index("return y") + len("return y")
    d = Document(g, CLASS, [(end, end)])
    assert d.head
    assert d.valid([b"\n    z = 1"])  # a class attribute after the method
    # At column 0 the class ends there, and c() after it is indented for nothing: the method's
    # region alone would accept it.
    assert not d.valid([b"\nz = 1"])
    assert Document(g, CLASS, [(end, end)], nest=False).valid([b"\n    z = 1"])


def test_a_method_whose_body_the_hole_emptied_is_still_its_region():
    g = grammar("python")
    start, end = CLASS.index("        y = 2"), CLASS.index("\n\n    def c")
    text = CLASS[:start] + "        " + CLASS[end:]  # b's body cut out: its tree is an error
    at = start + 8
    d = Document(g, text, [(at, at)])
    assert d.local == b"if 1:\n    @property\n    def b(self):\n        \n\n"
    assert d.valid([b"return 1"]) and not d.valid([b""]) and not d.valid([b"return (1"])


def test_levels_with_a_stand_in_are_read_in_the_judged_region_as_in_the_whole_document():
    g = grammar("python")
    for hole_text in ("y = 2", "return 1", "x = 1"):
        at = CLASS.index(hole_text)
        at = CLASS.rfind("\n", 0, at) + 1  # the line's start, as the engine moves a hole there
        end = CLASS.index("\n", at) + 1
        for stand_in in ("        pass\n", "    pass\n", "pass\n"):
            whole = Document(g, CLASS[:at] + stand_in + CLASS[end:], [(at, at)])
            assert levels_with(Document(g, CLASS, [(at, end)]), stand_in) == hole_context(whole, 0).lang.levels


def test_a_methods_region_runs_to_the_next_line_indented_no_deeper_than_its_header():
    data = b"    def m(self):\n        try:\n            x\n\n        except E:\n            pass\n    def n(self):\n"
    at = data.index(b"\n\n") + 1  # where a broken tree might end the method: before its except
    assert offside_end(data, at, 4) == data.index(b"    def n")
    assert offside_end(data, at, 8) == data.index(b"        except")
    assert offside_end(b"    def m():\n        pass\n", 26, 4) == 26


# A class whose method lost the 'try:' before its 'finally': tree-sitter makes one ERROR of the file.
ORPHAN = ("import os\n\n\nclass C:\n    def a(self):\n        return 1\n\n    @staticmethod\n    def b(\n        y,\n    ) -> None:\n"
          '        """Doc.\n\nAt the margin.\n        """\n        for x in y:\n            self.a|\n            finally:\n'
          "                pass\n        return 2\n\n    def c(self):\n        pass\n\n\ndef f():\n    return 3\n")


def test_where_the_tree_is_one_error_a_hole_in_a_method_is_judged_in_that_method_by_its_lines():
    g = grammar("python")
    at = ORPHAN.index("|")
    text = ORPHAN.replace("|", "")
    root = g.parse(text.encode()).root_node
    assert [c.type for c in root.children] == ["ERROR"] and method_region(root, text.encode(), [(at, at)]) is None
    d = Document(g, text, [(at, at)])
    # b with its decorator and its multi-line header, past the docstring's line at the margin, to c
    assert d.head == b"if 1:\n" and d.local.startswith(b"if 1:\n    @staticmethod\n    def b(") and d.local.endswith(b"return 2\n\n")
    assert d.valid([b"\n            try:\n                x = 1"]) and not d.valid([b"x"])  # only a 'try:' mends it
    assert not d.valid([b"\n            try:\n                x = (1"])
    # At the class's own level, on a blank line's margin, or in a top-level function: as before (the whole file).
    for where in ("    def c", "\n\n    def c", "return 3"):
        pos = text.index(where) + (1 if where.startswith("\n") else 0)
        assert offside_method_region(root, text.encode(), [(pos, pos)]) is None


def test_where_the_tree_tells_a_method_the_lines_tell_the_same():
    g = grammar("python")
    decorated = "    @pytest.mark.parametrize(\n        'x',\n        [1, 2],\n    )\n    @other\n    def d(self, x):\n        return x\n"
    for text in (CLASS, ORPHAN.replace("finally:", "except E:").replace("self.a|", "try:\n                self.a")
                 .replace("    def c(self):\n", decorated + "\n    def c(self):\n")):
        data = text.encode()
        root = g.parse(data).root_node
        assert not root.has_error
        for at in range(len(data)):
            tree, lines = method_region(root, data, [(at, at)]), offside_method_region(root, data, [(at, at)])
            if lines is not None:  # the lines may tell less (a blank line's margin), never another method
                assert tree is not None and data[tree[0] : tree[1]].rstrip() == data[lines[0] : lines[1]].rstrip(), at


def test_in_real_modules_the_lines_tell_the_method_the_tree_tells():
    from pathlib import Path

    g = grammar("python")
    root_dir = Path(__file__).resolve().parents[1]
    told = tree_told = 0
    for name in ("lsp/server.py", "infill/engine/fill.py", "infill/syntax/document.py", "infill/model/hf/causal.py"):
        data = (root_dir / name).read_bytes()
        root = g.parse(data).root_node
        for at in range(0, len(data), 97):
            tree, lines = method_region(root, data, [(at, at)]), offside_method_region(root, data, [(at, at)])
            tree_told += tree is not None
            if lines is not None:
                assert tree is not None and data[tree[0] : tree[1]].rstrip() == data[lines[0] : lines[1]].rstrip(), (name, at)
                told += 1
    assert tree_told > 500 and told >= 0.95 * tree_told  # the lines miss only a blank line's margin and the like


def test_region_judging_works_for_braced_languages():
    text = "function f() {\n  return 1;\n}\n\nfunction g() {\n  return 2;\n}\n"
    at = text.index("1;")
    d = Document(grammar("javascript"), text, [(at, at + 1)])
    assert d.local == b"function f() {\n  return 1;\n}\n"
    assert d.valid([b"a + b"]) and not d.valid([b"a + (b"]) and not d.valid([b"1 }"])


def test_a_headers_head_that_nothing_the_model_ranks_may_go_on_ends_there(list_tokenizer):
    tok = list_tokenizer(["<pad>", "<mask>", "<eos>", "    ", "else", " x", "if", " "])
    req = request("def f(x):\n    if x:\n        return 1\n|\n        return 2\n", window=4)
    shape = strict_shape(shape_of(req))  # a retry's: 'else' (or another header's head) at width 4, alone
    assert shape.head_only and "else" in shape.head_words
    c = for_chunk([req], [0], torch.zeros(1, 4, dtype=torch.long), tok, 0, 1, [shape])
    indent, word, x, space = (tok.vocab.index(t) for t in ("    ", "else", " x", " "))
    state = windows([[indent, word, MASK, MASK]], [[False, False, True, True]])
    proposal = torch.tensor([[indent, word, x, x]])
    tokens, allowed = c.steer(state, proposal, state.masked.clone(), lambda r, k: [space, x])
    assert tokens[0, 2] == PAD and allowed[0, 2]  # 'else' takes nothing before its ':', not even a space
    state = windows([[indent, tok.vocab.index("if"), MASK, MASK]], [[False, False, True, True]])
    tokens, allowed = c.steer(state, proposal, state.masked.clone(), lambda r, k: [space])
    assert tokens[0, 2] == x and allowed[0, 2]  # 'if x' goes on


def test_a_headers_head_alone_ends_where_the_model_proposes_its_colon(list_tokenizer):
    tok = list_tokenizer(["<pad>", "<mask>", "<eos>", "    ", "if", " x", ":\n", " and", "):"])
    req = request("def f(x):\n    if x:\n        return 1\n|\n        return 2\n", window=5)
    shape = strict_shape(shape_of(req))  # a retry's: a header's head alone, its ':' after the hole
    c = for_chunk([req], [0], torch.zeros(1, 5, dtype=torch.long), tok, 0, 1, [shape])
    indent, word, x, colon, also = (tok.vocab.index(t) for t in ("    ", "if", " x", ":\n", " and"))
    state = windows([[indent, word, x, MASK, MASK]], [[False, False, False, True, True]])
    # its own ':' is refused (the one after the hole ends the head); the head ends there, not with ' and'
    tokens, allowed = c.steer(state, torch.tensor([[indent, word, x, colon, x]]), state.masked.clone(), lambda r, k: [also])
    assert tokens[0, 3] == PAD and allowed[0, 3]
    state = windows([[indent, word, MASK, MASK, MASK]], [[False, False, True, True, True]])
    tokens, allowed = c.steer(state, torch.tensor([[indent, word, colon, x, x]]), state.masked.clone(), lambda r, k: [x])
    assert tokens[0, 2] == x  # 'if' alone may not end: its next best goes on


def test_inside_brackets_steering_reads_the_logical_line_from_its_outermost_brackets_line():
    lx = lexer_at("python", "def f(a):\n    x = g(a,\n          h(|\n")
    assert lx.ctx.lang.line_before == "x = g(a,\n          h("
    head = lexer_at("python", "class A:\n    def f(sel|\n        return 1\n")
    assert head.ctx.lang.line_before == "def f(sel"
    assert not head.can_end(head.feed(head.start, "f)")[0])  # a def's head is not done before its ':'
    assert head.can_end(head.feed(head.start, "f):")[0])
    assert head.owes(head.feed(head.start, "f)")[0]) == [":"] and not head.owes(head.feed(head.start, "f")[0])
    long = lexer_at("python", "x = [\n" + "    1,\n" * 200 + "|\n")
    assert long.ctx.lang.line_before is None  # too long a line to check at every step


def test_a_headers_closed_brackets_may_take_the_colon_the_model_ranks_low(list_tokenizer):
    tok = list_tokenizer(["<pad>", "<mask>", "<eos>", "f", ")", ":"])
    req = request("class A:\n    def f(sel|\n        return 1\n", window=4)
    c = for_chunk([req], [0], torch.zeros(1, 4, dtype=torch.long), tok, 0, 1)
    f, close, colon = (tok.vocab.index(t) for t in ("f", ")", ":"))
    state = windows([[f, close, MASK, MASK]], [[False, False, True, True]])
    # the fill may not end after 'def f(self)', and the model offers nothing else
    tokens, allowed = c.steer(state, torch.tensor([[f, close, PAD, PAD]]), state.masked.clone(), lambda r, k: [PAD])
    assert tokens[0, 2] == colon and allowed[0, 2]


def test_a_fill_may_mend_what_its_holes_cut_broke_away_from_them():
    # `else {` cut: the `}` that closed its block is stray further down, past where a top-level
    # node of the broken tree would end; only a fill that opens the block again mends the document
    text = "class A {\n  m(x) {\n    if (x) {\n      a();\n    }\n      b();\n    }\n    return 1;\n  }\n}\n"
    at = text.index("    }\n      b") + 5
    d = Document(grammar("javascript"), text, [(at, at)])
    assert (d.start, d.end) == (0, len(text)), "broken away from the hole, the document is judged whole"
    assert d.errors([b""])[0] == [] and not d.errors([b""])[2], "valid (the break is not the fill's), not clean"
    assert d.errors([b" else {"])[2] and is_clean("javascript", text, [(at, at)], [" else {"])
    assert not d.errors([b" else { b(); }"])[2], "opened and closed again: the stray '}' stays"
    whole = Document(grammar("javascript"), text.replace("}\n      b", "} else {\n      b"), [(at, at)])
    assert whole.errors([b""])[2], "an unbroken document is clean with a fill that adds no error"


def test_a_fill_that_mends_may_end_only_once_the_brackets_left_open_are_those_the_closers_after_it_close():
    text = "class A {\n  m(x) {\n    if (x) {\n      a();\n    }\n      b();\n    }\n    return 1;\n  }\n}\n"
    at = text.index("    }\n      b") + 5
    d = Document(grammar("javascript"), text, [(at, at)])
    ctx = hole_context(d, 0)
    assert ctx.base == ("{", "{") and ctx.surplus and ctx.after == ("}", "}", "}") and not ctx.mends
    plain, mends = Lexer(grammar("javascript").spec, ctx), Lexer(grammar("javascript").spec, replace(ctx, mends=True))
    for fill, mended in [("", False), (" else", False), (" else {", True), (" else { b(); }", False), (" else (", False),
                         (" else {{", False)]:  # one more than the closers after it close
        st, ok = mends.feed(mends.start, fill)
        assert ok and mends.can_end(st) == mended, fill
        assert plain.can_end(plain.feed(plain.start, fill)[0]), fill  # without ``mends``: the surplus lets any end
    assert mends.closers_needed(mends.start) == 1 and mends.closers_needed(mends.feed(mends.start, " else {")[0]) == 0
    assert mends.closers_needed(mends.feed(mends.start, " else { f(")[0]) == 1  # its '(' still to close
    balanced = Document(grammar("javascript"), "f(1);\n", [(2, 2)])
    assert hole_context(balanced, 0).after == (")",)


def test_a_fill_that_mends_may_not_write_an_empty_pair_of_the_opener_it_owes():
    # `type T struct {` cut before a struct's fields: `struct{}` (one token) would leave the owed `{` out of place
    text = "package p\n\n\n\tr io.Reader\n\tpath string\n}\n"
    at = text.index("\n\n\t") + 1
    ctx = hole_context(Document(grammar("go"), text, [(at, at)]), 0)
    assert ctx.after == ("}",) and not ctx.base
    mends, plain = Lexer(grammar("go").spec, replace(ctx, mends=True)), Lexer(grammar("go").spec, ctx)
    st = mends.feed(mends.start, "type T struct")[0]
    assert mends.empties_owed(st, "{}") and mends.empties_owed(st, " {}") and not mends.empties_owed(st, " {")
    assert not plain.empties_owed(plain.feed(plain.start, "type T struct")[0], "{}")  # only a fill that mends owes it
    opened = mends.feed(mends.start, "x := map[string]int{")[0]
    assert not mends.empties_owed(opened, "{}")  # owed no more once opened


def test_a_fill_that_adds_no_error_but_leaves_a_cut_blocks_closer_stray_is_not_valid_in_the_end():
    # `items.forEach((item) => {` cut: its `});` is stray, an error the document with the hole has already
    text, at = cursor("function run(items) {\n  |\n    console.log(item);\n  });\n  return items;\n}\n")
    request = FillRequest(text=text, holes=[Hole(at, at)], language="javascript")
    check = RequestCheck(request)
    assert text[at : at + check.headless[0]] == "\n    console.log(item);\n  });\n"  # the body, through its closer's line
    for fill, adds_none, final in [("items.sort();", True, False), ("", True, False),
                                   ("items.forEach((item) => {", True, True), ("items.sort(", False, False)]:
        assert check.valid([fill.encode()]) is adds_none, fill
        assert check.strays([fill.encode()]) is (adds_none and not final), fill
        assert request_valid(request, [fill]) is final, fill
    # No closer stray (the closers after the hole close what is open before it): valid as before
    text, at = cursor("function run(items) {\n  |\n  return items;\n}\n")
    request = FillRequest(text=text, holes=[Hole(at, at)], language="javascript")
    assert RequestCheck(request).headless == [0] and request_valid(request, ["items.sort();"]) is True
    # A file broken elsewhere (a stray `}` further down that no body without its opening line leads
    # to, and a block header's end, whose body is its own): what the fill adds decides, as before
    for doc in ("function run(items) {\n  |\n  return items;\n}\n\nfunction g() {\n  g();\n}\n}\n",
                "function run(items) {|\n  return items;\n}\n}\n"):
        text, at = cursor(doc)
        request = FillRequest(text=text, holes=[Hole(at, at)], language="javascript")
        check = RequestCheck(request)
        assert check.headless == [0] and not check.strays([b"items.sort();"]), doc


def test_a_fill_that_opens_another_block_than_a_cut_body_needs_is_not_valid_in_the_end():
    # `switch (kind) {` cut: a fill that opens an `if` block pairs the stray `}` but leaves the
    # `case` labels of the body broken, errors the document with the hole had already
    text, at = cursor("function f(kind) {\n  |\n    // a\n    case 'a':\n      g();\n      break;\n    case 'b':\n      h();\n"
                      "      break;\n  }\n  return kind;\n}\n")
    request = FillRequest(text=text, holes=[Hole(at, at)], language="javascript")
    check = RequestCheck(request)
    for fill, final in [("if (kind === 'a') {", False), ("if (kind === 'a') {\n    g();", False), ("while (kind) {", False),
                        ("switch (kind) {", True)]:
        assert check.valid([fill.encode()]), fill  # each adds no error
        assert request_valid(request, [fill]) is final, fill
    # An error in the document away from that body keeps the verdict on what the fill adds
    text, at = cursor("function f(kind) {\n  |\n    // a\n    case 'a':\n      g();\n  }\n  let = ;\n}\n")
    request = FillRequest(text=text, holes=[Hole(at, at)], language="javascript")
    assert request_valid(request, ["switch (kind) {"]) is True


def test_a_fill_that_closes_brackets_before_a_cut_body_and_opens_others_is_not_valid_where_later_closers_then_mismatch():
    # `b: {` (a struct field's block) cut: `}) ( {` closes the struct and its call, and its `{` pairs
    # the body's stray `}`, but the struct's own `})` further down then closes `(` and `{`
    doc = ("fn f() -> R {\n    Ok(P {\n        a: 1,\n        |\n            if x {\n                Some(1)\n"
           "            } else {\n                None\n            }\n        },\n        c: 2,\n    })\n}\n")
    text, at = cursor(doc)
    request = FillRequest(text=text, holes=[Hole(at, at)], language="rust")
    check = RequestCheck(request)
    assert check.headless[0] > 0
    for fill, final in [("}) ( {", False), ("}) ({", False), ("b: {", True)]:
        assert check.valid([fill.encode()]), fill  # each adds no error the cut document had not
        assert request_valid(request, [fill]) is final, fill


def test_a_switch_body_whose_labels_sit_at_its_opening_lines_indentation_is_headless():
    # `switch algo {` cut where gofmt puts each `case` at the `switch`'s indentation: the body is
    # still the cut line's, so a fill that leaves its closer stray is not valid in the end
    doc = "func f(algo int) bool {\n\t|\n\tcase 1, 2:\n\t\treturn true\n\tdefault:\n\t\treturn false\n\t}\n}\n"
    text, at = cursor(doc)
    request = FillRequest(text=text, holes=[Hole(at, at)], language="go")
    check = RequestCheck(request)
    assert text[at : at + check.headless[0]] == "\n\tcase 1, 2:\n\t\treturn true\n\tdefault:\n\t\treturn false\n\t}\n"
    assert request_valid(request, ["return true"]) is False and request_valid(request, ["switch algo {"]) is True
    # another word at the hole's indentation (a statement after it) is no such body; nor is a body of labels alone
    for other in (doc.replace("\tdefault:", "\tdone:"), "func f(algo int) bool {\n\t|\n\tcase 1:\n\t}\n}\n"):
        text, at = cursor(other)
        assert RequestCheck(FillRequest(text=text, holes=[Hole(at, at)], language="go")).headless == [0], other


@pytest.mark.parametrize(
    "language, doc, body, wrong, right",
    [
        # a constructor's first line cut: its parameters go on, deeper, to the `)` after the last one
        ("java", "class A {\n  private int x;\n\n  |\n      int a,\n      int b) {\n    x = a + b;\n  }\n}\n",
         "\n      int a,\n      int b) {\n", "public int get() {}", "public A("),
        ("javascript", "function f(items) {\n  |\n    items,\n    (item) => item.name);\n  return names;\n}\n",
         "\n    items,\n    (item) => item.name);\n", "log();", "const names = map("),
    ],
)
def test_a_fill_that_leaves_the_lines_going_on_from_a_cut_line_stray_is_not_valid_in_the_end(language, doc, body, wrong, right):
    # The stray closer is after code, on the last of the lines indented deeper than the hole's
    text, at = cursor(doc)
    request = FillRequest(text=text, holes=[Hole(at, at)], language=language)
    check = RequestCheck(request)
    assert text[at : at + check.headless[0]] == body
    assert check.valid([wrong.encode()]) and request_valid(request, [wrong]) is False
    assert request_valid(request, [right]) is True


def test_a_fill_mends_a_row_cut_before_its_closer_by_closing_it():
    # `2},` cut from an object's row: the '}' after the hole is the outer object's, the row's is missing
    text = "const t = {\n  a: {x: 1},\n  b: {x: |\n  c: {x: 3},\n};\nf(t);\n"
    at = text.index("|")
    text = text.replace("|", "")
    ctx = hole_context(Document(grammar("javascript"), text, [(at, at)]), 0)
    # The layout tells the row's '{' (opened on a line indented 2) from the outer one's, which the
    # '}' at indentation 0 closes: the row's is the fill's to close.
    assert ctx.base == ("{", "{") and ctx.after == ("}",) and ctx.needed == 1 and ctx.unclosed == 1 and not ctx.surplus
    assert mendable("javascript", text, [(at, at)], ["2,"]) and not mendable("javascript", text, [(at, at)], ["2},"])
    assert is_clean("javascript", text, [(at, at)], ["2},"])
    plain, mends = Lexer(grammar("javascript").spec, ctx), Lexer(grammar("javascript").spec, replace(ctx, mends=True))
    assert plain.accepts(plain.start, "2}") and not plain.accepts(plain.start, "2}}")  # the row's, never the outer one's
    for fill, mended in [("2,", False), ("2},", True), ("2}}", False), ("2}, d: {", False)]:
        st, ok = mends.feed(mends.start, fill)
        assert ok and mends.can_end(st) == mended, fill
    assert mends.mend_next(mends.feed(mends.start, "2")[0]) == ["}"] and mends.closers_needed(mends.start) == 1


@pytest.mark.parametrize(
    "language, text, owed, needed",
    [
        # a call cut mid-line in a block the same kind of bracket opens: gofmt's `const (` ... `)`
        ("go", "package p\n\nconst (\n\tA = Signal(0x15|\n\tB = Signal(0x16)\n)\n", 1, 1),
        ("python", "result = compute(\n    alpha(1, |\n)\n", 1, 1),
        # the closer on a line of its own at the opening line's indentation is that bracket's
        ("python", "result = compute(\n    1, |\n)\n", 0, 1),
        # a closer after code on its line tells nothing of the layout
        ("javascript", "f(a, g(b, |\n  c))\n", 0, 2),
    ],
)
def test_the_layout_tells_which_brackets_the_text_after_a_hole_closes(language, text, owed, needed):
    at = text.index("|")
    text = text.replace("|", "")
    ctx = hole_context(Document(grammar(language), text, [(at, at)]), 0)
    assert (ctx.unclosed, ctx.needed, ctx.surplus) == (owed, needed, False)
    lexer = Lexer(grammar(language).spec, ctx)
    closer = {"(": ")", "{": "}", "[": "]"}[ctx.base[-1]]
    assert lexer.accepts(lexer.start, "1" + closer) is bool(owed)  # the fill may close what it owes, never what is needed
    if owed:
        assert lexer.close("1") == "1" + closer
        assert is_valid(language, text, [(at, at)], ["1" + closer])


_TABLE = "static const int t[][3] = {\n{1, 2, 3},\n{4, 5|\n{7, 8, 9},\n};\n"


@pytest.mark.parametrize(
    "language, text, due",
    [
        # a table's row cut at its line's end: the next row starts a line at the row's indentation
        ("c", _TABLE, 1),
        # an initializer's values cut on a later line: the next declaration starts at the opening line's indentation
        ("c", "static const double q[] = { 1.5,\n                            2.5|\nstatic const double p[] = { 1.0 };\n", 1),
        # comment lines and preprocessor lines are not what the layout is read from
        ("c", "int t[][2] = {\n{1, 2},\n{3, |\n/* more */\n#if X\n{5, 6},\n#endif\n};\n", 1),
        ("javascript", "const t = {\n  a: {x: 1},\n  b: {x: |\n  c: {x: 3},\n};\n", 1),
        # a bracket with no code after it on its line: its items are the lines that follow
        ("c", "int t[] = {\n1,\n2|\n3,\n};\n", 0),
        # lines that go on inside the bracket indent deeper, or start with its closer
        ("python", "x = foo(a,\n        b|\n        c)\n", 0),
        ("javascript", "f(a,\n  b|\n);\n", 0),
        # code after the hole on its line may close it
        ("c", "int t[][2] = {\n{1, |2},\n{3, 4},\n};\n", 0),
        # gofmt's `const (` ... `)`: a call cut mid-line (the layout's owed bracket is due as well)
        ("go", "package p\n\nconst (\n\tA = Signal(0x15|\n\tB = Signal(0x16)\n)\n", 1),
    ],
)
def test_a_bracket_opened_with_code_after_it_is_due_before_the_next_line_at_its_indentation(language, text, due):
    at = text.index("|")
    text = text.replace("|", "")
    ctx = hole_context(Document(grammar(language), text, [(at, at)]), 0)
    assert ctx.due == due
    if due:
        assert ctx.unclosed >= due and not ctx.surplus  # the text after pairs with the brackets outside it


def test_a_due_bracket_must_be_closed_with_room_for_what_ends_its_row():
    text, at = _TABLE.replace("|", ""), _TABLE.index("|")
    ctx = hole_context(Document(grammar("c"), text, [(at, at)]), 0)
    lexer = Lexer(grammar("c").spec, ctx)
    assert not lexer.can_end(lexer.start) and lexer.leaves_due(", 6")
    closed = lexer.feed(lexer.start, ", 6}")[0]
    assert lexer.can_end(closed) and not lexer.leaves_due(", 6},")
    assert lexer.closers_needed(lexer.start) == 2 and lexer.closers_needed(closed) == 0  # its closer, and a ',' after it
    assert lexer.accepts(lexer.start, ", 6}") and not lexer.accepts(lexer.start, ", 6}}")  # the row's, never the table's
    assert lexer.next_closer(lexer.feed(lexer.start, ", 6")[0]) == "}" and lexer.close(", 6") == ", 6}"
    check = RequestCheck(FillRequest(text=text, holes=[Hole(at, at, 8)], language="c"))
    assert not check.valid([b", 6"]) and check.valid([b", 6},"]) and check.clean([b", 6},"])


def test_a_fill_that_leaves_a_due_bracket_open_is_invalid_where_the_parse_cannot_tell():
    # The document with the hole is broken there already: the parse finds nothing new in a fill
    # that leaves the initializer open (its error is the document's); the layout does.
    text, at = cursor("static const double q[] = { 1.5,\n                            2.5|\nstatic const double p[] = { 1.0 };\n")
    check = RequestCheck(FillRequest(text=text, holes=[Hole(at, at, 8)], language="c"))
    assert is_valid("c", text, [(at, at)], ["25,"]) and not check.valid([b"25,"]) and not check.clean([b"25,"])
    assert check.valid([b"25 };"]) and check.clean([b"25 };"])


def test_the_last_masked_slot_before_committed_ones_closes_a_due_bracket():
    # the table's row, `{4, 5` cut: the window's last masked slot, a committed line break after it
    text, at = cursor("int t[][2] = {\n{1, 2},\n{3, |\n{5, 6},\n};\n")
    req = FillRequest(text=text, holes=[Hole(at, at, 3)], language="c")
    c = constraint_for(req)
    x, close, nl = TOK["x"], TOK["{"], TOK["\n"]  # (no '}' in the vocabulary: '{' stands in for a token the lexer refuses)
    state = windows([[x, MASK, nl]], [[False, True, False]])
    tokens, allowed = c.steer(state, torch.tensor([[x, x, nl]]), state.masked.clone(), lambda r, k: [close])
    assert not allowed[0, 1]  # `x x` then the line break leaves the row open: refused, and so is every alternative
    room = windows([[x, MASK, MASK]], [[False, True, True]])
    tokens, allowed = c.steer(room, torch.tensor([[x, x, PAD]]), room.masked.clone(), lambda r, k: [])
    assert not allowed[0, 1]  # with free slots after it: no room left for the closer and what ends the row


def test_a_mending_fill_writes_the_opener_where_the_model_would_end_or_break_its_line(list_tokenizer):
    from infill.syntax.hooks import Shape

    tok = list_tokenizer(["<pad>", "<mask>", "<eos>", " else", " {", "\n", " x", "{", " {}"])
    text = "function f(x) {\n  if (x) {\n    a();\n  }|\n    b();\n  }\n  return 1;\n}\n"
    req = request(text, language="javascript", window=4)
    e, brace, nl, x = (tok.vocab.index(t) for t in (" else", " {", "\n", " x"))
    state = windows([[e, MASK, MASK, MASK]], [[False, True, True, True]])
    plain = for_chunk([req], [0], torch.zeros(1, 4, dtype=torch.long), tok, 0, 1)
    mending = for_chunk([req], [0], torch.zeros(1, 4, dtype=torch.long), tok, 0, 1, [Shape(mends=True)])
    for proposal in (PAD, nl):  # the model would end the fill, or its line, after ' else'; its next best goes on
        tokens, allowed = plain.steer(state, torch.tensor([[e, proposal, PAD, PAD]]), state.masked.clone(), lambda r, k: [x])
        assert tokens[0, 1] == proposal and allowed[0, 1]
        tokens, allowed = mending.steer(state, torch.tensor([[e, proposal, PAD, PAD]]), state.masked.clone(), lambda r, k: [x])
        assert tokens[0, 1] == brace and allowed[0, 1], proposal
    tokens, allowed = mending.steer(state, torch.tensor([[e, x, PAD, PAD]]), state.masked.clone(), lambda r, k: [])
    assert tokens[0, 1] == x and allowed[0, 1]  # what the model writes on its line it keeps
    last = windows([[e, x, x, MASK]], [[False, False, False, True]])  # the last slot: nothing it ranks may end the fill
    tokens, allowed = mending.steer(last, torch.tensor([[e, x, x, x]]), last.masked.clone(), lambda r, k: [x])
    assert tokens[0, 3] == brace and allowed[0, 3]
    empty = tok.vocab.index(" {}")  # an empty pair of the opener it owes: refused, its next best taken
    tokens, allowed = plain.steer(state, torch.tensor([[e, empty, PAD, PAD]]), state.masked.clone(), lambda r, k: [brace])
    assert tokens[0, 1] == empty and allowed[0, 1]
    tokens, allowed = mending.steer(state, torch.tensor([[e, empty, PAD, PAD]]), state.masked.clone(), lambda r, k: [brace])
    assert tokens[0, 1] == brace and allowed[0, 1]


# A method's '{' cut, a doc comment after it: the header alone parses as a call, and the tree's root is an ERROR.
_NO_BRACE = ("class Store extends Base {\n  configure(options)|\n    if (options === undefined) return this._options;\n\n"
             "    this._options = options;\n    return this;\n  }\n\n  /**\n"
             + "".join(f"   * line {i}: write(str) and read(str)\n" for i in range(6)) + "   */\n}\n")


@pytest.mark.parametrize("language, text, mends", [("javascript", _NO_BRACE, " {"), ("typescript", _NO_BRACE, " {")])
def test_under_a_root_that_is_an_error_the_document_is_judged_whole(language, text, mends):
    at = text.index("|")
    text = text.replace("|", "")
    d = Document(grammar(language), text, [(at, at)])
    assert d.tree.root_node.is_error  # what the case is about
    assert (d.start, d.end) == (0, len(text)), "the root's children are fragments, not top-level statements"
    assert is_valid(language, text, [(at, at)], [mends]) and is_clean(language, text, [(at, at)], [mends])
    assert not is_valid(language, text, [(at, at)], [""]), "the header alone, judged on its own line, parsed"


@pytest.mark.parametrize(
    "doc, fill, ok",
    [
        ("x = 1\n|\n\n\ndef g():\n    pass\n", "@pytest.mark.skip\n", False),  # it would decorate g
        ("x = 1\n|\n\n\ndef g():\n    pass\n", "def f():\n    pass\n", True),
        ("x = 1\n\n\n|def g():\n    pass\n", "@pytest.mark.skip\n", True),  # right above its definition
        ("@pytest.fixture\n|\n\n\ndef g():\n    pass\n", "", False),  # the decorator before the hole needs its definition
        ("@pytest.fixture\n|\n\n\ndef g():\n    pass\n", "def f():\n    return 1\n", True),
    ],
)
def test_a_python_fill_that_leaves_a_decorator_with_no_definition_is_judged_invalid(doc, fill, ok):
    """Each of these parses: a decorator decorates the next definition across blank lines. But a
    fill that ends on one (or leaves the one before the hole) changes code it was not asked to."""
    text, i = cursor(doc)
    request = FillRequest(text=text, holes=[Hole(i, i)], language="python")
    assert request_valid(request, [fill]) is ok
    assert is_valid("python", text, [(i, i)], [fill]) is True  # the parse alone lets each through


GO_HEADS = """package x

func f(a int) int {
\tif a > 0 {
\t\treturn 1
\t}
\tfor a < 3 {
\t\ta++
\t}
|
\t\treturn 2
\t}
\treturn a
}

func g() {}

func h() {
}

|
\tb int
}
"""


def _go_holes(text: str) -> tuple[str, list[int]]:
    at = [i - k for k, i in enumerate(i for i, c in enumerate(text) if c == "|")]
    return text.replace("|", ""), at


JS_TAILS = """describe('a', () => {
  it('b', () => {
    run(() => {
      x();
    });
    run(() => {
      z();
    });
  });
|
    y();
  });
});
"""


def test_block_heads_put_first_the_head_that_the_word_after_the_stray_closer_continues():
    java = "class A {\n  int f() {\n    \n      return g();\n    } catch (Exception e) {\n      return 0;\n    }\n  }\n}\n"
    at = java.index("    \n") + 4
    # `try {` cut: no line of the document begins with `try`, but `} catch` continues only a `try`'s block
    assert block_heads("java", java, [(at, at)])[0] == "try"
    go = "func f(a int) int {\n\t\n\t\treturn 1\n\t} else {\n\t\treturn 2\n\t}\n}\n"
    gat = go.index("\t\n") + 1
    assert block_heads("go", go, [(gat, gat)])[0] == "if"
    # a closer that no table word follows: the document's `func` does not mend a function's body,
    # the language's example lines that do come first (no line of the document begins with them)
    plain = go.replace("\t} else {\n\t\treturn 2\n\t}\n", "\t}\n")
    assert block_heads("go", plain, [(gat, gat)]) == ["if", "for"]


def test_block_tails_are_how_the_documents_own_lines_that_open_a_callback_end():
    at = JS_TAILS.index("|")
    text = JS_TAILS.replace("|", "")
    req = lambda t, a: FillRequest(text=t, holes=[Hole(start=a, end=a, max_tokens=8)], language="javascript")  # noqa: E731
    # `it('c', () => {` cut: the fill must open `(` and `{`; the document's own lines that leave exactly
    # those open end so, from their first such bracket on: the commonest first, then the shortest
    assert block_tails(req(text, at)) == ["(() => {", "('a', () => {"]
    # after a word on the hole's line (a rest of line cut `it|('c', () => {`): the same tails, that word their head
    mid = text[:at] + "  it" + text[at:]
    assert block_tails(req(mid, at + 4)) == ["(() => {", "('a', () => {"]
    # inside a bracket the line opened, which the text after closes too (`it(x|` ... `}));`): the tails go inside it
    opened = text[:at] + "  it(x" + text[at:].replace("  });\n});", "  }));\n});")
    assert block_tails(req(opened, at + 6)) == ["(() => {", "('a', () => {"]
    # not after a word (a statement's end); nothing to open (the hole inside a body); one opener only (a mend writes it)
    assert block_tails(req(text, at - 1)) == []
    whole = JS_TAILS.replace("|", "  it('c', () => {")
    assert block_tails(req(whole, whole.index("x();"))) == []
    one = text.replace("  });\n});\n", "  }\n});\n")  # `if (c) {` cut: only `{` to open
    assert block_tails(req(one, at)) == []
    assert block_tails(FillRequest(text=text, holes=[Hole(start=at, end=at, max_tokens=8)], language="nope")) == []


def test_block_tails_put_first_those_whose_line_opens_the_body_after_the_hole():
    text = "describe('a', () => {\n  set({\n    k: 1,\n  });\n  set({\n    k: 2,\n  });\n  it('b', () => {\n    x();\n  });\n\n    y();\n  });\n});\n"
    at = text.index("\n\n") + 1
    req = FillRequest(text=text, holes=[Hole(start=at, end=at, max_tokens=8)], language="javascript")
    # `({` ends the commonest lines, but an object's members are not the statements after the hole
    assert block_tails(req, "  ") == ["('a', () => {", "('b', () => {"]
    from infill.syntax.constraint import _document
    from infill.syntax.document import block_tails as of_document
    # then the language's example tails, which the document has no line of and which mend it; then the rest
    assert of_document(_document("javascript", text, [(at, at)]), 0, "  ", limit=5)[2:] == ["(() => {", "(function () {", "({"]


@pytest.mark.parametrize("language, doc, tails", [
    ("javascript", "function f(xs) {\n  |\n    g(x);\n  });\n}\n", ["(() => {", "(function () {"]),
    ("go", "func f() {\n\t|\n\t\tg()\n\t})\n}\n", ["(func() {"]),
    ("java", "class A {\n  void f() {\n    |\n      g();\n    });\n  }\n}\n", ["(() -> {"]),
])
def test_block_tails_where_no_line_of_the_document_ends_so_are_the_languages_examples_that_mend_it(language, doc, tails):
    text, at = cursor(doc)
    assert block_tails(FillRequest(text=text, holes=[Hole(at, at)], language=language)) == tails


def test_block_heads_are_the_documents_own_block_openers_that_mend_it():
    text, (body, top) = _go_holes(GO_HEADS)
    # A statement's opening line cut inside a function: the document's own openers at that
    # indentation, in order of appearance where equally common; `func` and `type` lines are elsewhere.
    assert block_heads("go", text[: top] + text[top:].replace("\tb int\n}\n", ""), [(body, body)], "\t") == ["if", "for"]
    # A struct's opening line cut at the top level: `func` lines are the commoner there, but only
    # `type ... struct {` opens a block whose body is fields; the document has none, so its own
    # lines' words do not mend, and the language's example line `type T struct {` does: first...
    whole = text[:body] + "\tif a < 0 {" + text[body:]
    top += len("\tif a < 0 {")
    assert block_heads("go", whole, [(top, top)]) == ["type", "func"]
    # ...as with a line of its own, though `func` lines are commoner.
    typed = "type T struct {\n\ta int\n}\n\n" + whole
    assert block_heads("go", typed, [(top + 26, top + 26)]) == ["type", "func"]
    # Not at a line's start, or nothing stray after the hole: none.
    mid = whole.index("return a") + 3
    assert block_heads("go", whole, [(mid, mid)]) == []
    assert block_heads("go", whole, [(body + 2, body + 2)]) == []


@pytest.mark.parametrize("language", ["javascript", "typescript", "tsx"])
def test_block_heads_read_a_braces_opener_where_a_template_substitution_closes_with_the_same_brace(language):
    # `}` closes both `{` and `${` in these languages: the heads are the lines that open a `{`.
    text = ("describe('a', () => {\n  it('b', () => {\n    f(`${x}`)\n  })\n})\n\n"
            "describe('c', () => {\n  it('d', () => {\n    g()\n  })\n})\n")
    cut = text.index("describe('c'")
    text = text[:cut] + text[text.index("\n", cut) + 1 :]  # the second describe's opening line cut
    assert block_heads(language, text, [(cut, cut)])[:1] == ["describe"]


def test_reopens_names_the_closer_that_a_line_closing_its_block_and_opening_the_next_starts_with():
    # `} catch (E e) {` cut: the try owes its catch, and the text after the hole closes the try's block
    text = "class A {\n  void f() {\n    try {\n      g();\n    \n      h();\n    }\n  }\n}\n"
    at = text.index("    \n      h") + 4

    def at_(i):
        return FillRequest(text=text, holes=[Hole(start=i, end=i)], language="java")

    assert reopens(at_(at)) == "}"
    assert reopens(at_(text.index("g();") + 2)) == ""  # code before it on its line
    assert reopens(at_(len(text))) == ""  # nothing open before it
    headless = text.replace("    try {\n", "    \n")  # a body that lost its opening line: not this kind
    assert reopens(FillRequest(text=headless, holes=[Hole(start=headless.index("    \n") + 4, end=headless.index("    \n") + 4)],
                               language="java")) == ""


def test_a_line_insertion_whose_unit_leaves_the_document_invalid_has_not_said_all():
    """Finisher.said_all: a whole-line insertion ends once its syntactic unit has (a statement's
    line), not where that leaves the document invalid (a header whose body is still to come)."""
    from infill.engine.finish import Finisher

    header = request("def t():\n    @memo\n|\n    assert f(1) == 1\n", window=16)
    assert Finisher(None, constraint_for(header)).said_all(0, header, 0, "    def f(x):\n") is None
    assert Finisher(None, constraint_for(header)).said_all(0, header, 0, "    def f(x): return x\n") == len("    def f(x): return x")
