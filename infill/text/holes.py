"""Where the holes are: ``<FILL>`` markers in a text, or a cursor given as LINE:COL.

Pure functions on ``str``; no I/O, no torch. Offsets are Python ``str`` indices (code points),
the same as ``infill.protocol.Hole``.

Markers:

- ``<FILL>`` is a hole of the default budget (``--max-tokens``, 32 unless told);
- ``<FILL:N>`` is a hole of at most N tokens, 1 <= N <= 512 (anything else is an error, as is
  a malformed ``<FILL:...>``);
- a marker is found wherever it appears, **inside a string literal or a comment too**: the text
  is not parsed. To keep the literal text ``<FILL>`` in a file, fill it some other way
  (``infill fill --at LINE:COL`` does not look for markers at all).

The markers are removed from the text; each hole is an empty span (an insertion) at the place
of its marker in the marker-free text. Adjacent markers are an error (two holes at one spot).
"""

from __future__ import annotations

import re

from infill.errors import InputError
from infill.protocol import Hole

MAX_HOLE_TOKENS = 512  # the engine's limit (infill.engine.MAX_HOLE_TOKENS); kept here to stay torch-free
DEFAULT_MAX_TOKENS = 32

# "<FILL" followed by ">" or ":anything-up-to->" on the same line (so a malformed N is reported).
_MARKER = re.compile(r"<FILL(?::([^<>\n]{0,20}))?>")


def line_col(text: str, offset: int) -> tuple[int, int]:
    """1-based (line, column in characters) of ``offset`` in ``text`` (lines end at ``\\n``)."""
    line = text.count("\n", 0, offset) + 1
    col = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, col


def find_holes(text: str, default_max_tokens: int = DEFAULT_MAX_TOKENS) -> tuple[str, list[Hole]]:
    """Remove the ``<FILL>`` / ``<FILL:N>`` markers from ``text``.

    Returns the text without markers and one ``Hole`` (an insertion point) per marker, in order.
    Raises InputError (with line:column) for a bad N or two markers with nothing between them.
    No markers gives an empty list (the caller decides whether that is an error).
    """
    if not 1 <= default_max_tokens <= MAX_HOLE_TOKENS:
        raise InputError(f"the default hole budget must be between 1 and {MAX_HOLE_TOKENS} tokens, got {default_max_tokens}")
    pieces: list[str] = []
    holes: list[Hole] = []
    at = 0  # in text
    out_len = 0  # length of the marker-free text so far
    for m in _MARKER.finditer(text):
        n_text = m.group(1)
        if n_text is None:
            budget = default_max_tokens
        else:
            try:
                budget = int(n_text.strip())
            except ValueError:
                line, col = line_col(text, m.start())
                raise InputError(f"line {line}:{col}: bad marker {m.group(0)!r} (use <FILL> or <FILL:N>, N a number of tokens)") from None
            if not 1 <= budget <= MAX_HOLE_TOKENS:
                line, col = line_col(text, m.start())
                raise InputError(f"line {line}:{col}: {m.group(0)}: N must be between 1 and {MAX_HOLE_TOKENS} tokens")
        if holes and m.start() == at:
            line, col = line_col(text, m.start())
            raise InputError(f"line {line}:{col}: two <FILL> markers with nothing between them (use one, with a larger N)")
        pieces.append(text[at : m.start()])
        out_len += m.start() - at
        holes.append(Hole(start=out_len, end=out_len, max_tokens=budget, min_tokens=1))
        at = m.end()
    if not holes:
        return text, []
    pieces.append(text[at:])
    return "".join(pieces), holes


def parse_position(spec: str) -> tuple[int, int]:
    """``"LINE:COL"`` -> (line, col), both 1-based integers; ValueError otherwise."""
    line_s, sep, col_s = spec.partition(":")
    if not sep:
        raise ValueError(f"{spec!r} is not LINE:COL")
    line, col = int(line_s), int(col_s)
    if line < 1 or col < 1:
        raise ValueError(f"{spec!r}: line and column start at 1")
    return line, col


def position_to_offset(text: str, line: int, col: int) -> int:
    """The ``str`` offset of 1-based (line, col); the column counts characters.

    Lines end at ``\\n``; a ``\\r`` before it is not a column. Column ``len(line) + 1`` is the end
    of the line. A text ending in a newline has one more (empty) line after it, as in an editor.
    Raises InputError when the position is outside the text.
    """
    lines = text.split("\n")
    if not 1 <= line <= len(lines):
        raise InputError(f"position {line}:{col}: line {line} is out of range (the text has {len(lines)} lines)")
    content = lines[line - 1]
    if content.endswith("\r"):
        content = content[:-1]
    if not 1 <= col <= len(content) + 1:
        raise InputError(f"position {line}:{col}: column {col} is out of range (line {line} has {len(content)} characters)")
    start = sum(len(s) + 1 for s in lines[: line - 1])
    return start + col - 1


def newline_of(text: str) -> str:
    """The text's line ending: ``"\\r\\n"`` if most of its newlines are CRLF, else ``"\\n"``."""
    crlf = text.count("\r\n")
    return "\r\n" if crlf and crlf * 2 >= text.count("\n") else "\n"


def match_newlines(fill: str, newline: str) -> str:
    """``fill`` with its line endings converted to ``newline``."""
    if newline == "\n":
        return fill.replace("\r\n", "\n")
    return fill.replace("\r\n", "\n").replace("\n", newline)


def apply_fills(text: str, holes: list[Hole], fills: list[str]) -> str:
    """``text`` with each hole's span replaced by its fill (holes ordered and disjoint)."""
    if len(holes) != len(fills):
        raise ValueError(f"{len(holes)} holes but {len(fills)} fills")
    out, at = [], 0
    for hole, fill in zip(holes, fills):
        out.append(text[at : hole.start])
        out.append(fill)
        at = hole.end
    out.append(text[at:])
    return "".join(out)
