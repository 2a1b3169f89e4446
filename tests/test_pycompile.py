"""Python's compiler as the strict judge of Python fills (infill/lang/python/pycompile.py via syntax.Document)."""

import pytest

from infill.syntax.constraint import is_valid
from infill.syntax.languages import grammar
from infill.lang.python.pycompile import first_error, line_broken
from infill.syntax.document import Document

BODY_LEFT_BEHIND = "def f(xs):\n    total = 0\n\n        total += x\n    return total\n"
AT = BODY_LEFT_BEHIND.index("\n        total") + 1


@pytest.mark.parametrize(
    "fill, ok",
    [
        ("    for x in xs:\n", True),
        ("", False),  # the body left behind is now an unexpected indent
        ("    x = 1\n", False),  # tree-sitter accepts this; CPython does not
        ("    for x in xs\n", False),
        ("    def g(a, a):\n", False),  # duplicate argument: only the compiler knows
    ],
)
def test_compile_errors_at_a_hole_count_against_the_fill(fill, ok):
    assert is_valid("python", BODY_LEFT_BEHIND, [(AT, AT)], [fill]) is ok


def test_tree_sitter_alone_misses_what_the_compiler_catches():
    doc = Document(grammar("python"), BODY_LEFT_BEHIND, [(AT, AT)])
    doc.strict = None
    assert doc.valid([b"    x = 1\n"])


def test_a_region_already_broken_away_from_the_holes_is_not_judged_strictly():
    doc = "def f(xs):\n    total = 0\n    \n    return total\n    bad = (1 if)\n"
    at = doc.index("    \n") + 4
    d = Document(grammar("python"), doc, [(at, at)])
    assert d.strict is not None and not d.strict.enabled
    assert d.valid([b"x = 1"])


def test_an_error_the_holes_error_hid_is_the_documents_not_the_fills():
    # A half-typed string at the hole is the first compile error; the call left open below is the
    # document's, and shows only once a fill closes the string.
    doc = "def f(self):\n    names = [\n        'a',\n        'de|\n        'c',\n    ]\n    return foo(\n"
    at = doc.index("|")
    d = Document(grammar("python"), doc.replace("|", ""), [(at, at)])
    assert d.strict.enabled and d.strict.error(b"") is None
    assert d.valid([b"st',"]) and not d.valid([b"st']"]) and not d.valid([b"st', x)"])
    filled = doc.replace("|", "st',").encode()
    hole = doc.index("|")
    assert d.strict.error(filled) is not None  # without the fills' spans: every error counts
    assert d.strict.error(filled, [(hole, hole + 4)]) is None
    # An error the region does not have with the hole's line out is the fill's, wherever it shows.
    assert not d.valid([b"st',\n        )"])


@pytest.mark.parametrize(
    "fill, ok",
    [
        ("    8: 'eight',\n    }\n    for k in d:\n", True),
        ("    8: 'eight',\n    }\n", False),  # closed, but the body after the hole has no header: CPython alone sees it
        ("    8: 'eight',\n", False),
    ],
)
def test_a_bracket_before_the_hole_that_is_never_closed_is_the_fills_business(fill, ok):
    d = marked("def f():\n    d = {\n        7: 'seven',\n|        print(k)\n    return d\n")
    assert d.strict.enabled, "the original's only error is the '{' the hole leaves open"
    assert d.valid([fill.encode()]) is ok


def marked(text: str) -> Document:
    """The Python document ``text`` with one insertion hole where its ``|`` stands."""
    at = text.index("|")
    return Document(grammar("python"), text.replace("|", ""), [(at, at)])


@pytest.mark.parametrize(
    "fill, ok",
    [
        ("name = fields.String", True),
        ("def __init__(self):", False),  # a header with no body: tree-sitter accepts it, CPython does not
    ],
)
def test_a_header_whose_body_is_the_hole_is_judged_across_blank_lines(fill, ok):
    # CPython places "expected an indented block" at the next statement, past the blank line.
    d = marked("def test(user):\n    class S(Schema):\n        |\n\n    with raises(TypeError):\n        S().dump(user)\n")
    assert d.strict.enabled, "the original's only error is the class's missing body, at the hole"
    assert d.valid([fill.encode()]) is ok


@pytest.mark.parametrize(
    "fill, ok",
    [
        ("        for j in range(2, n):\n", True),
        ("        x = 1\n", False),  # the body left behind is an unexpected indent after it
    ],
)
def test_a_body_left_behind_whose_dedent_fails_lines_later_is_the_holes_business(fill, ok):
    # CPython finds the cut's error at `return True`, three lines on: the body the hole's header
    # took, all deeper than the line before the hole.
    d = marked("def f(n):\n    def is_prime(n):\n|            if n % j == 0:\n                return False\n"
               "        return True\n    return is_prime(n)\n")
    assert d.strict.enabled
    assert d.valid([fill.encode()]) is ok


@pytest.mark.parametrize(
    "fill, ok",
    [
        ("names = {", True),
        ("# the names\n           {", False),  # tree-sitter takes it; CPython: an indentation no block has
        ("names = set()", False),  # the comprehension's lines, no bracket open for them
    ],
)
def test_an_error_in_the_lines_that_go_on_from_the_holes_line_is_the_holes_business(fill, ok):
    # `names = {` cut: the set comprehension's lines, deeper than the hole's line, fail to compile
    # where its `for` has no colon, two lines on: what the cut left them, whatever CPython calls it.
    d = marked("def f(items):\n    if items:\n        |\n            item.name\n            for item in items\n"
               "        }\n        return names\n    return set()\n")
    assert d.strict.enabled
    assert d.valid([fill.encode()]) is ok


def test_an_indentation_error_away_from_the_block_after_the_hole_is_not_the_holes():
    d = marked("def f(n):\n    x = 1\n|\n    y = 2\n    if y:\n            a = 1\n          b = 2\n")
    assert d.strict is not None and not d.strict.enabled


def test_only_the_top_level_statements_around_the_holes_are_compiled():
    doc = "def f(x):\n    y = \n    return y\n\n\ndef g(:\n    pass\n"
    at = doc.index("y = ") + 4
    d = Document(grammar("python"), doc, [(at, at)])
    assert d.strict.enabled
    assert d.end <= doc.index("def g")
    assert d.valid([b"x + 1"])
    assert not d.valid([b"x +"])


def test_error_spans_are_bytes_of_the_filled_document_with_non_ascii_text():
    doc = "s = 'é'\ndef f():\n    \n"
    at = doc.index("    \n") + 4
    d = Document(grammar("python"), doc, [(at, at)])
    errors, spans = d.new_errors(["return 1 +* 2".encode()])
    assert errors and spans[0][0] <= errors[0].start <= spans[0][1]


def test_first_error_reports_lines_and_columns_as_byte_offsets():
    src = "x = 'ü'\ny = (1,\n"
    err = first_error(src.encode())
    assert err is not None and "never closed" in err.message
    assert src.encode()[err.start : err.start + 1] == b"("
    assert first_error(b"x = 1\n") is None
    assert first_error(b"\xff\xfe") is None  # not UTF-8: no verdict
    assert first_error(b"x = '\\d'\n") is None  # a SyntaxWarning is not an error


# ---------------------------------------------------------------------------------------------
# line_broken: one logical line, judged while it is being written.


@pytest.mark.parametrize(
    "line, ended",
    [
        ("value = =", False),  # no text after it undoes the second '='
        ("if x == == 1", False),
        ("print x", False),
        ('x = "é" = =', False),  # an error CPython places before the end, at the literal
        ("value = = foo(", False),  # an error before an open bracket
        ("raise OSError e ", False),  # a whole word that cannot follow
        ("if value is None", True),  # a header's line break before its ':'
        ("x = 1 +", True),
        ("else", True),
        ("return x:", True),
        ("out out", False),  # the last word can only grow into a name, and a name cannot follow
        ("def f(self, n, n)", False),  # a parameter named twice (the compiler's symbol table says so)
        ("def f(self, n, n):", True),
        ("def f(end, end,", False),  # ... its brackets still open
        ("def string_xor(xor, yor, yor=None.", False),  # ... what follows the name does not parse
        ("def f(\n    a: int,\n    a=1", False),  # ... on a logical line of more than one line
        ("def is_palindrome('abc',", False),  # an error inside a bracket still open
        ("f(a == = ", False),
        ("f(a b c", False),  # a comma forgotten, on one line, before the last word
    ],
)
def test_certainly_wrong_lines(line, ended):
    assert line_broken(line, ended)


@pytest.mark.parametrize(
    "line, ended",
    [
        ("value =", False),  # cut off: the right-hand side may follow
        ("x = 1 +", False),
        ("if char =", False),  # half of '=='
        ("x = {1: type(.", False),  # a third of '...'
        ("return all(self[e] =", False),
        ("raise OSError e", False),  # a word that may grow
        ("x = 0x", False),  # a number half written
        ("x = foo(a, b", False),
        ('x = """abc', False),
        ("return x if y", False),  # "expected 'else'" is what cut-off text draws
        ("if x == 1:", True),  # a block header
        ("else:", True),  # clauses are judged after a statement they can continue
        ("elif x:", True),
        ("except ValueError as e:", True),
        ("finally:", True),
        ("case [a, b]:", True),
        ("case = 1", True),  # a soft keyword as a name
        ("@decorator(1)", True),
        ("return x", True),  # outside a function: the compiler's business, not the parser's
        ("if x: return y", True),
        ("", True),
        ("x i", False),  # a keyword may grow from the last word (``x if y else z``)
        ('"a" f', False),  # a string prefix (``"a" f"b"``)
        ("def f(self, n, m)", False),
        ("def f(end, end", False),  # the last name may grow (``end2``)
        ("def f(a, b=lambda a, b: 0)", False),  # a lambda's parameters are its own
        ("def f(a: dict[str, a], b=a)", False),  # annotations and defaults name no parameter
        ("def f(a, *,", False),  # what closing the bracket now would draw (a bare '*') is not counted
        ("d = {'a': ", False),
        ("f(x i", False),
    ],
)
def test_lines_that_may_be_right(line, ended):
    assert not line_broken(line, ended)


def test_no_prefix_of_a_real_line_is_judged_wrong():
    """Every character prefix of every logical line of a standard-library module, and the whole line."""
    import io
    import sysconfig
    import tokenize
    from pathlib import Path

    src = (Path(sysconfig.get_paths()["stdlib"]) / "argparse.py").read_text()
    starts = [0]
    for ln in src.splitlines(keepends=True):
        starts.append(starts[-1] + len(ln))
    at = lambda rc: starts[rc[0] - 1] + rc[1]  # noqa: E731
    begin, lines = None, 0
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type == tokenize.NEWLINE and begin is not None:
            line = src[begin : at(tok.start)]
            assert not line_broken(line, True), line
            for k in range(1, len(line)):
                assert not line_broken(line[:k], False), line[:k]
            begin, lines = None, lines + 1
        elif begin is None and tok.type not in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT,
                                                 tokenize.NEWLINE, tokenize.ENCODING):
            begin = at(tok.start)
    assert lines > 1000
