"""A cheap incremental lexer that tells whether a token may extend a fill's known left part.

During denoising the sampler asks, for the first still-masked slot of each hole, whether the
token proposed there may be committed given the hole's left context (from
``syntax.hole_context``) and the tokens already committed before it. This lexer answers from
characters alone, no parse: brackets, strings, comments, and for Python the offside rule.

A token is refused only when it makes an error that no later token can undo:
- a closing bracket that matches nothing, or not the innermost open bracket;
- a closing bracket that closes a bracket the text after the hole still needs (``foo(a, |)``);
- a newline inside a one-line string;
- in a hole inside a string (``HoleContext.string``): the string's closing delimiter (the text
  after the hole closes it), and the end of the fill anywhere else than inside it;
- Python: a line indented where no block opens, deeper after no ':', or dedented to no level;
  a first line at a width where no line parses (``HoleContext.first_indents``, infill/lang/python/shape.py);
- Python: a token that makes its logical line certainly wrong when the line was not before it
  (CPython's verdict on the line alone, infill/lang/python/pycompile.py): ``x = = 1`` at its second '=',
  ``if x == 1`` at its line break, ``print x``;
- the end of the fill (pad) inside a string or block comment, or with its own brackets open;
- Python, a header's head only (``HoleContext.head_only``): a line break, a comment, a ':' of its own, indentation past its widths, or a line whose first word starts no compound statement (none of ``head_words``);
- the end of a fill that ``closes`` (a retry's) with brackets open before the hole that the text after it leaves open;
- a token after which the window has fewer slots left than :meth:`Lexer.closers_needed` (one
  closing character per slot: a fill looping inside a dict is made to close it in time);
- Python: the end of the fill where the next line of the text after it would be indented
  wrongly (a body left behind with no ':' to open it, a ':' with no body, a dedent to no level,
  an ``else:`` or ``except:`` after a statement of its own level instead of a block).
Anything it cannot be sure of, it lets through; a full parse judges the draft afterwards.
It does not know tokens or tensors (infill/syntax/constraint.py maps those to text).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from infill.syntax.languages import LanguageSpec
from infill.lang.python.pycompile import line_broken
from infill.syntax.document import HoleContext

MEMO_SIZE = 65536  # remembered scans per lexer (one lexer per hole of a request)
_RUST_CHAR = re.compile(r"'(?:\\[^\n']{1,10}|[^\\'\n])'")


_HEADER_WORDS = ("if", "elif", "else", "for", "while", "try", "except", "finally", "with", "def", "class", "async", "match", "case")
_BARE_HEADERS = ("else", "try", "finally")  # headers that are their word alone before the ':'
_FIRST_WORD = re.compile(r"\w*")


def _not_a_header(line: str, words: tuple[str, ...] = _HEADER_WORDS) -> bool:
    """Python: can a logical line that starts so not be a block header (its first word is none
    of ``words``, compound statements' first words, nor the start of one; or it is one that takes
    nothing before its ':', with anything after it: ``else x``, ``try `` )?"""
    word = _FIRST_WORD.match(line).group(0)
    if len(word) < len(line):
        return word not in words or word in _BARE_HEADERS
    return not any(w.startswith(word) for w in words)


class LexState(NamedTuple):
    """A lexer state (a tuple: hashed fast, as the memo's key)."""

    stack: tuple[str, ...] = ()  # brackets the fill opened and has not closed
    popped: int = 0  # brackets of the left context the fill has closed
    kind: str = ""  # "" (code), "str", "line" (comment) or "block" (comment)
    delim: str = ""  # the closing delimiter of the string or block comment
    escape: bool = False
    tail: str = ""  # characters kept back until the next text shows what they start
    levels: tuple[int, ...] | None = None  # Python: indentation levels, the current last
    after_colon: bool = False
    at_line_start: bool = False
    indent: int = 0
    last_sig: str = ""
    cont: bool = False  # Python: a backslash continues the line
    started: bool = False  # Python: the fill's first logical line has begun
    line: str | None = None  # Python: the logical line so far, from its first significant character; None = unknown


class Lexer:
    """The lexer of one hole: its language's token rules and the hole's left context."""

    def __init__(self, spec: LanguageSpec, ctx: HoleContext):
        self.spec, self.ctx = spec, ctx
        self.pairs = spec.brackets
        self.closers = set(self.pairs.values())
        self.openers = {o for o in self.pairs if len(o) == 1}
        self.starters = {d[0] for d in (*spec.quotes, *spec.line_comment, *(a for a, _ in spec.block_comment))}
        if spec.char_literal == "rust":
            self.starters.add("'")
        self.lookahead = max([len(d) for d in (*spec.quotes, *spec.line_comment, *(a for a, _ in spec.block_comment))] + [1])
        if spec.char_literal == "rust":
            self.lookahead = max(self.lookahead, 4)
        self.check_lines = spec.name == "python"  # CPython judges the lines
        self._memo: dict[tuple[LexState, str, bool], tuple[LexState, bool]] = {}
        self.start = LexState(
            kind="str" if ctx.string else "",  # a hole in a string starts in it
            delim=ctx.string,
            levels=ctx.levels if spec.indent else None,
            after_colon=ctx.after_colon,
            at_line_start=ctx.at_line_start and spec.indent,
            indent=ctx.indent,
            last_sig=ctx.last_sig,
            line=("" if ctx.at_line_start else ctx.line_before) if self.check_lines else None,
        )

    # -- the scan ----------------------------------------------------------------------------

    def feed(self, st: LexState, text: str, final: bool = False) -> tuple[LexState, bool]:
        """Scan ``text`` after state ``st``; return the new state and whether it broke no rule.

        With ``final`` the text is taken to end there (nothing is kept back for lookahead).
        Memoized: denoising asks about the same drafts step after step.
        """
        key = (st, text, final)
        got = self._memo.get(key)
        if got is None:
            if len(self._memo) >= MEMO_SIZE:
                self._memo.clear()
            got = self._memo[key] = self._scan(st, text, final)
        return got

    def _scan(self, st: LexState, text: str, final: bool) -> tuple[LexState, bool]:
        spec, ctx, pairs = self.spec, self.ctx, self.pairs
        s = st.tail + text
        stack, popped, kind, delim, esc = list(st.stack), st.popped, st.kind, st.delim, st.escape
        levels = list(st.levels) if st.levels is not None else None
        after_colon, at_start, indent, last_sig, cont, started = st.after_colon, st.at_line_start, st.indent, st.last_sig, st.cont, st.started
        ok, i, n, tail = True, 0, len(s), ""
        base = len(ctx.base)
        # The logical line's text: st.line, then s from ``acc`` on (None: not collecting); the
        # text before ``known`` was there before this feed.
        line, known = st.line, len(st.line or "")
        acc = 0 if line is not None and not at_start else None
        while i < n:
            c = s[i]
            if kind == "str":
                if esc:
                    esc = False
                elif c == "\\" and delim not in spec.raw:
                    esc = True
                elif s.startswith(delim, i):
                    ok = ok and not ctx.string  # the string the hole is in is the text after it's to close
                    kind, i = "", i + len(delim)
                    continue
                elif not final and len(delim) > 1 and n - i < len(delim) and delim.startswith(s[i:]):
                    tail = s[i:]
                    break
                elif c == "\n" and delim not in spec.multiline:
                    ok, kind = False, ""  # an unterminated one-line string
                i += 1
                continue
            if kind == "block":
                if s.startswith(delim, i):
                    kind, i = "", i + len(delim)
                    continue
                if not final and n - i < len(delim) and delim.startswith(s[i:]):
                    tail = s[i:]
                    break
                i += 1
                continue
            if kind == "line":
                if c != "\n":
                    i += 1
                    continue
                kind = ""
            # code
            if not final and c in self.starters and n - i < self.lookahead:
                tail = s[i:]
                break
            depth = base - popped + len(stack)
            if c == "\n":
                if spec.indent:
                    if cont:
                        cont = False
                    elif depth == 0:
                        ok = ok and not ctx.head_only  # a header's head is one line (no blank one before it), ended by its ':'
                        if not at_start:
                            after_colon = last_sig == ":"
                            if line is not None and acc is not None:
                                ok = ok and not self._breaks(line + s[acc:i], known, ended=True)
                            line, known, acc = "", 0, None
                        at_start, indent = True, 0
                i += 1
                continue
            if at_start and c in " \t\f\r":
                indent = (indent // 8 + 1) * 8 if c == "\t" else indent + (c == " ")
                if ctx.head_only and ctx.first_indents and not started:  # a head is one line: no blank line ends this indentation
                    ok = ok and indent <= max(ctx.first_indents)
                i += 1
                continue
            comment = next((lc for lc in spec.line_comment if s.startswith(lc, i)), None)
            if comment:
                ok = ok and not ctx.head_only  # it would swallow the head's ':'
                kind, i = "line", i + len(comment)
                continue
            block = next(((a, b) for a, b in spec.block_comment if s.startswith(a, i)), None)
            if block:
                kind, delim, i = "block", block[1], i + len(block[0])
                continue
            if c in " \t\f\r":
                i += 1
                continue
            if at_start:  # the first significant character of a logical line: Python's offside rule
                at_start = False
                acc = i if line is not None else None
                if levels is not None:
                    if after_colon:
                        if indent > levels[-1]:
                            levels.append(indent)
                        else:
                            ok = False
                    elif indent > levels[-1]:
                        ok = False
                    elif indent < levels[-1]:
                        while len(levels) > 1 and levels[-1] > indent:
                            levels.pop()
                        ok = ok and levels[-1] == indent
                    if not started and ctx.first_indents is not None:
                        ok = ok and indent in ctx.first_indents
                after_colon, started = False, True
            if c == ":" and ctx.head_only and depth == 0 and not s.startswith(":=", i):
                ok = ok and i + 1 == n and not final  # the head's own ':' is the one after the hole
            cont = c == "\\"
            last_sig = c
            if spec.char_literal == "rust" and c == "'":
                m = _RUST_CHAR.match(s, i)
                i += len(m.group(0)) if m else 1  # else a lifetime
                continue
            quote = next((q for q in spec.quotes if s.startswith(q, i)), None)
            if quote:
                kind, delim, esc, i = "str", quote, False, i + len(quote)
                continue
            if c in self.openers:
                stack.append(c)
            elif c in self.closers:
                if stack:
                    ok = ok and pairs[stack.pop()] == c
                elif popped < base:
                    top = base - popped - 1
                    # Closing what the text after the hole still needs breaks that text.
                    ok = ok and pairs[ctx.base[top]] == c and top < base - ctx.needed
                    popped += 1
                else:
                    ok = False
            i += 1
        if line is not None and acc is not None:
            line += s[acc:i]
            ok = ok and (len(line) == known or not self._breaks(line, known, ended=False))
            ok = ok and not (ctx.head_only and _not_a_header(line, ctx.head_words or _HEADER_WORDS))
        new = LexState(
            tuple(stack), popped, kind, delim, esc, tail,
            tuple(levels) if levels is not None else None, after_colon, at_start, indent, last_sig, cont, started, line,
        )
        return new, ok

    def _breaks(self, line: str, known: int, ended: bool) -> bool:
        """Does the text from ``known`` on make the logical line ``line`` certainly wrong (it was
        not before)? Text that only goes on with a line already wrong is let through: the repair
        after the draft deals with that line."""
        return self.check_lines and line_broken(line, ended) and not (known and line_broken(line[:known], False))

    # -- questions ---------------------------------------------------------------------------

    def accepts(self, st: LexState, text: str) -> bool:
        """May ``text`` follow the known left part whose state is ``st``?"""
        return self.feed(st, text, final=True)[1]

    def closers_needed(self, st: LexState) -> int:
        """The fewest characters that still must follow the known left part before the fill may
        end: its open brackets' closers, a string's or block comment's end, and for a fill that
        ``closes``, the closers of the brackets before the hole it must close. Characters kept
        back for lookahead count as what they start if the text ended there (``'e`` opens a string)."""
        if st.tail:
            st = self.feed(st, "", final=True)[0]
        need = len(st.stack) + (st.kind == "block" or (st.kind == "str" and not self.ctx.string))
        return need + (max(self.ctx.unclosed - st.popped, 0) if self.ctx.closes else 0)

    def _closers(self, st: LexState) -> list[str]:
        """The closers of the brackets open after the state ``st``, innermost first: the fill's
        own, then those before the hole that the text after it leaves open (``unclosed``)."""
        base = self.ctx.base[len(self.ctx.base) - self.ctx.unclosed : len(self.ctx.base) - st.popped]
        return [self.pairs[b] for b in (*reversed(st.stack), *reversed(base))]

    def next_closer(self, st: LexState) -> str | None:
        """The character that must come next to close what is open after the state ``st``, if
        the fill is to end soon: a string's end (its first character), else its innermost bracket's
        closer, else (a fill that ``closes``) that of the innermost bracket before the hole still
        open; None when nothing is."""
        st = self.feed(st, "", final=True)[0] if st.tail else st
        if st.kind == "str" and self.ctx.string:
            return None  # the string the hole is in: the text after it closes that
        if st.kind in ("str", "block"):
            return st.delim[0]
        closers = self._closers(st)[: len(st.stack) + (1 if self.ctx.closes else 0)]
        return closers[0] if closers else None

    def due(self, st: LexState, ending: bool) -> list[str]:
        """What may come next after the state ``st`` when the model offers nothing the lexer
        takes: where the window is ``ending``, the closer of what is open (:meth:`next_closer`);
        at the start of a header's head alone, the words it may start with (``head_words``)."""
        closer = self.next_closer(st) if ending else None
        words = self.ctx.head_words if self.ctx.head_only and not st.started else ()
        return ([closer] if closer else []) + list(words)

    def owes_colon(self, st: LexState) -> bool:
        """Python: is the logical line so far a block header, its brackets closed, with no ':' yet
        (``def f(self)``: only the ':' ends it)?"""
        line = st.line
        if line is None or st.stack or st.kind or len(self.ctx.base) > st.popped or self.ctx.colon_rest:
            return False
        return _FIRST_WORD.match(line).group(0) in _HEADER_WORDS and not line.rstrip().endswith(":")

    def close(self, text: str) -> str | None:
        """``text`` (a fill) with the closers of what it leaves open appended: its own brackets,
        innermost first, then the brackets before the hole that the text after the hole leaves
        open (``unclosed``). A fill that ended its line gets them on a line of their own, lined
        up under its last line (one of PEP 8's two styles). None when there is nothing to close,
        or the fill ends inside a string or comment, or the text after the hole closes brackets
        of the fill's (``surplus``: which is not known)."""
        st = self.feed(self.start, text, final=True)[0]
        if st.kind or self.ctx.surplus:
            return None
        closers = "".join(self._closers(st))
        if not closers:
            return None
        if not text.endswith("\n"):
            return text + closers
        last = next((line for line in reversed(text.splitlines()) if line.strip()), "")
        return f"{text}{last[: len(last) - len(last.lstrip())]}{closers}\n"

    def can_end(self, st: LexState) -> bool:
        """May the fill end after the known left part whose state is ``st``?"""
        st, ok = self.feed(st, "", final=True)
        if not ok or st.kind == "block" or (st.kind == "str") != bool(self.ctx.string) or st.escape:
            return False  # in a string or comment of its own; out of the string it is in; before an escaped character
        if st.kind == "line" and self.ctx.next_char not in ("", "\n", "\r"):
            return False  # the comment would swallow the rest of the line
        if self.ctx.closes and st.popped < self.ctx.unclosed:
            return False
        return (not st.stack or self.ctx.surplus) and self._seam_ok(st) and not self._ends_broken(st)

    def _ends_broken(self, st: LexState) -> bool:
        """Python: would the fill's last logical line, ended where the hole's line ends (with the
        ':' of ``colon_rest``), be certainly wrong?"""
        ctx = self.ctx
        if st.line is None or st.at_line_start or st.stack or st.cont or len(ctx.base) > st.popped:
            return False
        if ctx.colon_rest:
            return self._breaks(st.line + ":", len(st.line), ended=True)
        return ctx.next_char in ("", "\n", "\r") and self._breaks(st.line, len(st.line), ended=True)

    def _seam_ok(self, st: LexState) -> bool:
        """Python: may the text after the hole's next line follow the fill, by the offside rule?"""
        ctx = self.ctx
        if st.levels is None or st.stack or st.cont or len(ctx.base) > st.popped:
            return True
        if ctx.colon_rest and (st.at_line_start or st.last_sig == ":"):
            return False  # the ':' after the hole would start a line, or follow another
        if st.at_line_start:  # the fill ended a line: the text after it starts the next one
            want, clause, opened = ctx.seam_here, ctx.clause_here, st.after_colon
        elif ctx.next_char in ("", "\n", "\r"):  # the fill's last line ends where the hole does
            want, clause, opened = ctx.seam_next, ctx.clause_next, st.last_sig == ":"
        elif ctx.colon_rest:  # the fill's last line is the head of a block header (``for x in y|:``)
            want, clause, opened = ctx.seam_next, ctx.clause_next, True
        else:
            return True  # the text after the hole goes on with the fill's line
        if want is None:
            return True
        if opened:
            return want > st.levels[-1] and not clause
        if clause:  # ``else:`` and the like continue a statement whose block the fill must end in
            return want < st.levels[-1] and want in st.levels
        return want <= st.levels[-1] and want in st.levels

