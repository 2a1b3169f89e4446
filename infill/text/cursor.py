"""What is around a cursor in a text: pure functions on ``str`` (code-point offsets), shared by
the language server and the benchmarks. No I/O, no model, no server."""

from __future__ import annotations


def word_before(text: str, offset: int) -> str:
    """The identifier characters just before ``offset`` (what a completion menu filters on)."""
    at = offset
    while at > 0 and (text[at - 1].isalnum() or text[at - 1] == "_"):
        at -= 1
    return text[at:offset]
