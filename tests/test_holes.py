"""Marker parsing, cursor positions and newline handling (infill/text/holes.py): pure, no model."""

import pytest

from infill.errors import InputError
from infill.text.holes import (
    MAX_HOLE_TOKENS,
    apply_fills,
    find_holes,
    line_col,
    match_newlines,
    newline_of,
    parse_position,
    position_to_offset,
)
from infill.protocol import Hole


def test_no_markers():
    assert find_holes("x = 1\n") == ("x = 1\n", [])


def test_one_marker_default_budget():
    text, holes = find_holes("x = <FILL>\n", 32)
    assert text == "x = \n"
    assert holes == [Hole(4, 4, 32, min_tokens=1)]


def test_sized_markers_and_offsets_in_clean_text():
    src = "a<FILL:5>b\nc<FILL>d<FILL:512>"
    text, holes = find_holes(src, 7)
    assert text == "ab\ncd"
    assert holes == [Hole(1, 1, 5, 1), Hole(4, 4, 7, 1), Hole(5, 5, 512, 1)]
    assert apply_fills(text, holes, ["X", "Y", "Z"]) == "aXb\ncYdZ"


def test_marker_in_string_and_comment_is_a_hole():
    text, holes = find_holes('s = "<FILL>"  # <FILL:3>\n')
    assert text == 's = ""  # \n'
    assert [h.start for h in holes] == [5, 10]


def test_unicode_offsets_are_code_points():
    text, holes = find_holes("é = '日本<FILL>'")
    assert holes[0].start == text.index("'") + 3


@pytest.mark.parametrize("marker", ["<FILL:0>", "<FILL:513>", "<FILL:-1>", "<FILL:abc>", "<FILL:>", "<FILL:1.5>"])
def test_bad_budget_is_a_clear_error(marker):
    with pytest.raises(InputError, match=r"line 2:3"):
        find_holes(f"x\n  {marker}\n")


def test_adjacent_markers_are_an_error():
    with pytest.raises(InputError, match="nothing between"):
        find_holes("a<FILL><FILL>b")


def test_not_markers():
    for s in ["<fill>", "<FILL", "FILL>", "<FILLER>", "<FILL:\n3>"]:
        assert find_holes(s)[1] == [], s


def test_budget_limits_match_engine():
    from infill.engine import fill as engine

    assert MAX_HOLE_TOKENS == engine.MAX_HOLE_TOKENS


def test_bad_default_budget():
    with pytest.raises(InputError):
        find_holes("<FILL>", 0)


def test_parse_position():
    assert parse_position("3:7") == (3, 7)
    for bad in ["3", "a:b", "0:1", "1:0", "1:-2"]:
        with pytest.raises(ValueError):
            parse_position(bad)


def test_position_to_offset_lf_and_crlf():
    text = "ab\ncde\n"
    assert position_to_offset(text, 1, 1) == 0
    assert position_to_offset(text, 2, 3) == 5
    assert position_to_offset(text, 2, 4) == 6  # end of line 2
    assert position_to_offset(text, 3, 1) == 7  # the empty last line
    crlf = "ab\r\ncde\r\n"
    assert position_to_offset(crlf, 1, 3) == 2  # before the \r
    assert position_to_offset(crlf, 2, 1) == 4
    with pytest.raises(InputError):
        position_to_offset(crlf, 1, 4)  # the \r is not a column


def test_position_non_ascii_columns_are_characters():
    text = "日本語 = 1\n"
    assert position_to_offset(text, 1, 4) == 3
    assert line_col(text, 3) == (1, 4)


@pytest.mark.parametrize("line,col", [(0, 1), (4, 1), (1, 4), (2, 99)])
def test_position_out_of_range(line, col):
    with pytest.raises(InputError, match="out of range"):
        position_to_offset("ab\ncd\n", line, col)


def test_newlines():
    assert newline_of("a\nb\n") == "\n"
    assert newline_of("a\r\nb\r\n") == "\r\n"
    assert newline_of("no newline") == "\n"
    assert match_newlines("x\ny\r\nz", "\r\n") == "x\r\ny\r\nz"
    assert match_newlines("x\r\ny", "\n") == "x\ny"
