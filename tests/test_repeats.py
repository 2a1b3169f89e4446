"""Cutting the loops of a fill: a line again right after itself, or the lines after the hole."""

import pytest

from infill.engine.repeats import cut_repeats

BEFORE = "def get(self, key):\n    self.hits += 1\n"
AFTER = "\n    return self._items[key]\n"


@pytest.mark.parametrize(
    "fill, cut_off, expected",
    [
        # the sample's loop: the same line three times (the window ran out in the third)
        ("    self._items[key] = value\n    self._items[key] = value\n    self._items[key]", True,
         "    self._items[key] = value\n"),
        ("    x = 1\n    x = 1\n", False, "    x = 1\n"),
        ("    x = 1\n\n    x = 1\n    y = 2", False, "    x = 1\n\n"),  # blank lines between count as adjacent
        ("    x = 1\n    y = 1\n    x = 1", False, "    x = 1\n    y = 1\n    x = 1"),  # not adjacent: code
        ("    if x:\n        x = 1\n    x = 1", False, "    if x:\n        x = 1\n    x = 1"),  # indentation differs
        ("    x = 10\n    x = 1", False, "    x = 10\n    x = 1"),  # a whole last line, not a repeat cut short
        ("    x = 10\n    x = 1", True, "    x = 10\n"),  # the window ran out in it: a repeat cut short
        # the fill copies the line after the hole
        ("    return self._items[key]", False, ""),
        ("    y = 2\n    return self._items[key]\n", False, "    y = 2\n"),
        ("    return self._items", False, "    return self._items"),
    ],
)
def test_a_fill_is_cut_where_it_starts_to_loop(fill, cut_off, expected):
    assert cut_repeats(fill, BEFORE, AFTER, cut_off) == expected


def test_the_hole_s_own_line_is_read_whole():
    # mid-line: the first line goes on from the text before the hole and is never dropped whole
    assert cut_repeats("1\nx = 1\n", "def f():\nx = ", "\ny = 2\n") == "1\n"
    assert cut_repeats("1", "def f():\n    y = ", "\n    y = 1\n") == "1"  # 'y = 1' is not the fill's copy
    # the rest of the hole's line after it: the last line goes on into it, and is never cut
    assert cut_repeats("a", "f(", ")\nf(a)\n") == "a"
    assert cut_repeats("g(a)\n    g(", "    ", "a)\n") == "g(a)\n    g("


def test_lines_a_pair_of_copies_of_the_text_after_the_hole_are_cut_together():
    after = "\n    a = 1\n    b = 2\n    return a + b\n"
    assert cut_repeats("    c = 3\n    a = 1\n    b = 2", "def f():\n", after) == "    c = 3\n"
    assert cut_repeats("    a = 1\n    b = 2", "def f():\n", after) == ""


@pytest.mark.parametrize(
    "fill, expected",
    [
        ("a, b, b, b, b, b, b, b", "a, b"),  # a piece over and over to the line's end, and its separator
        ("option, flags, flags, flags,", "option, flags"),
        ("x and y and y and y and y", "x and y"),
        ("f(x)\n    g(x, x, x, x", "f(x)\n    g(x"),  # only the last line's run
        ("a, b, b", "a, b, b"),  # not often enough
        ("[0, 0, 0, 0]", "[0, 0, 0, 0]"),  # numbers: data more often than a loop
        ("x = 1000000000", "x = 1000000000"),
        ("(None, None, None)", "(None, None, None)"),  # the line goes on past the run
    ],
)
def test_a_run_of_the_same_piece_at_a_fills_end_is_cut_to_its_first(fill, expected):
    assert cut_repeats(fill, "def f(a, b):\n    return g(", ")\n") == expected


@pytest.mark.parametrize(
    "fill, after, expected",
    [
        ("0.0;", ";\n    Some(x)\n", "0.0"),  # the statement's end, which the line already has
        ("0.0 ;", " ;\n", "0.0"),  # spaces around it skipped
        ("b,", ", c)\n", "b"),  # an item's end
        ("x.len();", "\n", "x.len();"),  # the line has nothing after the hole
        ("a;", ",\n", "a;"),  # another separator
        (";", ";\n", ";"),  # nothing but the separator: kept (a blank fill is no better)
        ("x = 1;\n    y = 2;", ";\n", "x = 1;\n    y = 2;"),  # several lines: never cut here
    ],
)
def test_a_separator_the_hole_s_line_already_has_is_cut_off_the_fill_s_end(fill, after, expected):
    assert cut_repeats(fill, "fn f() {\n    let s = ", after) == expected
