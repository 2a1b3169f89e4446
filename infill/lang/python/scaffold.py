"""Python: a hole that must end with nested block headers, filled as several holes around them.

Where the text after a hole is indented deeper than any one header allows (a loop and the ``if``
in it were cut out above their body), a fill must write each header in turn, at the right width,
each with its ':'. A small model rarely does, and no repair of a draft turns statements into
headers. Where infill/lang/python/shape.py found such a scaffold (``Shape.scaffold``: the headers' widths, and
a body line where the text after goes on with a clause such as ``else:``), the engine fills a
request of several holes instead: free lines first (they may stay empty), then each header's
head between its indentation and its ':', then the body line (where the hole is inside brackets,
``Shape.scaffold_closes``, the free lines must close them first). The holes are denoised
together, each seeing the others, as any multi-site edit is; :func:`join` makes the one fill of
the original hole from their fills again.

It only rewrites requests and results: it does not search for scaffolds, parse, or sample.
"""

from __future__ import annotations

import msgspec

from infill.text.holes import apply_fills
from infill.protocol import Fill, FillRequest, FillResult, Hole
from infill.lang.python.shape import ScaffoldHole, Shape, indent_unit

HEAD_WINDOW = 16  # tokens for a header's head (``for key in dict.keys()``) or the body line
FREE_WINDOW = 32  # tokens at most for the free lines before the headers


def fits(request: FillRequest, shape: Shape) -> bool:
    """Does the hole's window (``max_tokens``) hold the scaffold's lines (HEAD_WINDOW each)?"""
    return request.holes[0].max_tokens >= HEAD_WINDOW * len(shape.scaffold)


def split(request: FillRequest, shape: Shape) -> tuple[FillRequest, Shape]:
    """The request of several holes that fills ``request``'s one hole (which starts a line, and
    :func:`fits` the scaffold) with free lines, then ``shape.scaffold``'s headers and body line,
    all in the hole's window; and its shape, which tells the syntax checks which holes are those
    lines."""
    h = request.holes[0]
    parts, holes = [request.text[: h.start]], []
    free = min(max(h.max_tokens - HEAD_WINDOW * len(shape.scaffold), 1), FREE_WINDOW)  # within the hole's window

    def hole(window: int, min_tokens: int) -> None:
        at = sum(map(len, parts))
        holes.append(Hole(at, at, window, min_tokens=min_tokens))

    hole(free, 0)
    parts.append("\n")  # the free lines end here (a blank one where they stay empty: join drops it)
    for width, words in shape.scaffold:
        parts.append(" " * width)
        hole(HEAD_WINDOW, 1)
        parts.append(":\n" if words else "\n")
    tail = request.text[h.end :]
    if tail.startswith(("\n", "\r\n")):  # the hole ended its line: so does the scaffold's last
        parts[-1] = parts[-1][:-1]
    parts.append(tail)
    widths = [width for width, _ in shape.scaffold]
    levels = shape.levels
    if shape.scaffold_after_header and levels:  # the free lines hold a body a level deeper: the first line follows it
        levels = (*levels, max(levels) + indent_unit(levels))
    closes = shape.scaffold_closes
    lines = [ScaffoldHole(0, shape.levels, seam=widths[0], opened=shape.scaffold_after_header, closes=closes)]
    lines += [ScaffoldHole(i + 1, _line_levels(levels, widths[: i + 1]), width=width, head=bool(words), head_words=words,
                           opened=i > 0, closes=closes) for i, (width, words) in enumerate(shape.scaffold)]
    return msgspec.structs.replace(request, text="".join(parts), holes=holes), Shape(scaffold_holes=tuple(lines))


def _line_levels(levels: tuple[int, ...] | None, widths: list[int]) -> tuple[int, ...] | None:
    """The indentation levels open at the scaffold's line of width ``widths[-1]``: those at the
    hole up to the first line's width, then the lines' before it (each opens the next's block)."""
    if levels is None:
        return None
    return tuple(sorted({lv for lv in levels if lv <= widths[0]} | set(widths[:-1])))


def join(request: FillRequest, scaffolded: FillRequest, result: FillResult, free: bool = True) -> FillResult:
    """The result of ``request`` from that of its ``scaffolded`` request: its one fill is the text
    between the hole's start and the text after it once every hole is filled (without the free
    lines unless ``free``), valid where all fills are, scored by the sum of their scores (the joint
    log-probability of the text they make together, as Fill.score is of one fill)."""
    fills = result.fills
    texts = [f.text for f in fills]
    blank = not (free and texts[0].strip())
    texts[0] = "" if blank else texts[0].rstrip()  # the scaffold's line break ends them
    filled = apply_fills(scaffolded.text, scaffolded.holes, texts)
    start, after = request.holes[0].start, len(request.text) - request.holes[0].end
    text = filled[start + blank : len(filled) - after]  # no free lines: no blank line before the headers
    valid = False if any(f.valid is False for f in fills) else (True if all(f.valid for f in fills) else None)
    score = sum(f.score for f in fills)
    return msgspec.structs.replace(result, fills=[Fill(text=text, score=score, valid=valid)])
