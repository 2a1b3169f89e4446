"""Token healing: whether a left-to-right fill should write its context's last token again.

Running text writes a space with the word after it (" return") and a line break with the next
line's indentation, so a context that ends at a bare space or line break is a boundary a causal
model has seldom seen (after "def " it ends the fill; after a line break it writes a blank line);
a word cut short at the hole ends in a token that running text seldom ends a word with
("_negativ" goes on with "_option" where "e_number" was meant); and an operator cut short is one
the tokenizer seldom ends there ("detail:" goes on with "detail::" where ":param" was meant).
Such a token is taken out of the context and the fill's first token must start with its bytes
(the engine's ``Engine.heal``); the window adapter's training cuts its examples the same way.

A pure function of a token's bytes and the character after the hole.
"""

from __future__ import annotations

import re

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
