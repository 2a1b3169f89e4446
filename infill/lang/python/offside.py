"""Python's line and block rules for the steering lexer (infill/syntax/steering.py): the offside rule.

The general lexer reads brackets, strings and comments; through the language hooks
(``PythonHooks.line_rules``) it tells :class:`OffsideRules` of every newline, line-start
whitespace, comment and significant character in code, and asks it whether a fill may end.
Beyond the general rules, a token is refused where:

- a line is indented where no block opens, deeper after no ':', or dedented to no level;
  a first line at a width where no line parses (``OffsideContext.first_indents``, infill/lang/python/shape.py);
- it makes its logical line certainly wrong when the line was not before it (CPython's verdict
  on the line alone, infill/lang/python/pycompile.py): ``x = = 1`` at its second '=', ``if x == 1``
  at its line break, ``print x``;
- a header's head only (``OffsideContext.head_only``): a line break, a comment, a ':' of its own,
  indentation past its widths, or a line whose first word starts no compound statement (none of ``head_words``);
- the end of the fill where the next line of the text after it would be indented wrongly (a body
  left behind with no ':' to open it, a ':' with no body, a dedent to no level, an ``else:`` or
  ``except:`` after a statement of its own level instead of a block), or where the fill's last
  line, ended there, is certainly wrong;
- the end of the fill after a decorator line, where the text after it does not go on with the
  definition that decorator belongs to (``decorates_here``, ``decorates_next``): it would
  decorate the next definition, code the fill was not asked to change (and where the hole starts
  a line after a decorator's, ``after_decorator``, the fill must write that decorator's definition).
  The judge asks this rule too (``ends_wrong``): a parse cannot tell.

:class:`OffsideContext` is the Python part of a hole's context (``HoleContext.lang``);
:class:`Offside` the Python part of a lexer state (``LexState.lang``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

from infill.lang.python.pycompile import line_broken

HEADER_WORDS = ("if", "elif", "else", "for", "while", "try", "except", "finally", "with", "def", "class", "async", "match", "case")
_BARE_HEADERS = ("else", "try", "finally")  # headers that are their word alone before the ':'
_FIRST_WORD = re.compile(r"\w*")


def _not_a_header(line: str, words: tuple[str, ...] = HEADER_WORDS) -> bool:
    """Can a logical line that starts so not be a block header (its first word is none of
    ``words``, compound statements' first words, nor the start of one; or it is one that takes
    nothing before its ':', with anything after it: ``else x``, ``try `` )?"""
    word = _FIRST_WORD.match(line).group(0)
    if len(word) < len(line):
        return word not in words or word in _BARE_HEADERS
    return not any(w.startswith(word) for w in words)


@dataclass(frozen=True)
class OffsideContext:
    """Python's part of the syntactic situation at a hole's start (``HoleContext.lang``)."""

    levels: tuple[int, ...] | None = None  # indentation levels, current last; None = unknown
    after_colon: bool = False  # the last logical line ended with ':'
    last_sig: str = ""  # the last significant character before the hole on its logical line
    # The indentation of the first significant line of the text after the hole, read as if that
    # text started a line (``seam_here``) and from its first line break on (``seam_next``).
    seam_here: int | None = None
    seam_next: int | None = None
    # ... and whether that line continues a compound statement (elif, else, except, finally).
    clause_here: bool = False
    clause_next: bool = False
    # ... and whether that line is a definition's first (``def``, ``class``, a decorator) with no
    # blank line before it: only then may a fill end with a decorator line.
    decorates_here: bool = False
    decorates_next: bool = False
    after_decorator: bool = False  # the hole starts a line after a decorator's: the fill must write its definition
    colon_rest: bool = False  # the rest of the hole's line after it is a block's ':'
    first_indents: tuple[int, ...] | None = None  # the widths the fill's first line may have (infill/lang/python/shape.py)
    # The hole's logical line before it, from its first significant character ("" when the hole
    # starts the line); None where that is not known (inside brackets, after a '\').
    line_before: str | None = None
    # The fill is only the head of the block header whose ':' follows the hole (one logical
    # line, no ':' of its own); set for a retry of a fill that found no valid header.
    head_only: bool = False
    head_words: tuple[str, ...] = ()  # with head_only: the words the head may start with (none: any header's)


class Offside(NamedTuple):
    """Python's part of a lexer state (``LexState.lang``)."""

    levels: tuple[int, ...] | None = None  # indentation levels, the current last
    after_colon: bool = False
    at_line_start: bool = False
    indent: int = 0
    last_sig: str = ""
    cont: bool = False  # a backslash continues the line
    started: bool = False  # the fill's first logical line has begun
    line: str | None = None  # the logical line so far, from its first significant character; None = unknown
    decorator: bool = False  # the fill's current (or last ended) logical line is a decorator


class OffsideRules:
    """The offside rule and CPython's line checks for one hole (see the module's docstring).

    ``ctx``: the hole's whole context (its ``lang`` an :class:`OffsideContext`); ``closers``: the
    language's closing brackets."""

    def __init__(self, ctx, closers: set[str]):
        self.ctx, self.lc, self.closers = ctx, ctx.lang if ctx.lang is not None else OffsideContext(), closers

    def start(self) -> Offside:
        ctx, lc = self.ctx, self.lc
        return Offside(levels=lc.levels, after_colon=lc.after_colon, at_line_start=ctx.at_line_start, indent=ctx.indent,
                       last_sig=lc.last_sig, line="" if ctx.at_line_start else lc.line_before,
                       decorator=lc.after_decorator and ctx.at_line_start)

    def begin(self, state: Offside, text: str) -> "_Scan":
        return _Scan(self, state, text)

    def breaks(self, line: str, known: int, ended: bool) -> bool:
        """Does the text from ``known`` on make the logical line ``line`` certainly wrong (it was
        not before)? Text that only goes on with a line already wrong is let through: the repair
        after the draft deals with that line."""
        return line_broken(line, ended) and not (known and line_broken(line[:known], False))

    # -- questions ---------------------------------------------------------------------------

    def can_end(self, st) -> bool:
        return self._seam_ok(st) and not self._ends_broken(st) and not self.ends_wrong(st)

    def ends_wrong(self, st) -> bool:
        """Would the fill end with a decorator line whose definition the text after the hole does
        not begin right there (a blank line between, or no definition at all)?"""
        o, ctx, lc = st.lang, self.ctx, self.lc
        if not o.decorator or st.stack or o.cont:
            return False
        if o.at_line_start:  # the fill ended a line: the text after it starts the next one
            return not lc.decorates_here
        return ctx.next_char in ("", "\n", "\r") and not lc.decorates_next

    def owes(self, st) -> list[str]:
        """A block header's ':' where the logical line so far is one, its brackets closed, with
        no ':' yet (``def f(self)``: only the ':' ends it)."""
        o, ctx = st.lang, self.ctx
        line = o.line
        if line is None or st.stack or st.kind or len(ctx.base) > st.popped or self.lc.colon_rest:
            return []
        return [":"] if _FIRST_WORD.match(line).group(0) in HEADER_WORDS and not line.rstrip().endswith(":") else []

    def due(self, st) -> list[str]:
        """At the start of a header's head alone, the words it may start with (``head_words``)."""
        return list(self.lc.head_words) if self.lc.head_only and not st.lang.started else []

    def head_end(self, text: str) -> str | None:
        """A header's head alone (``head_only``), where the model proposes the ':' after it
        (``if x|`` with ':'): the text before that ':' (the closers of '):'), "" for none."""
        if self.ctx.next_char != ":" or not self.lc.head_only:
            return None
        at = text.find(":")
        if at < 0 or text.startswith(":=", at) or text[:at].strip(" " + "".join(self.closers)):
            return None
        return text[:at]

    def ends_short(self) -> bool:
        return self.lc.head_only

    def _ends_broken(self, st) -> bool:
        """Would the fill's last logical line, ended where the hole's line ends (with the ':' of
        ``colon_rest``), be certainly wrong?"""
        o, ctx = st.lang, self.ctx
        if o.line is None or o.at_line_start or st.stack or o.cont or len(ctx.base) > st.popped:
            return False
        if self.lc.colon_rest:
            return self.breaks(o.line + ":", len(o.line), ended=True)
        return ctx.next_char in ("", "\n", "\r") and self.breaks(o.line, len(o.line), ended=True)

    def _seam_ok(self, st) -> bool:
        """May the text after the hole's next line follow the fill, by the offside rule?"""
        o, ctx, lc = st.lang, self.ctx, self.lc
        if o.levels is None or st.stack or o.cont or len(ctx.base) > st.popped:
            return True
        if lc.colon_rest and (o.at_line_start or o.last_sig == ":"):
            return False  # the ':' after the hole would start a line, or follow another
        if o.at_line_start:  # the fill ended a line: the text after it starts the next one
            want, clause, opened = lc.seam_here, lc.clause_here, o.after_colon
        elif ctx.next_char in ("", "\n", "\r"):  # the fill's last line ends where the hole does
            want, clause, opened = lc.seam_next, lc.clause_next, o.last_sig == ":"
        elif lc.colon_rest:  # the fill's last line is the head of a block header (``for x in y|:``)
            want, clause, opened = lc.seam_next, lc.clause_next, True
        else:
            return True  # the text after the hole goes on with the fill's line
        if want is None:
            return True
        if opened:
            return want > o.levels[-1] and not clause
        if clause:  # ``else:`` and the like continue a statement whose block the fill must end in
            return want < o.levels[-1] and want in o.levels
        return want <= o.levels[-1] and want in o.levels


class _Scan:
    """One scan's offside state, changed as the general lexer walks the text ``s``.

    The logical line's text is ``line``, then ``s`` from ``acc`` on (None: not collecting); the
    text before ``known`` was there before this scan."""

    __slots__ = ("rules", "lc", "s", "ok", "levels", "after_colon", "at_line_start", "indent", "last_sig", "cont",
                 "started", "line", "known", "acc", "decorator")

    def __init__(self, rules: OffsideRules, st: Offside, s: str):
        self.rules, self.lc, self.s, self.ok = rules, rules.lc, s, True
        self.levels = list(st.levels) if st.levels is not None else None
        self.after_colon, self.at_line_start, self.indent = st.after_colon, st.at_line_start, st.indent
        self.last_sig, self.cont, self.started = st.last_sig, st.cont, st.started
        self.line, self.known = st.line, len(st.line or "")
        self.acc = 0 if st.line is not None and not st.at_line_start else None
        self.decorator = st.decorator

    def newline(self, i: int, depth: int) -> bool:
        """A line break in code at ``s[i]``, inside ``depth`` brackets. Each event returns
        whether the scan still broke no rule (the lexer's ``ok`` follows it at once)."""
        if self.cont:
            self.cont = False
        elif depth == 0:
            self.ok = self.ok and not self.lc.head_only  # a header's head is one line (no blank one before it), ended by its ':'
            if not self.at_line_start:
                self.after_colon = self.last_sig == ":"
                if self.line is not None and self.acc is not None:
                    self.ok = self.ok and not self.rules.breaks(self.line + self.s[self.acc : i], self.known, ended=True)
                self.line, self.known, self.acc = "", 0, None
            self.at_line_start, self.indent = True, 0
        return self.ok

    def space(self, c: str) -> bool:
        """Whitespace ``c`` of a line's indentation."""
        self.indent = (self.indent // 8 + 1) * 8 if c == "\t" else self.indent + (c == " ")
        lc = self.lc
        if lc.head_only and lc.first_indents and not self.started:  # a head is one line: no blank line ends this indentation
            self.ok = self.ok and self.indent <= max(lc.first_indents)
        return self.ok

    def comment(self) -> bool:
        self.ok = self.ok and not self.lc.head_only  # it would swallow the head's ':'
        return self.ok

    def code(self, c: str, i: int, depth: int, final: bool) -> bool:
        """A significant character ``c`` at ``s[i]`` (not in a string or comment), inside ``depth`` brackets."""
        lc = self.lc
        if self.at_line_start:  # the first significant character of a logical line: the offside rule
            self.at_line_start = False
            self.acc = i if self.line is not None else None
            levels, indent = self.levels, self.indent
            if levels is not None:
                if self.after_colon:
                    if indent > levels[-1]:
                        levels.append(indent)
                    else:
                        self.ok = False
                elif indent > levels[-1]:
                    self.ok = False
                elif indent < levels[-1]:
                    while len(levels) > 1 and levels[-1] > indent:
                        levels.pop()
                    self.ok = self.ok and levels[-1] == indent
                if not self.started and lc.first_indents is not None:
                    self.ok = self.ok and indent in lc.first_indents
            self.after_colon, self.started, self.decorator = False, True, c == "@"
        if c == ":" and lc.head_only and depth == 0 and not self.s.startswith(":=", i):
            self.ok = self.ok and i + 1 == len(self.s) and not final  # the head's own ':' is the one after the hole
        self.cont = c == "\\"
        self.last_sig = c
        return self.ok

    def end(self, i: int) -> tuple[Offside, bool]:
        """The state after the scan, which stopped at ``s[i]``, and whether it broke no rule."""
        line, ok = self.line, self.ok
        if line is not None and self.acc is not None:
            line += self.s[self.acc : i]
            ok = ok and (len(line) == self.known or not self.rules.breaks(line, self.known, ended=False))
            ok = ok and not (self.lc.head_only and _not_a_header(line, self.lc.head_words or HEADER_WORDS))
        levels = tuple(self.levels) if self.levels is not None else None
        return Offside(levels, self.after_colon, self.at_line_start, self.indent, self.last_sig, self.cont, self.started, line,
                       self.decorator), ok
