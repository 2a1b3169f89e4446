"""Exact conversions between the four ways of naming a place in a text.

- ``str`` offsets: Python code-point indices (what ``FillRequest`` and ``Hole`` use);
- UTF-8 byte offsets: what tree-sitter nodes and ``Tokenizer.token_bytes`` use;
- tree-sitter points: ``(row, column)`` with the column in UTF-8 bytes and rows split at ``\\n``;
- LSP positions: ``(line, character)`` with the character in UTF-16 code units and lines split
  at ``\\n``, ``\\r\\n`` or ``\\r`` (LSP 3.17 "position encoding utf-16").

Each conversion lives in exactly one function here; everything else calls these. Offsets that
fall inside a character (a byte offset in the middle of a UTF-8 sequence, a UTF-16 offset between
the two halves of a surrogate pair) round down to the character's start. LSP positions past the
end of a line clamp to the line's end, past the last line to the end of the text, as the LSP
specification says. Nothing here knows about tree-sitter objects or the LSP library.
"""

from __future__ import annotations

import re

_LSP_LINE_END = re.compile(r"\r\n|\r|\n")


# ---------------------------------------------------------------------------- str <-> UTF-8


def str_to_byte(text: str, offset: int) -> int:
    """UTF-8 byte offset of code-point offset ``offset`` in ``text``."""
    return len(text[:offset].encode("utf-8", "surrogatepass"))


def byte_to_str(data: bytes, byte: int) -> int:
    """Code-point offset of UTF-8 byte offset ``byte`` in ``data`` (rounded down to a character)."""
    byte = max(0, min(byte, len(data)))
    while 0 < byte < len(data) and (data[byte] & 0xC0) == 0x80:  # a continuation byte
        byte -= 1
    return len(data[:byte].decode("utf-8", "surrogatepass"))


# ---------------------------------------------------------------------------- UTF-8 <-> point


def byte_to_point(data: bytes, byte: int) -> tuple[int, int]:
    """Tree-sitter point ``(row, byte column)`` of byte offset ``byte`` in ``data``."""
    byte = max(0, min(byte, len(data)))
    row = data.count(b"\n", 0, byte)
    return row, byte - (data.rfind(b"\n", 0, byte) + 1)


def point_to_byte(data: bytes, point: tuple[int, int]) -> int:
    """Byte offset of tree-sitter point ``(row, byte column)``; a column past the row's end clamps."""
    row, column = point
    start = 0
    for _ in range(row):
        nl = data.find(b"\n", start)
        if nl < 0:
            return len(data)
        start = nl + 1
    end = data.find(b"\n", start)
    end = len(data) if end < 0 else end
    return min(start + max(column, 0), end)


# ---------------------------------------------------------------------------- str <-> LSP


def _utf16_len(s: str) -> int:
    return sum(2 if ord(c) > 0xFFFF else 1 for c in s)


def _line_starts(text: str) -> list[int]:
    """Code-point offsets where each LSP line starts."""
    return [0] + [m.end() for m in _LSP_LINE_END.finditer(text)]


def _line_end(text: str, starts: list[int], line: int) -> int:
    """Code-point offset where LSP line ``line`` ends (before its line terminator)."""
    if line + 1 < len(starts):
        end = starts[line + 1]
        if text[end - 2 : end] == "\r\n":
            return end - 2
        return end - 1
    return len(text)


def str_to_lsp(text: str, offset: int) -> tuple[int, int]:
    """LSP ``(line, UTF-16 character)`` of code-point offset ``offset``.

    An offset between the ``\\r`` and ``\\n`` of a CRLF is reported at the end of its line.
    """
    offset = max(0, min(offset, len(text)))
    starts = _line_starts(text)
    lo, hi = 0, len(starts) - 1
    while lo < hi:  # the last line start <= offset
        mid = (lo + hi + 1) // 2
        if starts[mid] <= offset:
            lo = mid
        else:
            hi = mid - 1
    offset = min(offset, _line_end(text, starts, lo))
    return lo, _utf16_len(text[starts[lo] : offset])


def lsp_to_str(text: str, line: int, character: int) -> int:
    """Code-point offset of LSP position ``(line, UTF-16 character)`` (clamped as LSP says)."""
    starts = _line_starts(text)
    if line < 0:
        return 0
    if line >= len(starts):
        return len(text)
    start, end = starts[line], _line_end(text, starts, line)
    units = 0
    for i in range(start, end):
        width = 2 if ord(text[i]) > 0xFFFF else 1
        if units + width > character:
            return i
        units += width
    return end


# ---------------------------------------------------------------------------- lines


def indent_width(line: str | bytes, tab: int = 8) -> int:
    """Columns of a line's leading whitespace, a tab reaching the next multiple of ``tab``."""
    if isinstance(line, bytes):
        line = line.decode("utf-8", "replace")
    width = 0
    for c in line:
        if c == " ":
            width += 1
        elif c == "\t":
            width = (width // tab + 1) * tab
        elif c in "\f\r":
            continue
        else:
            break
    return width
