"""Context from other files: the parts of other documents that share the most names with the code
before a cursor, chosen as a model's extra context.

A completion model reads the text around the cursor; the names it needs (a helper defined in
another module, a field of a type declared in another file) are often only in other files. Here
each other document is cut into windows of whole lines, every window is scored by the Jaccard
similarity of its identifiers with those of the lines before the cursor's line (as editors'
"neighbouring tabs" context does), and the best windows are kept within a character budget.

Invariants:
- pure functions of their arguments: no files are read, no tokens counted, no grammar parsed;
- the query is the lines *before* the cursor's line, so typing within a line keeps the choice
  (and with it the model's cached context, which starts with the snippets) unchanged;
- a window that shares no identifier with the query is never chosen; the order of the result is
  deterministic (ties go to the earlier document and line), the best window last, nearest the
  code it serves;
- :func:`header` lays snippets out as text in front of a document: each under a line comment
  naming its path, or bare where the language has no line comment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

WINDOW_LINES = 24  # lines per candidate window of another document
STRIDE_LINES = 12  # windows overlap by half
QUERY_LINES = 30  # lines before the cursor's line that the windows are compared with
BUDGET_CHARS = 1600  # characters of windows chosen for one fill (the engine keeps what fits its token room)
MIN_NAME = 3  # identifiers shorter than this ("i", "x", "if") say little about relatedness
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Match:
    path: str
    text: str  # whole lines
    score: float  # Jaccard similarity with the query


def names(text: str) -> frozenset[str]:
    """The identifiers of ``text`` (at least MIN_NAME characters)."""
    return frozenset(m for m in _IDENT.findall(text) if len(m) >= MIN_NAME)


def query_text(text: str, cursor: int, lines: int = QUERY_LINES) -> str:
    """The ``lines`` whole lines before the line that holds ``cursor`` (a str offset)."""
    line_start = text.rfind("\n", 0, cursor) + 1
    start = line_start
    for _ in range(lines):
        if start == 0:
            break
        start = text.rfind("\n", 0, start - 1) + 1
    return text[start:line_start]


def windows(text: str, lines: int = WINDOW_LINES, stride: int = STRIDE_LINES) -> list[tuple[int, str]]:
    """(first line, text) of each window of ``lines`` whole lines, every ``stride`` lines."""
    rows = text.splitlines(keepends=True)
    if not rows:
        return []
    out = []
    for first in range(0, max(1, len(rows) - lines + stride), stride):
        chunk = "".join(rows[first : first + lines])
        if chunk.strip():
            out.append((first, chunk if chunk.endswith("\n") else chunk + "\n"))
    return out


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def select(query: str, documents: list[tuple[str, str]], budget_chars: int) -> list[Match]:
    """The windows of ``documents`` ((path, text) pairs) most like ``query``, at most
    ``budget_chars`` characters in all, no two overlapping in one document, the best last."""
    want = names(query)
    if not want or budget_chars <= 0:
        return []
    scored = []
    for d, (path, text) in enumerate(documents):
        for first, chunk in windows(text):
            s = jaccard(want, names(chunk))
            if s > 0:
                scored.append((-s, d, first, path, chunk))
    scored.sort(key=lambda x: x[:3])
    kept, used, taken = [], 0, {}
    for neg, d, first, path, chunk in scored:
        if used + len(chunk) > budget_chars:
            continue
        if any(abs(first - f) < WINDOW_LINES for f in taken.get(d, [])):
            continue
        taken.setdefault(d, []).append(first)
        kept.append(Match(path, chunk, -neg))
        used += len(chunk)
    return kept[::-1]


def header(snippets: list[tuple[str, str]], comment: str | None) -> str:
    """``snippets`` ((path, text) pairs) as text to stand before a document."""
    parts = []
    for path, text in snippets:
        if comment:
            parts.append(f"{comment} {path}\n")
        parts.append(text if text.endswith("\n") else text + "\n")
    return "".join(parts) + ("\n" if parts else "")


def choose(text: str, cursor: int, documents: list[tuple[str, str]], budget_chars: int = BUDGET_CHARS) -> list[tuple[str, str]]:
    """(path, text) of the windows of ``documents`` to read before a fill at ``cursor`` in ``text``."""
    return [(m.path, m.text) for m in select(query_text(text, cursor), documents, budget_chars)]

