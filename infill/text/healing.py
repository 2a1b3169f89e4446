"""Token healing: whether a left-to-right fill should write its context's last token again.

Running text writes a space with the word after it (" return") and a line break with the next
line's indentation, so a context that ends at a bare space or line break is a boundary a causal
model has seldom seen (after "def " it ends the fill; after a line break it writes a blank line);
a word cut short at the hole ends in a token that running text seldom ends a word with
("_negativ" goes on with "_option" where "e_number" was meant); and an operator cut short is one
the tokenizer seldom ends there ("detail:" goes on with "detail::" where ":param" was meant).
Such a token is taken out of the context and the fill's first token must start with its bytes
(the engine's ``Engine.heal``); the window adapter's training cuts its examples the same way.
A word the tokenizer split over several tokens is taken back whole, as far back as
some token of the vocabulary starts with its bytes (" el" + "s" goes back to " els", which
" else" starts with): a context ending in the word's first pieces reads as another word.

Pure functions of tokens' bytes, the character after the hole and the vocabulary.
"""

from __future__ import annotations

import bisect
import re
from typing import Callable, Sequence

WORD = re.compile(rb"[A-Za-z0-9_]+")  # a word's bytes, as token healing takes them back
OPERATOR = re.compile(rb"[-:=<>!&|+*/%^?]+")  # an operator's bytes, which a hole may cut ("::", "=>", "->")


def heals(last: bytes, after: str = "") -> bool:
    """Whether a context ending in the token ``last`` (its bytes) is healed: whitespace, or a word
    or an operator cut at the hole (its ASCII letters, digits and underscores, or its operator
    characters, with the space before them where the token has it) that ``after``, the character
    after the hole, does not go on."""
    if not last:
        return False
    if not last.strip():
        return True
    word = last[1:] if last.startswith(b" ") else last
    if word and WORD.fullmatch(word) and not (after and (after.isalnum() or after == "_")):
        return True
    return bool(word and OPERATOR.fullmatch(word) and not (after and OPERATOR.fullmatch(after.encode())))


MOST = 4  # the most tokens of one cut word taken back


def heal_count(tail: Sequence[bytes], after: str, extends: Callable[[bytes], bool]) -> int:
    """How many of a context's last tokens (``tail``, their bytes, the last last) a fill writes
    again: none where the last is not healed (:func:`heals`); else the last, and where it is a
    word's, the tokens before it that make one word with it (no space inside it, at most
    :data:`MOST`), as far back as ``extends`` (some token starts with those bytes) holds. An
    operator is taken back alone: the tokens that start with a long one are runs of it (`` ===``
    goes on as a ``=====`` rule)."""
    if not tail or not heals(tail[-1], after):
        return 0
    word = tail[-1]
    if not WORD.fullmatch(word.removeprefix(b" ")):
        return 1
    n = 1
    while n < min(MOST, len(tail)) and not word.startswith(b" "):
        joined = tail[-n - 1] + word
        if not WORD.fullmatch(joined.removeprefix(b" ")) or not extends(joined):
            break
        word, n = joined, n + 1
    return n


def heal_tokens(tokens: Sequence[int], token_bytes: Callable[[int], bytes], after: str,
                vocab: Sequence[tuple[bytes, int]]) -> int:
    """:func:`heal_count` of a context's ``tokens`` (ids, read by ``token_bytes``), a word taken
    back as far as some token of ``vocab`` (:func:`vocabulary`) starts with it."""
    return heal_count([token_bytes(t) for t in tokens[-MOST:]], after, lambda head: starts_some(vocab, head))


def vocabulary(tokenizer) -> list[tuple[bytes, int]]:
    """Every token's (bytes, id) of ``tokenizer``, sorted by bytes (:func:`starts_some`)."""
    return sorted((tokenizer.token_bytes(i), i) for i in range(tokenizer.vocab_size))


def starts_some(vocab: Sequence[tuple[bytes, int]], head: bytes) -> bool:
    """Does some token of ``vocab`` (every token's (bytes, id), sorted by bytes) start with ``head``?"""
    at = bisect.bisect_left(vocab, (head,))
    return at < len(vocab) and vocab[at][0].startswith(head)
