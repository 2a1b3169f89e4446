"""Python's compiler as the strict judge of Python fills (infill/pycompile.py via syntax.Document)."""

import pytest

from infill.constraints import is_valid
from infill.languages import grammar
from infill.pycompile import first_error
from infill.syntax import Document

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
