"""Exact position conversions on non-ASCII text: emoji (astral), CJK, combining marks, CRLF."""

import pytest

from infill.text.textpos import (
    blank_around,
    byte_to_point,
    byte_to_str,
    indent_width,
    lsp_to_str,
    point_to_byte,
    str_to_byte,
    str_to_lsp,
)

TEXT = "a = '😀'\r\nb = \"漢字\"  # e\u0301\n\tc = 1\rd\n"


def test_str_byte_round_trip_at_every_offset():
    data = TEXT.encode()
    for i in range(len(TEXT) + 1):
        b = str_to_byte(TEXT, i)
        assert b == len(TEXT[:i].encode())
        assert byte_to_str(data, b) == i


def test_byte_inside_a_character_rounds_down():
    data = "x😀y".encode()  # the emoji is bytes 1..4
    assert [byte_to_str(data, b) for b in range(len(data) + 1)] == [0, 1, 1, 1, 1, 2, 3]


def test_points_count_bytes_and_split_rows_at_newline_only():
    data = TEXT.encode()
    for b in range(len(data) + 1):
        row, col = byte_to_point(data, b)
        assert row == data[:b].count(b"\n")
        assert point_to_byte(data, (row, col)) == b
    # 'b = "' then two 3-byte CJK characters
    b = str_to_byte(TEXT, TEXT.index("字"))
    assert byte_to_point(data, b) == (1, 5 + 3)
    assert point_to_byte(data, (0, 999)) == data.index(b"\n")  # past the row's end: clamps


@pytest.mark.parametrize(
    "offset, pos",
    [
        (0, (0, 0)),
        (TEXT.index("😀"), (0, 5)),
        (TEXT.index("😀") + 1, (0, 7)),  # an astral character is two UTF-16 units
        (TEXT.index("\r\n"), (0, 8)),
        (TEXT.index("\r\n") + 1, (0, 8)),  # between \r and \n: the end of line 0
        (TEXT.index("b"), (1, 0)),
        (TEXT.index("字") + 1, (1, 7)),
        (TEXT.index("\u0301") + 1, (1, 14)),  # a combining mark is its own code unit
        (TEXT.index("\tc"), (2, 0)),
        (TEXT.index("d"), (3, 0)),  # a lone \r ends a line for LSP
        (len(TEXT), (4, 0)),
    ],
)
def test_lsp_positions(offset, pos):
    assert str_to_lsp(TEXT, offset) == pos
    if offset != TEXT.index("\r\n") + 1:
        assert lsp_to_str(TEXT, *pos) == offset


def test_lsp_round_trip_and_clamping():
    for i in range(len(TEXT) + 1):
        if TEXT[i - 1 : i + 1] == "\r\n":
            continue
        assert lsp_to_str(TEXT, *str_to_lsp(TEXT, i)) == i
    assert lsp_to_str(TEXT, 0, 999) == TEXT.index("\r\n")  # past the line's end
    assert lsp_to_str(TEXT, 99, 0) is None  # past the last line: no position
    assert lsp_to_str("😀x", 0, 1) == 0  # inside a surrogate pair: the character's start


def test_indent_width():
    assert indent_width("    x") == 4
    assert indent_width("\tx") == 8
    assert indent_width("  \tx") == 8
    assert indent_width(b"  \n") == 2


def test_blank_around_widens_over_whitespace_and_line_breaks_only():
    data = "x = {\n  \t\n".encode() + b"\n  y"
    s = e = data.index(b"\n\n") + 1
    assert blank_around(data, s, e) == (data.index(b"{") + 1, data.index(b"y"))
    assert blank_around(b"ab", 1, 1) == (1, 1)
    assert blank_around(b"  ", 1, 1) == (0, 2)
