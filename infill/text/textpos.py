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


def line_start(data: bytes, at: int) -> int:
    """Byte offset of the start of the line that holds byte ``at``."""
    return data.rfind(b"\n", 0, at) + 1


def line_end(data: bytes, at: int) -> int:
    """Byte offset just past the line break that ends the line holding ``at`` (or the end)."""
    nl = data.find(b"\n", at)
    return len(data) if nl < 0 else nl + 1


def blank_around(data: bytes, start: int, end: int) -> tuple[int, int]:
    """Bytes [start, end) widened over the whitespace (line breaks included) on either side."""
    return len(data[:start].rstrip()), len(data) - len(data[end:].lstrip())


def lsp_units(text: str, encoding: str = "utf-16") -> int:
    """Length of ``text`` in an LSP position encoding's code units (utf-16, utf-8 or utf-32)."""
    if encoding == "utf-32":
        return len(text)
    if encoding == "utf-8":
        return len(text.encode("utf-8", "surrogatepass"))
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def _line_bounds(text: str, line: int) -> tuple[int, int] | None:
    """(start, end without the line break) of LSP line ``line`` (0-based), or None past the end."""
    if line < 0:
        return None
    start, n = 0, 0
    for n, m in enumerate(_LSP_LINE_END.finditer(text)):
        if n == line:
            return start, m.start()
        start = m.end()
        n += 1
    return (start, len(text)) if line == n else None


def lsp_to_str(text: str, line: int, character: int, encoding: str = "utf-16") -> int | None:
    """Code-point offset of an LSP position; None if the line is not in the document.

    A character past the end of its line means the line's end (as the LSP spec says); one
    inside a UTF-16 surrogate pair or a UTF-8 sequence rounds down to that code point's start.
    """
    bounds = _line_bounds(text, line)
    if bounds is None or character < 0:
        return None
    start, end = bounds
    if encoding == "utf-32":
        return min(start + character, end)
    at, used = start, 0
    while at < end:
        used += lsp_units(text[at], encoding)
        if used > character:
            break
        at += 1
    return at


def str_to_lsp(text: str, offset: int, encoding: str = "utf-16") -> tuple[int, int]:
    """LSP ``(line, character)`` of a code-point offset (clamped to the text).

    An offset between the ``\\r`` and ``\\n`` of a CRLF is reported at the end of its line.
    """
    offset = max(0, min(offset, len(text)))
    if 0 < offset < len(text) and text[offset - 1] == "\r" and text[offset] == "\n":
        offset -= 1
    line, start = 0, 0
    for m in _LSP_LINE_END.finditer(text):
        if m.end() > offset:
            break
        line, start = line + 1, m.end()
    return line, lsp_units(text[start:offset], encoding)


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
