"""Fills that loop: a line written again right after itself, or the lines that follow the hole.

A small model that has run out of things to say writes the same line again (``x = 1`` three
times) or copies the text after the hole into the fill (the next line, then the hole's end
again). A line identical to the one before it is almost never what code says twice, and a fill
that ends with the lines after the hole says them twice; the copies are cut off here:

- :func:`cut_repeats` keeps a fill up to the first line that repeats the non-blank line before
  it (indentation included), or, where the window ran out mid-line, a last line that is the
  start of the line before it, or the same piece over and over (``f(a, b, b, b, b``: ``f(a, b``);
  then drops the fill's last lines where they are the lines that follow the hole (``return x``
  before a hole whose next line is ``return x``), or the separator it ends with where the hole's
  line goes on with that separator (``0.0;`` before ``;``: the statement's end written twice).

Pure text functions: no tokens, no grammar (the engine judges a cut fill's syntax afterwards,
as any other), and nothing else about a fill's content is judged here.
"""

from __future__ import annotations


def cut_repeats(fill: str, before: str, after: str, cut_off: bool = False) -> str:
    """``fill`` without the lines that repeat the line before them or the text after the hole.

    ``before`` / ``after``: the text around the hole (of ``before`` only the hole's own line is
    read, of ``after`` only as many lines as the fill has); ``cut_off``: the fill ran to its
    window's end (its last line may be a repeat cut short).
    """
    head = before[before.rfind("\n") + 1 :]
    nl = after.find("\n")
    tail = after if nl < 0 else after[:nl]
    fill = _cut_loop(fill, head, tail, cut_off)
    fill = _cut_run(fill)
    fill = _cut_separator(fill, tail)
    return _cut_copy(fill, head, tail, after, len(after) if nl < 0 else nl + 1)


SEPARATORS = ";,"  # what ends a statement or an item: never twice in a row in code


def _cut_separator(fill: str, tail: str) -> str:
    """The fill without the separators it ends with where the rest of the hole's line (``tail``)
    starts with the same ones (spaces between them skipped): a one-line fill that ends the
    statement or item the line already ends."""
    body = fill.rstrip(" \t")
    kept = body.rstrip(SEPARATORS + " \t")
    owed = "".join(body[len(kept) :].split())
    if "\n" in body or not kept.strip() or not owed or not "".join(tail.split()).startswith(owed):
        return fill
    return kept


def _lines(fill: str, head: str, tail: str) -> list[str]:
    """The lines the fill writes, whole: its first goes on from ``head``, its last into ``tail``."""
    lines = fill.split("\n")
    lines[0] = head + lines[0]
    lines[-1] += tail
    return lines


def _cut_loop(fill: str, head: str, tail: str, cut_off: bool) -> str:
    """The fill up to the first of its lines that repeats the non-blank line before it."""
    lines, segments = _lines(fill, head, tail), fill.split("\n")
    prev = None
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        if i == len(lines) - 1 and tail.strip():
            break  # the line goes on with the text after the hole: cutting it would break that line
        if prev is not None and (line.rstrip() == prev or (i == len(lines) - 1 and cut_off and prev.startswith(line))):
            return "\n".join(segments[:i]) + "\n"
        prev = line.rstrip()
    return fill


RUN_UNIT = 24  # the longest piece of a line whose run is cut
RUN_TIMES = 3  # how many times in a row it must come


def _cut_run(fill: str) -> str:
    """The fill up to the first piece of its last line that the rest of that line only repeats
    (``RUN_TIMES`` times or more, the last time cut short maybe), and the separators it ends with:
    ``f(a, b, b, b, b, b`` becomes ``f(a, b``. A piece has a letter and a character no word has
    (numbers, ``0, 0, 0, 0``, are data more often than a loop)."""
    start = fill.rfind("\n") + 1
    line = fill[start:]
    best = None  # (where the run starts, its piece's length)
    for n in range(2, RUN_UNIT + 1):
        p = len(line) - n  # the run of period n that reaches the line's end starts at p
        while p > 0 and line[p - 1] == line[p - 1 + n]:
            p -= 1
        unit = line[p : p + n]
        if (len(line) - p) // n >= RUN_TIMES and (best is None or p < best[0]) and _loops(unit):
            best = p, n
    return fill if best is None else fill[: start + sum(best)].rstrip(" \t,;")


def _loops(piece: str) -> bool:
    """Can a run of ``piece`` be a loop: it has a letter and a character no word has?"""
    return any(c.isalpha() or c == "_" for c in piece) and any(not (c.isalnum() or c == "_") for c in piece)


def _cut_copy(fill: str, head: str, tail: str, after: str, rest: int) -> str:
    """The fill without its last lines where they are the first lines after the hole's line (from
    ``after[rest:]``; only where the fill ends that line, and never the part of its first line
    that ``head`` began)."""
    if tail.strip():
        return fill
    lines, segments = _lines(fill, head, tail), fill.split("\n")
    following = _first_lines(after, rest, len(lines))
    first = 0 if not head.strip() else 1  # the first line the fill wrote whole
    for m in range(len(lines) - first, 0, -1):
        copied = [line.rstrip() for line in lines[len(lines) - m :] if line.strip()]
        if copied and copied == following[: len(copied)]:
            kept = segments[: len(segments) - m]
            return "\n".join(kept) + "\n" if kept else ""
    return fill


def _first_lines(text: str, at: int, n: int) -> list[str]:
    """The first ``n`` non-blank lines of ``text`` from ``at`` on (right-stripped), read no further."""
    out = []
    while len(out) < n and at < len(text):
        end = text.find("\n", at)
        end = len(text) if end < 0 else end
        if text[at:end].strip():
            out.append(text[at:end].rstrip())
        at = end + 1
    return out
