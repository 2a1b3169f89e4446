"""Context snippets laid out as tokens before a document: other files' lines, and the lines further
down the document itself, each under a comment naming its file, within a token room.

A model that reads only the text before a hole (a causal one) is shown the code below the hole as
one more snippet, "FILE (further down)": the whole lines after the line that the hole's text goes
on, the first ones first. The engine lays out a request's snippets with :func:`lay_out`, and the
window adapter's training (infill/train/window_adapter.py) cuts its examples with the same
functions, so that what the adapter learns to read is what the engine shows it.

Invariants:
- pure functions of their arguments and of the ``encode`` they are given (no files, no models);
- a snippet is cut to its first whole lines whose tokens fit the room left to it, or left out
  where not even one line fits; the last snippet (the best, nearest the text) is kept first;
- the result's tokens are exactly the encoding of :func:`infill.text.related.header`'s text for
  the snippets kept, one snippet encoded at a time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from infill.text.related import header

MAX_TOKEN_CHARS = 32  # characters per token of room that a snippet's lines are read for, at most
Encode = Callable[[str], list[int]]


def further_down(after: str, lines: int) -> str:
    """The first ``lines`` whole lines after the line that ``after`` (the text after a hole) goes
    on: what a model that never reads the text after its hole is shown of the code below it."""
    if lines <= 0 or "\n" not in after:
        return ""
    return "".join(after[after.find("\n") + 1 :].splitlines(keepends=True)[:lines])


def further_down_name(path: str | None) -> str:
    """The name a document's own lines further down stand under."""
    return f"{Path(path or 'this file').name} (further down)"


def first_lines(encode: Encode, path: str, text: str, comment: str | None, room: int) -> list[int]:
    """The tokens of one snippet under its header, cut to its first whole lines that fit ``room``."""
    lines, chars = [], 0
    for line in text.splitlines(keepends=True):  # no token is longer than MAX_TOKEN_CHARS: never tokenize more
        chars += len(line)
        if chars > room * MAX_TOKEN_CHARS:
            break
        lines.append(line)
    while lines:
        piece = encode(header([(path, "".join(lines))], comment))
        if len(piece) <= room:
            return piece
        lines = lines[: min(len(lines) - 1, len(lines) * room // len(piece))]
    return []


def lay_out(encode: Encode, snippets: list[tuple[str, str]], comment: str | None, room: int) -> list[int]:
    """The tokens of ``snippets`` ((path, text), the best last) within ``room`` tokens in all."""
    kept: list[list[int]] = []
    for path, text in reversed(snippets):
        piece = first_lines(encode, path, text, comment, room)
        if piece:
            kept.insert(0, piece)
            room -= len(piece)
    return [t for piece in kept for t in piece]
