"""Documents and positions: LSP positions <-> ``str`` offsets, the text sent to the engine, and
the ``<FILL>`` sites of a document.

LSP counts a line's characters in UTF-16 code units by default (UTF-8 or UTF-32 when negotiated);
Python counts code points; the conversions live in infill/text/textpos.py (one function each).

The engine trims context to its token budget itself; for huge documents we cut a generous window
of characters around the holes first, and turn CRLF into LF so the model sees what it was trained
on (fills are turned back into the document's line ending).
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from infill.text.holes import find_holes, match_newlines, newline_of
from infill.protocol import Hole

WINDOW_CHARS = 131_072  # characters kept on each side of the holes: far more than any context budget


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
        holes = [msgspec.structs.replace(h, start=h.start - lo, end=h.end - lo) for h in holes]
    if "\r\n" in text:
        def shift(offset: int) -> int:
            return offset - text.count("\r\n", 0, offset)

        holes = [msgspec.structs.replace(h, start=shift(h.start), end=shift(h.end)) for h in holes]
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
