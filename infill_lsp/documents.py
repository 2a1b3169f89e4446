"""Documents and positions: LSP positions <-> ``str`` offsets, the text sent to the engine, and
the ``<FILL>`` sites of a document.

LSP counts a line's characters in UTF-16 code units by default (UTF-8 or UTF-32 when negotiated);
Python counts code points. ``offset_at`` and ``position_at`` are the only places that convert.
Lines end at ``\\r\\n``, ``\\r`` or ``\\n`` as in the LSP spec; a character past the end of its line
means the end of the line (as the spec says), a line past the end of the document is no position.

The engine trims context to its token budget itself; for huge documents we cut a generous window
of characters around the holes first, and turn CRLF into LF so the model sees what it was trained
on (fills are turned back into the document's line ending).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from infill.holes import find_holes, match_newlines, newline_of
from infill.protocol import Hole

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
WINDOW_CHARS = 131_072  # characters kept on each side of the holes: far more than any context budget


def _unit_len(ch: str, encoding: str) -> int:
    if encoding == "utf-8":
        return len(ch.encode("utf-8", "surrogatepass"))
    if encoding == "utf-32":
        return 1
    return 2 if ord(ch) > 0xFFFF else 1  # utf-16


def units(text: str, encoding: str = "utf-16") -> int:
    """Length of ``text`` in the position encoding's code units."""
    if encoding == "utf-32":
        return len(text)
    if encoding == "utf-8":
        return len(text.encode("utf-8", "surrogatepass"))
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def _line_bounds(text: str, line: int) -> tuple[int, int] | None:
    """(start, end without the line break) of line ``line`` (0-based), or None past the end."""
    if line < 0:
        return None
    start = 0
    for n, m in enumerate(_LINE_BREAK.finditer(text)):
        if n == line:
            return start, m.start()
        start = m.end()
    else:
        n = text.count("\n") + text.count("\r") - text.count("\r\n")  # breaks seen
    return (start, len(text)) if line == n else None


def offset_at(text: str, line: int, character: int, encoding: str = "utf-16") -> int | None:
    """The ``str`` offset of an LSP position; None if the line is not in the document.

    A character past the end of the line clamps to the line's end; one inside a UTF-16 surrogate
    pair or a UTF-8 sequence rounds down to the start of that code point.
    """
    bounds = _line_bounds(text, line)
    if bounds is None or character < 0:
        return None
    start, end = bounds
    if encoding == "utf-32":
        return min(start + character, end)
    at, used = start, 0
    while at < end:
        used += _unit_len(text[at], encoding)
        if used > character:
            break
        at += 1
    return at


def position_at(text: str, offset: int, encoding: str = "utf-16") -> tuple[int, int]:
    """The LSP (line, character) of a ``str`` offset (clamped to the text)."""
    offset = max(0, min(offset, len(text)))
    if 0 < offset < len(text) and text[offset - 1] == "\r" and text[offset] == "\n":
        offset -= 1  # between \r and \n: the end of that line
    line, start = 0, 0
    for m in _LINE_BREAK.finditer(text):
        if m.end() > offset:  # past the offset (or it falls between \r and \n: the end of that line)
            break
        line, start = line + 1, m.end()
    return line, units(text[start:offset], encoding)


def word_before(text: str, offset: int) -> str:
    """The identifier characters just before ``offset`` (what a completion menu filters on)."""
    at = offset
    while at > 0 and (text[at - 1].isalnum() or text[at - 1] == "_"):
        at -= 1
    return text[at:offset]


@dataclass(frozen=True)
class Prepared:
    """Text and holes as sent to the engine, and how to map fills back into the document."""

    text: str
    holes: list[Hole]
    newline: str  # the document's line ending, for the fills

    def fill_text(self, fill: str) -> str:
        return match_newlines(fill, self.newline)


def prepare(text: str, holes: list[Hole], window: int = WINDOW_CHARS) -> Prepared:
    """Cut ``text`` to a window around the holes and normalize CRLF to LF, moving the holes along."""
    newline = newline_of(text) if "\r" in text else "\n"
    lo = max(0, holes[0].start - window)
    hi = min(len(text), holes[-1].end + window)
    if lo or hi < len(text):
        text = text[lo:hi]
        holes = [Hole(h.start - lo, h.end - lo, h.max_tokens) for h in holes]
    if "\r\n" in text:
        def shift(offset: int) -> int:
            return offset - text.count("\r\n", 0, offset)

        holes = [Hole(shift(h.start), shift(h.end), h.max_tokens) for h in holes]
        text = text.replace("\r\n", "\n")
    return Prepared(text=text, holes=holes, newline=newline)


@dataclass(frozen=True)
class Site:
    """A ``<FILL>`` marker in the document: its span (``str`` offsets) is replaced by the fill."""

    start: int
    end: int


def fill_sites(
    text: str, start: int = 0, end: int | None = None, max_tokens: int = 32
) -> tuple[str, list[Hole], list[Site]]:
    """The marker-free text, and the holes and marker spans of the markers inside [start, end].

    Markers outside the range are removed from the text the model sees but not filled.
    Raises ``infill.errors.InputError`` for a malformed marker anywhere in the document.
    """
    end = len(text) if end is None else end
    clean, holes = find_holes(text, max_tokens)
    chosen_holes, sites, consumed = [], [], 0
    for hole in holes:
        at = hole.start + consumed  # where the marker starts in the original text
        stop = text.index(">", at) + 1
        consumed += stop - at
        if start <= at and stop <= end:
            chosen_holes.append(hole)
            sites.append(Site(at, stop))
    return clean, chosen_holes, sites


def cache_key(text: str, hole: Hole, before: int = 8192, after: int = 4096) -> tuple[str, str, int]:
    """What the fill at an insertion point depends on, in practice: the text near it."""
    return text[max(0, hole.start - before) : hole.start], text[hole.end : hole.end + after], hole.max_tokens
