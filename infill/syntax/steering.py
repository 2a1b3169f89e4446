"""A cheap incremental lexer that tells whether a token may extend a fill's known left part.

During denoising the sampler asks, for the first still-masked slot of each hole, whether the
token proposed there may be committed given the hole's left context (from
``syntax.hole_context``) and the tokens already committed before it. This lexer answers from
characters alone, no parse: brackets, strings and comments from the language's table, and
through its hooks (infill/syntax/hooks.py, ``LanguageHooks.line_rules``) the language's own line
and block rules (Python's offside rule and line checks: infill/lang/python/offside.py).

A token is refused only when it makes an error that no later token can undo:
- a closing bracket that matches nothing, or not the innermost open bracket;
- a closing bracket that closes a bracket the text after the hole still needs (``foo(a, |)``);
- a newline inside a one-line string;
- in a hole inside a string (``HoleContext.string``): the string's closing delimiter (the text
  after the hole closes it), and the end of the fill anywhere else than inside it; in a string
  that the hole's line leaves open (``HoleContext.open_string``: one being typed), the end of the
  fill before it closes that string;
- the end of the fill (pad) inside a string or block comment, or with its own brackets open;
- the end of a fill that ``closes`` (a retry's) with brackets open before the hole that the text after it leaves open,
  and in any round, with one open that the layout says is due (``HoleContext.due``: a table's row cut
  short, the next row at its indentation);
- the end of a fill that ``mends`` (a mend branch's), or its first line break, before the brackets open after it are
  exactly those the closers the text after it has that nothing there opens close (``HoleContext.after``);
- a token after which the window has fewer slots left than :meth:`Lexer.closers_needed` (one
  closing character per slot: a fill looping inside a dict is made to close it in time; a due
  bracket's closer, and one slot for what ends its row or statement after it);
- whatever the language's line rules refuse (a line indented where no block opens, a line
  certainly wrong, the end of the fill where the text after it cannot follow).
Anything it cannot be sure of, it lets through; a full parse judges the draft afterwards.
It does not know tokens or tensors (infill/syntax/constraint.py maps those to text).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from infill.syntax.document import HoleContext
from infill.syntax.hooks import hooks_for
from infill.syntax.languages import CLOSED_CHAR, LanguageSpec

MEMO_SIZE = 65536  # remembered scans per lexer (one lexer per hole of a request)


class LexState(NamedTuple):
    """A lexer state (a tuple: hashed fast, as the memo's key)."""

    stack: tuple[str, ...] = ()  # brackets the fill opened and has not closed
    popped: int = 0  # brackets of the left context the fill has closed
    kind: str = ""  # "" (code), "str", "line" (comment) or "block" (comment)
    delim: str = ""  # the closing delimiter of the string or block comment
    escape: bool = False
    tail: str = ""  # characters kept back until the next text shows what they start
    lang: Any = None  # the language's line rules' state (hashable; None where it has none)


class Lexer:
    """The lexer of one hole: its language's token rules and the hole's left context.

    ``rules``: the language's line and block rules (``LanguageHooks.line_rules``; None: none),
    told of every newline, line-start whitespace, comment and significant character in code."""

    def __init__(self, spec: LanguageSpec, ctx: HoleContext):
        self.spec, self.ctx = spec, ctx
        self.pairs = spec.brackets
        self.closers = set(self.pairs.values())
        self.openers = {o for o in self.pairs if len(o) == 1}
        self.starters = {d[0] for d in (*spec.quotes, *spec.line_comment, *(a for a, _ in spec.block_comment))}
        if spec.char_literal == "closed":
            self.starters.add("'")
        self.lookahead = max([len(d) for d in (*spec.quotes, *spec.line_comment, *(a for a, _ in spec.block_comment))] + [1])
        if spec.char_literal == "closed":
            self.lookahead = max(self.lookahead, 4)
        self.rules = hooks_for(spec).line_rules(ctx, self.closers)
        self._memo: dict[tuple[LexState, str, bool], tuple[LexState, bool]] = {}
        self.start = LexState(
            kind="str" if ctx.string or ctx.open_string else "",  # a hole in a string starts in it
            delim=ctx.string or ctx.open_string,
            lang=self.rules.start() if self.rules is not None else None,
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
        """The scan behind :meth:`feed`. Once a rule is broken (the line rules' included, as soon
        as they say so) closing brackets no longer pop the fill's own: the state after a text
        that is refused is only an estimate, and it stays as it always was."""
        spec, ctx, pairs = self.spec, self.ctx, self.pairs
        s = st.tail + text
        stack, popped, kind, delim, esc = list(st.stack), st.popped, st.kind, st.delim, st.escape
        ok, i, n, tail = True, 0, len(s), ""
        base = len(ctx.base)
        lines = self.rules.begin(st.lang, s) if self.rules is not None else None
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
                if lines is not None:
                    ok = lines.newline(i, depth) and ok
                i += 1
                continue
            if lines is not None and lines.at_line_start and c in " \t\f\r":
                ok = lines.space(c) and ok
                i += 1
                continue
            comment = next((lc for lc in spec.line_comment if s.startswith(lc, i)), None)
            if comment:
                if lines is not None:
                    ok = lines.comment() and ok
                kind, i = "line", i + len(comment)
                continue
            block = next(((a, b) for a, b in spec.block_comment if s.startswith(a, i)), None)
            if block:
                kind, delim, i = "block", block[1], i + len(block[0])
                continue
            if c in " \t\f\r":
                i += 1
                continue
            if lines is not None:
                ok = lines.code(c, i, depth, final) and ok
            if spec.char_literal == "closed" and c == "'":
                m = CLOSED_CHAR.match(s, i)
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
                    # Closing what the text after the hole still needs breaks that text (a fill that
                    # mends reads that text's closers otherwise: Lexer.mended); the innermost that
                    # it leaves open (``unclosed``) are the fill's to close.
                    theirs = base - ctx.unclosed - ctx.needed <= top < base - ctx.unclosed
                    ok = ok and pairs[ctx.base[top]] == c and (ctx.mends or not theirs)
                    popped += 1
                else:
                    ok = False
            i += 1
        lang = None
        if lines is not None:
            lang, lines_ok = lines.end(i)
            ok = ok and lines_ok
        return LexState(tuple(stack), popped, kind, delim, esc, tail, lang), ok

    # -- questions ---------------------------------------------------------------------------

    def accepts(self, st: LexState, text: str) -> bool:
        """May ``text`` follow the known left part whose state is ``st``?"""
        return self.feed(st, text, final=True)[1]

    def closers_needed(self, st: LexState) -> int:
        """The fewest characters that still must follow the known left part before the fill may
        end: its open brackets' closers, a string's or block comment's end, and the closers of
        the brackets before the hole it must close (:meth:`_must_close`). Characters kept
        back for lookahead count as what they start if the text ended there (``'e`` opens a string)."""
        if st.tail:
            st = self.feed(st, "", final=True)[0]
        # A fill that mends closes what its plan says (the brackets due among them); another, its
        # own and those before the hole it must close, and after a bracket due, one character more
        # (what ends the row or statement it closes: a table's ``},``, a declaration's ``};``).
        if self.ctx.mends:
            brackets = self._to_mend(st) + (max(self.ctx.unclosed - st.popped, 0) if self.ctx.closes else 0)
        else:
            brackets = len(st.stack) + max(self._must_close() - st.popped, 0) + (st.popped < self.ctx.due)
        return brackets + (st.kind == "block" or (st.kind == "str" and not self.ctx.string))

    def _must_close(self) -> int:
        """How many of the brackets open before the hole the fill must close before it ends: those
        the layout says are due in any round, and for a fill that ``closes``, all it leaves open."""
        return max(self.ctx.due, self.ctx.unclosed if self.ctx.closes else 0)

    def _to_mend(self, st: LexState) -> int:
        """The fewest brackets a fill that ``mends`` must still close or open after the state
        ``st`` (:meth:`_mend_plan`); where none can, its own open brackets' count."""
        plan = self._mend_plan(st)
        return sum(plan) if plan is not None else len(st.stack)

    def _mend_plan(self, st: LexState) -> tuple[int, int] | None:
        """(k, m): a fill that ``mends`` closes the k innermost brackets open after the state
        ``st`` (its own, then those before the hole), then opens m, so that the brackets open after
        it are exactly those that the closers the text after the hole has and nothing there opens
        close, innermost first (``HoleContext.after``): the fewest k + m; None where none can."""
        after, open_ = self.ctx.after, self._open(st)
        for k in range(len(open_) + 1):
            kept = open_[: len(open_) - k]
            m = len(after) - len(kept)  # openers to add: they take the first closers
            if m >= 0 and all(self.pairs[o] == c for o, c in zip(reversed(kept), after[m:])):
                return k, m
        return None

    def _open(self, st: LexState) -> tuple[str, ...]:
        """The brackets open after the state ``st``, outermost first: those before the hole that
        the fill has not closed, then its own."""
        return self.ctx.base[: len(self.ctx.base) - st.popped] + st.stack

    def may_break(self, st: LexState, text: str) -> bool:
        """May the fill break its line after ``text`` follows the state ``st``? Not a fill that
        ``mends`` before it has (:meth:`mended`): the opener it must write ends its first line."""
        return not self.ctx.mends or self.mended(self.feed(st, text)[0])

    def empties_owed(self, st: LexState, text: str) -> bool:
        """Does ``text``, after the state ``st`` of a fill that ``mends``, write an empty pair of the
        opener that the fill must open next (``{}`` where it owes ``{``: Go's ``struct{}``, one
        token)? The owed opener then comes after it, out of place (``struct{} {``)."""
        plan = self._mend_plan(st) if self.ctx.mends else None
        opener = self._owed_opener(plan) if plan and not plan[0] else None
        return bool(opener) and opener + self.pairs[opener] in text

    def _owed_opener(self, plan: tuple[int, int]) -> str | None:
        """The outermost opener that a mend plan (k, m) still has the fill write (None for none)."""
        return self.spec.openers.get(self.ctx.after[plan[1] - 1]) if plan[1] else None

    def mend_next(self, st: LexState) -> list[str]:
        """For a fill that ``mends`` and may not end yet after the state ``st``, the bracket to
        write next (with a space first, then without): the innermost of its own to close, else
        the outermost opener still missing; [] for none."""
        plan = self._mend_plan(st) if self.ctx.mends else None
        if not plan or not sum(plan):
            return []
        if plan[0]:
            return [self.pairs[self._open(st)[-1]]]
        opener = self._owed_opener(plan)
        return [f" {opener}", opener] if opener else []

    def mended(self, st: LexState) -> bool:
        """Are the brackets open after the state ``st`` exactly those that the closers the text
        after the hole has and nothing there opens close (``HoleContext.after``)?"""
        return self._mend_plan(st) == (0, 0)

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
        closers = self._closers(st)[: len(st.stack) + (1 if st.popped < self._must_close() or self.ctx.closes else 0)]
        return closers[0] if closers else None

    def due(self, st: LexState, ending: bool) -> list[str]:
        """What may come next after the state ``st`` when the model offers nothing the lexer
        takes: where the window is ``ending``, the closer of what is open (:meth:`next_closer`);
        then what the line rules say may (the words a header's head alone may start with)."""
        closer = self.next_closer(st) if ending else None
        words = self.rules.due(st) if self.rules is not None else []
        return ([closer] if closer else []) + words

    def owes(self, st: LexState) -> list[str]:
        """What must come next after the state ``st`` where the model ranks nothing allowed: what
        the line rules say (Python: a block header's ':', ``def f(self)``), and for a fill that
        ``mends``, its next bracket (:meth:`mend_next`); [] for nothing."""
        return (self.rules.owes(st) if self.rules is not None else []) + self.mend_next(st)

    def head_end(self, text: str) -> str | None:
        """Where the model's refused proposal ``text`` is the text after the hole by the line rules
        (a header's ':'), the part of it before that ("": the fill ends there); None where it is not."""
        return self.rules.head_end(text) if self.rules is not None else None

    def ends_short(self) -> bool:
        """May a fill that nothing the model ranks may continue end where it may (the line rules'
        header's head alone)?"""
        return self.rules is not None and self.rules.ends_short()

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

    def ends_wrong(self, text: str) -> bool:
        """Does ``text``, a whole fill, end where the language's line rules never let a fill end,
        though it parses (LineRules.ends_wrong)?"""
        return self.rules is not None and self.rules.ends_wrong(self.feed(self.start, text, final=True)[0])

    def leaves_due(self, text: str) -> bool:
        """Does ``text``, a whole fill, leave open a bracket before the hole that the layout says
        the fill must close (``HoleContext.due``)?"""
        return bool(self.ctx.due) and self.feed(self.start, text, final=True)[0].popped < self.ctx.due

    def can_end(self, st: LexState) -> bool:
        """May the fill end after the known left part whose state is ``st``?"""
        st, ok = self.feed(st, "", final=True)
        if not ok or st.kind == "block" or (st.kind == "str") != bool(self.ctx.string) or st.escape:
            return False  # in a string or comment of its own; out of the string it is in; before an escaped character
        if st.kind == "line" and self.ctx.next_char not in ("", "\n", "\r"):
            return False  # the comment would swallow the rest of the line
        if st.popped < self._must_close():
            return False
        brackets = self.mended(st) if self.ctx.mends else (not st.stack or self.ctx.surplus)
        return brackets and (self.rules is None or self.rules.can_end(st))
