"""Positions and options, without a server: UTF-16 (emoji, CJK), CRLF, tabs, bad values."""

from __future__ import annotations

import pytest

from infill.protocol import Hole
from infill.text.textpos import lsp_to_str as offset_at
from infill.text.textpos import str_to_lsp as position_at
from infill.text.cursor import word_before
from infill.lsp.documents import fill_sites, prepare
from infill.lsp.options import Options, parse_options

TEXT = "a😀b\r\n\tx = 中文\ry\n"


@pytest.mark.parametrize("encoding", ["utf-16", "utf-8", "utf-32"])
def test_offsets_and_positions_round_trip(encoding):
    for offset in range(len(TEXT) + 1):
        if TEXT[offset - 1 : offset + 1] == "\r\n":
            continue  # between \r and \n is not a position
        assert offset_at(TEXT, *position_at(TEXT, offset, encoding), encoding) == offset


def test_utf16_units_and_clamping():
    assert position_at(TEXT, 2) == (0, 3)  # the emoji is two UTF-16 units
    assert offset_at(TEXT, 0, 2) == 1  # inside the surrogate pair: the start of the emoji
    assert offset_at(TEXT, 0, 99) == 3  # past the end of the line: its end (before \r\n)
    assert offset_at(TEXT, 1, 1) == 6  # a tab is one unit
    assert offset_at(TEXT, 2, 0) == 13  # a lone \r ends a line too
    assert offset_at(TEXT, 4, 0) is None and offset_at(TEXT, -1, 0) is None
    assert offset_at("", 0, 0) == 0
    assert position_at(TEXT, 10, "utf-8") == (1, 5)
    assert position_at(TEXT, 11, "utf-8") == (1, 8)  # 中 is three UTF-8 bytes


def test_prepare_normalizes_crlf_and_windows_huge_texts():
    p = prepare("ab\r\ncd\r\nef", [Hole(6, 6, 3)])
    assert p.text == "ab\ncd\nef" and p.holes == [Hole(5, 5, 3)] and p.fill_text("x\ny") == "x\r\ny"
    big = "x" * 1_000_000
    p = prepare(big, [Hole(500_000, 500_000, 4)], window=1000)
    assert len(p.text) == 2000 and p.holes == [Hole(1000, 1000, 4)]


def test_fill_sites_and_selection():
    clean, holes, sites = fill_sites("a<FILL>b<FILL:4>c")
    assert clean == "abc" and holes == [Hole(1, 1, 32, 1), Hole(2, 2, 4, 1)]
    assert [(s.start, s.end) for s in sites] == [(1, 7), (8, 16)]
    _, holes, sites = fill_sites("a<FILL>b<FILL:4>c", 8, 17)
    assert holes == [Hole(2, 2, 4, 1)] and [(s.start, s.end) for s in sites] == [(8, 16)]


def test_word_before():
    assert word_before("x = hel", 7) == "hel" and word_before("f(", 2) == "" and word_before("中文x", 3) == "中文x"


def test_options_parse_with_defaults_for_bad_values():
    options, problems = parse_options({"infill": {"modelPath": "/m", "steps": "many", "maxTokens": 0,
                                                  "threshold": 0.9, "constrained": 1, "colour": "blue"}})
    assert options == Options(model_path="/m", threshold=0.9)
    assert len(problems) == 4
    assert parse_options(None) == (Options(), [])
    assert parse_options([1, 2])[0] == Options() and parse_options([1, 2])[1]
    assert parse_options({"debounce_ms": 5, "device": "cuda:1"})[0] == Options(debounce_ms=5, device="cuda:1")
    assert parse_options({"retry": True})[0] == Options(retry=True) and Options().retry is False  # off where keystrokes wait
