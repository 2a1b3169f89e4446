"""Tree-sitter judgements on a document with holes: new errors, bracket context, truncation.

- :class:`Document` parses a request's text once and judges fills: prefix + fills + suffix must
  have no ERROR or MISSING node that the document did not already have, within the top-level
  statements around the holes (:func:`judged_region`), or a smaller region that the language's
  hooks name (``LanguageHooks.nested_region``: Python's method of a top-level class that holds
  them); where the hooks have a compiler check (Python's: infill/lang/python/pycompile.py), it
  must accept that region too. Errors of the original that touch a hole, or
  that only whitespace parts from one, are the fill's business (a half-typed line is what a
  completion finishes; an unclosed bracket before a hole at the end of a file, the fill closes);
  errors elsewhere are the baseline, matched by position through the edit. Where the original's
  error at a hole swallows the document's others (a cut file's stray first line and a half-typed
  string at the cursor make one ERROR of it all), the errors that the region has with the holes'
  lines taken out are the baseline too, where something other than whitespace parts them from
  every fill (``Document._lines_out``). A document broken
  away from its holes is judged whole where no compiler judges (its top-level nodes may not be
  the text's: a stray '}' ends a class early), and a fill that leaves no error at all there
  mends it (``Document.errors``: a hole cut where a block's opening line stood); so is one whose
  tree's root is an ERROR (its children are fragments, not top-level statements). Fills are
  parsed incrementally from the original tree.
- :func:`hole_context` tells the steering lexer (infill/syntax/steering.py) what is open at a hole's
  start: brackets, strings or comments, what the layout says the fill must close (``due``: a
  table's row cut short), and what the language's hooks add (``HoleContext.lang``: Python's
  indentation levels).
- :func:`truncate_completion` cuts a cursor completion where its syntactic unit ends.

Everything works in UTF-8 bytes (tree-sitter's unit); str offsets go through infill/text/textpos.py.
Nothing here knows about tokens, tensors or the sampler.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from infill.syntax.hooks import hooks_for
from infill.syntax.languages import CLOSED_CHAR, Grammar, LanguageSpec, grammar as lookup_grammar
from infill.text.textpos import blank_around, byte_to_point, byte_to_str, indent_width, line_end, line_start, str_to_byte


@dataclass(frozen=True)
class ErrorSpan:
    start: int  # bytes
    end: int
    kind: str  # "ERROR" or "MISSING <type>"
    # Where an ERROR node's trouble is: its stray tokens (leaf children) and nested errors; the
    # well-formed subtrees it holds are left out. Empty: the whole span.
    parts: tuple[tuple[int, int], ...] = ()


def error_spans(node) -> list[ErrorSpan]:
    """Outermost ERROR nodes and all MISSING nodes under ``node``, in document order."""
    out: list[ErrorSpan] = []
    todo = [node]
    while todo:
        n = todo.pop()
        if n.is_error:
            parts = tuple((k.start_byte, k.end_byte) for k in n.children if k.child_count == 0 or k.is_error or k.is_missing)
            out.append(ErrorSpan(n.start_byte, n.end_byte, "ERROR", parts))
        elif n.is_missing:
            out.append(ErrorSpan(n.start_byte, n.end_byte, f"MISSING {n.type}"))
        elif n.has_error:
            kids = n.children
            if not any(k.has_error for k in kids):  # the error is a token the grammar hides
                out.extend(ErrorSpan(at, at, "MISSING") for at in _hidden_missing(n, kids))
            todo.extend(reversed(kids))
    out.sort(key=lambda e: (e.start, e.end))
    return out


def _hidden_missing(node, kids) -> list[int]:
    """Where the MISSING children of ``node`` that the node API does not list sit: zero-width
    tokens of a rule the grammar hides (Go's statement terminator between two top-level
    statements on one line, ``using namespace``). Read from the node's S-expression, which names
    them among its named children: each at the end of the named child before it."""
    shown = [k for k in kids if k.is_named or k.is_missing]
    text, out, depth, k, i, quoted = str(node), [], 0, 0, 0, False
    while i < len(text):
        ch = text[i]
        if quoted:
            i += ch == "\\"
            quoted = ch != '"'
        elif ch == '"':
            quoted = True
        elif ch == "(":
            depth += 1
            if depth == 2:
                if text.startswith("(MISSING", i) and not (k < len(shown) and shown[k].is_missing):
                    out.append(shown[k - 1].end_byte if k else node.start_byte)
                else:
                    k += 1
        elif ch == ")":
            depth -= 1
        i += 1
    return out


def _touch(a0: int, a1: int, b0: int, b1: int) -> bool:
    """Do closed ranges [a0, a1] and [b0, b1] overlap or touch?"""
    return a0 <= b1 and b0 <= a1


def judged_region(root, data: bytes, spans: list[tuple[int, int]]) -> tuple[int, int]:
    """Bytes [start, end) of the whole lines of the top-level nodes around the holes.

    A fill's syntax is judged there: top-level statements, functions and classes parse on their
    own, so a fill that breaks something shows within them, and a large file is not reparsed for
    every candidate. From the last top-level node that starts before the first hole to the first
    that ends at or after the last hole (the file's ends where there is none): a hole at the very
    start of a node may join what follows it to the node before (a header replaced by a comment
    leaves its body to the statement above), so that node is judged with it.
    """
    tops = [(c.start_byte, c.end_byte) for c in root.children]
    lo, hi = min(s for s, _ in spans), max(e for _, e in spans)
    starts = [a for a, _ in tops if a < lo]
    ends = [b for _, b in tops if b >= hi]
    return (line_start(data, starts[-1]) if starts else 0), (line_end(data, ends[0]) if ends else len(data))


class Document:
    """A document with holes (str offsets, ordered, disjoint), parsed once.

    ``tree`` is the whole document's; fills are judged in :func:`judged_region` (``start``, ``end``),
    or in the region the language's hooks name (``LanguageHooks.nested_region``; Python's method
    of a class): its lines, after ``head`` (Python's ``if 1:``, so that they parse on their own),
    which :meth:`new_errors` hands to the top-level region (:meth:`outer`) whenever a fill leaves
    that header's block (a fill that dedents out of the class). :meth:`new_errors` speaks in the
    judged bytes' offsets (``local``). ``hooks``: the language's (infill/syntax/hooks.py).
    """

    def __init__(self, grammar: Grammar, text: str, holes: list[tuple[int, int]], nest: bool = True, tree=None,
                 judge_whole: bool = False):
        self.grammar = grammar
        self.text = text
        self.holes = holes
        self.data = text.encode("utf-8", "surrogatepass")
        self.spans = [(str_to_byte(text, s), str_to_byte(text, e)) for s, e in holes]
        self.tree = tree if tree is not None else grammar.parse(self.data)
        self.hooks = hooks_for(grammar.spec)
        method = self.hooks.nested_region(self.tree.root_node, self.data, self.spans) if nest and self.spans and not judge_whole else None
        if method is not None:
            self.start, self.end, self.head = method
            self.local = self.head + self.data[self.start : self.end]
            self.local_tree = grammar.parse(self.local)
        if method is None or self.local_tree.root_node.child_count != 1:  # no method, or one that does not parse as one block
            self.start, self.end = judged_region(self.tree.root_node, self.data, self.spans) if self.spans and not judge_whole else (0, len(self.data))
            self.end = self.hooks.region_end(self.data, self.start, self.end)
            self.head, self.local = b"", self.data[self.start : self.end]
            whole = (self.start, self.end) == (0, len(self.data))
            self.local_tree = self.tree if whole else grammar.parse(self.local)
        self._judge_in_region()
        # The language's compiler judges too, where its hooks have one (Python's: infill/lang/python/pycompile.py).
        self.strict = self.hooks.strict_check(self.local, self.local_spans) if self.spans else None
        if self.strict is None and not self.head and (self.start, self.end) != (0, len(self.data)) and (
                self.tree.root_node.is_error or self._broken_away()):
            # Broken away from the holes, the top-level nodes may not be the document's (a stray '}'
            # the cut left ends a class early), and under a root that is itself an ERROR they are
            # fragments (a method's header whose '{' the cut took parses alone as a call): what a
            # fill opens may close past them. The whole document (where a compiler judges, its
            # region: it could not judge a broken whole).
            self.start, self.end, self.local, self.local_tree = 0, len(self.data), self.data, self.tree
            self._judge_in_region()
        self._outer: Document | None = None
        self._whole: Document | None = None
        self._reference: tuple[list[tuple[int, int]], set[tuple[int, int, int]]] | None = None  # _lines_out's
        self.contexts: dict[int, HoleContext] = {}  # hole_context's, per hole

    def _broken_away(self) -> bool:
        """Has the whole document an error that does not touch a hole (the judged region's baseline,
        or one outside the region)?"""
        if self.baseline:
            return True
        if not self.tree.root_node.has_error:
            return False
        reach = [blank_around(self.data, s, t) for s, t in self.spans]
        return any(not any(_touch(e.start, e.end, s, t) for s, t in reach) for e in error_spans(self.tree.root_node))

    def _judge_in_region(self) -> None:
        """The holes' spans in the judged region and its baseline errors."""
        self.local_spans = [(s - self.start + len(self.head), e - self.start + len(self.head)) for s, e in self.spans]
        # An error that only whitespace parts from a hole is the hole's too (an unclosed '{' or
        # a block header with no body right before it, a stray 'else:' right after it).
        reach = [blank_around(self.local, s, t) for s, t in self.local_spans]
        errors = error_spans(self.local_tree.root_node)
        self.baseline = [e for e in errors if not any(_touch(e.start, e.end, s, t) for s, t in reach)]
        self.broken_at_holes = len(errors) > len(self.baseline)  # the text has an error at a hole itself

    def outer(self) -> "Document":
        """The same document judged in the top-level statements around the holes (itself where it is)."""
        if not self.head:
            return self
        if self._outer is None:
            self._outer = Document(self.grammar, self.text, self.holes, nest=False, tree=self.tree)
        return self._outer

    def whole(self) -> "Document":
        """The same document judged whole (itself where it is)."""
        if (self.start, self.end) == (0, len(self.data)) and not self.head:
            return self
        if self._whole is None:
            self._whole = Document(self.grammar, self.text, self.holes, nest=False, tree=self.tree, judge_whole=True)
        return self._whole

    def region_text(self, i: int) -> tuple[str, str]:
        """The judged region's text before and after hole ``i`` (other holes keep their text)."""
        s, e = self.spans[i]
        return ((self.head + self.data[self.start : s]).decode("utf-8", "surrogatepass"),
                self.data[e : self.end].decode("utf-8", "surrogatepass"))

    def apply(self, fills: list[bytes]) -> tuple[bytes, list[tuple[int, int]]]:
        """The filled region and each fill's byte span in it."""
        parts, spans, at, out_len = [], [], 0, 0
        for (s, e), f in zip(self.local_spans, fills):
            parts.append(self.local[at:s])
            out_len += s - at
            spans.append((out_len, out_len + len(f)))
            parts.append(f)
            out_len += len(f)
            at = e
        parts.append(self.local[at:])
        return b"".join(parts), spans

    def parse(self, fills: list[bytes]):
        """(tree, filled region bytes, fill spans): the region's tree edited and reparsed incrementally."""
        data, spans = self.apply(fills)
        tree = self.local_tree.copy()
        for (s, e), f in reversed(list(zip(self.local_spans, fills))):  # last first: earlier offsets hold
            row, col = byte_to_point(self.local, s)
            nl = f.count(b"\n")
            new_end = (row + nl, (len(f) - f.rfind(b"\n") - 1) if nl else col + len(f))
            tree.edit(
                start_byte=s,
                old_end_byte=e,
                new_end_byte=s + len(f),
                start_point=(row, col),
                old_end_point=byte_to_point(self.local, e),
                new_end_point=new_end,
            )
        return self.grammar.parse(data, old_tree=tree), data, spans

    def new_errors(self, fills: list[bytes]) -> tuple[list[ErrorSpan], list[tuple[int, int]]]:
        """Errors of the filled region that the original did not have, and the fill spans (region bytes)."""
        new, spans, _ = self.errors(fills)
        return new, spans

    def errors(self, fills: list[bytes]) -> tuple[list[ErrorSpan], list[tuple[int, int]], bool]:
        """:meth:`new_errors`, and whether the filled region has no error at all: the fills also
        mend what the document with holes had broken away from them (a hole cut where an opening
        line stood leaves its block's closer stray further down; only a fill that opens it again
        mends that)."""
        tree, data, spans = self.parse(fills)
        if self.head and tree.root_node.child_count != 1:  # the fill left the method's block: it is the class's business
            return self.outer().errors(fills)
        every = error_spans(tree.root_node)
        # Map each baseline error into the filled document: shift by the growth of earlier holes.
        shifted = []
        for b in self.baseline:
            delta = sum((f1 - f0) - (e - s) for (s, e), (f0, f1) in zip(self.local_spans, spans) if e <= b.start)
            shifted.append((b.start + delta, b.end + delta))
        new = []
        for err in every:
            in_fill = any(_touch(err.start, err.end, a, b) for a, b in spans)
            if in_fill or not any(_touch(err.start, err.end, a, b) for a, b in shifted):
                new.append(err)
        away = bool(new) and self.broken_at_holes and not any(_touch(e.start, e.end, a, b) for e in new for a, b in spans)
        if away:
            new = self._not_in_lines_out(new, data, spans, fills)
        if away and new and any(e.end >= len(data.rstrip()) for e in new) and self.whole() is not self:
            # The document with holes was broken at one, so its top-level nodes may not be the filled
            # text's (a cut import swallowed the declaration after it into its ERROR, and the region
            # ends inside that declaration; a stub's `...` cut swallowed the next `@overload`): an
            # error only at the region's end is judged whole (where a compiler judges, it judges the
            # whole too: an error of the document's own elsewhere keeps the fill invalid, never valid).
            return self.whole().errors(fills)
        if not new and self.strict is not None:
            err = self.strict.error(data, spans)
            if err is not None:
                new.append(ErrorSpan(err.start, err.end, err.message))
        return new, spans, not new and not every

    def valid(self, fills: list[bytes]) -> bool:
        return not self.new_errors(fills)[0]

    def broken_after(self, fills: list[bytes], hole: int, length: int) -> bool:
        """Has the filled region an error within ``length`` bytes after hole ``hole``'s fill (old
        or new: the text there is judged as the fill leaves it)?"""
        tree, data, spans = self.parse(fills)
        if self.head and tree.root_node.child_count != 1:
            return self.outer().broken_after(fills, hole, length)
        end = spans[hole][1]
        return any(_touch(e.start, e.end, end, end + length) for e in error_spans(tree.root_node))

    def _lines_out(self) -> tuple[list[tuple[int, int]], set[tuple[int, int, int]]]:
        """The holes' lines in the judged region (bytes [start, end) up to the line break, merged),
        and the errors of the region parsed with them taken out: (start, end, how many taken lines
        come before it), those at a taken line left out (they are the fill's business)."""
        if self._reference is None:
            lines: list[tuple[int, int]] = []
            for s, e in self.local_spans:
                a, b = line_start(self.local, s), line_end(self.local, e)
                b -= self.local[b - 1 : b] == b"\n"
                if lines and a <= lines[-1][1]:
                    lines[-1] = (lines[-1][0], max(b, lines[-1][1]))
                else:
                    lines.append((a, b))
            parts, at, points = [], 0, []
            for a, b in lines:
                parts.append(self.local[at:a])
                points.append(sum(map(len, parts)))
                at = b
            parts.append(self.local[at:])
            errors = set()
            for err in error_spans(self.grammar.parse(b"".join(parts)).root_node):
                if not any(_touch(err.start, err.end, q, q) for q in points):
                    k = sum(q <= err.start for q in points)  # taken lines before the error
                    errors.add((err.start, err.end, k))
            self._reference = (lines, errors)
        return self._reference

    def _not_in_lines_out(self, new: list[ErrorSpan], data: bytes, spans: list[tuple[int, int]],
                          fills: list[bytes]) -> list[ErrorSpan]:
        """``new`` (none at a fill; ``data``, ``spans``: the filled region and the fills in it) less
        the errors that the region also has with the holes' lines taken out, at the same place
        through the edit, and that something other than whitespace parts from every fill. Asked only
        where the original has an error at a hole: the document may be broken elsewhere in a way
        that this error swallowed (a cut file's first line, a half-typed string), so that its
        baseline could not name it. Where the original has none there, every error the fill brings
        is the fill's (the stray closer of a block whose opening line the fill did not write again,
        though taking that line out makes the same). An error right after a fill stays the fill's."""
        lines, reference = self._lines_out()
        growth = [len(f) - (e - s) for (s, e), f in zip(self.local_spans, fills)]
        taken = [sum(g for (s, _), g in zip(self.local_spans, growth) if a <= s <= b) + (b - a) for a, b in lines]
        ends, moved = [], 0  # each taken line's end in the filled region
        for (a, b), t in zip(lines, taken):
            ends.append(a + moved + t)
            moved += t - (b - a)
        kept = []
        for err in new:
            k = sum(end <= err.start for end in ends)
            shift = sum(taken[:k])
            near = any(_touch(err.start, err.end, *blank_around(data, a, b)) for a, b in spans)
            if near or (err.start - shift, err.end - shift, k) not in reference:
                kept.append(err)
        return kept


# ------------------------------------------------------------------------------------------------
# What is open at a hole's start.


@dataclass(frozen=True)
class HoleContext:
    """The syntactic situation at a hole's start, as the steering lexer needs it.

    Invariant: the fields here are every language's (brackets, strings, the hole's line); what
    only a language's rules read is in ``lang``, which that language's hooks make and read."""

    in_text: bool  # the hole starts inside a comment, or a string steering cannot read: no steering
    # The hole is inside a string literal (the text of it, not an interpolation's code) that this
    # delimiter closes after the hole: steering keeps the fill inside it (then nothing else is set).
    string: str = ""
    # The hole's line opens a one-line string before the hole that nothing closes (one being typed,
    # the rest of its line not written yet): the fill starts inside it and closes it by its delimiter.
    open_string: str = ""
    base: tuple[str, ...] = ()  # brackets open before the hole (opener tokens, outermost first)
    needed: int = 0  # how many ``base`` entries the text after the hole closes: the innermost, or those outside ``unclosed``
    surplus: bool = False  # the text after the hole closes more than ``base`` holds
    # With ``surplus``, that text starts with a block's body, lines indented deeper than the hole's
    # line, and its first closer starts the next line indented no deeper, and not as the line of the
    # innermost bracket open before the hole, or ends the last of those lines after code (a
    # parameter list's): the line that opened it is missing (cut where it stood), and only the fill
    # can write it again (_headless): how many bytes after the hole that body spans, through its
    # closer's line (0: the text after the hole is no such body).
    headless: int = 0
    after: tuple[str, ...] = ()  # the closers the text after the hole has that nothing there opens, in order
    # (up to the next hole, or where no error is, the end of the top-level node around the hole)
    mends: bool = False  # the fill must leave open exactly what ``after`` closes (a mend branch's; Lexer.mended)
    # The last hole: how many of ``base`` the text after it leaves open: all where it closes none,
    # else the innermost that its layout shows it does not close (document._owed; a call cut
    # mid-line, whose ``(`` the block's closer further down does not close); a fill that
    # ``closes`` must close them.
    unclosed: int = 0
    closes: bool = False
    # How many of ``base``'s innermost brackets the fill must close before it may end, in any
    # round, read from the layout (_due: a table's row ``{18, 0, 123|`` whose next row starts
    # a line at its indentation); they count in ``unclosed`` too.
    due: int = 0
    next_char: str = ""  # the first character after the hole ("" at the end)
    at_line_start: bool = False  # only whitespace between the line start and the hole, and no bracket open
    indent: int = 0  # width of that whitespace
    # The language's own part (its hooks' ``hole_context``, e.g. Python's indentation levels:
    # infill/lang/python/offside.py's OffsideContext); None where the hooks add nothing.
    lang: Any = None


def _brackets(g: Grammar, root, start: int, end: int | None) -> list:
    nodes = g.captures("brackets", root, start, end).get("bracket", [])
    lo, hi = start, end if end is not None else root.end_byte
    return sorted((n for n in nodes if not n.is_missing and n.start_byte >= lo and n.end_byte <= hi), key=lambda n: n.start_byte)


def _unmatched(g: Grammar, root, start: int, end: int | None):
    """The closing brackets' nodes between ``start`` and ``end`` that close nothing opened there, in order."""
    local: list[str] = []
    for n in _brackets(g, root, start, end):
        if n.type in g.spec.brackets:
            local.append(n.type)
        elif local:
            local.pop()
        else:
            yield n


def _owed(data: bytes, opened: list[int], closer) -> int:
    """How many of the innermost brackets open before a hole (opened at bytes ``opened``, outermost
    first) the text after it does not close, read from the layout: ``closer``, the first closer
    after the hole that closes nothing there, starts a line indented less than the lines they
    opened on, and code closes a bracket on a line of its own at its opening line's indentation
    (every formatter's style: ``const (`` ... ``)``). 0 where that closer does not start its line."""
    lead = data[line_start(data, closer.start_byte) : closer.start_byte]
    if lead.strip():
        return 0
    width, k = indent_width(lead), 0
    while k < len(opened):
        at = opened[len(opened) - 1 - k]
        if indent_width(data[line_start(data, at) : line_end(data, at)]) <= width:
            break
        k += 1
    return k


def _due(spec: LanguageSpec, data: bytes, end: int, stack: list[str], opened: list[int], stop: int | None) -> int:
    """How many of the innermost brackets open before a hole that ends at byte ``end`` (``stack``,
    opened at bytes ``opened``, outermost first) its fill must close itself, read from the layout:
    the hole ends its line, the bracket has code after it on the line it opened on (a table's row
    ``{18, 0, 123``, an initializer's first values), and the next line that holds code (before
    ``stop``, the next hole) starts no deeper than that line and not with the bracket's closer (the
    next row, the next declaration): code that goes on inside a bracket over lines indents them
    deeper, or starts them with its closer. 0 where the text after the hole on its line holds code."""
    eol = line_end(data, end)
    if not stack or not _blank_or_comment(spec, data[end:eol]):
        return 0
    at = eol
    while at < len(data) and (stop is None or at < stop):
        nxt = line_end(data, at)
        line = data[at:nxt]
        code = line.strip()
        if code and not _blank_or_comment(spec, line) and not code.startswith(tuple(d.encode() for d in spec.directive)):
            break
        at = nxt
    else:
        return 0
    if stop is not None and line_end(data, at) > stop:
        return 0  # the next code line holds the next hole
    width, first, k = indent_width(line), code[:1].decode("utf-8", "replace"), 0
    while k < len(stack):
        j = len(stack) - 1 - k
        row = data[line_start(data, opened[j]) : line_end(data, opened[j])]
        after_opener = data[opened[j] + len(stack[j]) : min(line_end(data, opened[j]), end)]
        if indent_width(row) < width or first == spec.brackets[stack[j]] or _blank_or_comment(spec, after_opener):
            break
        k += 1
    return k


def _blank_or_comment(spec: LanguageSpec, text: bytes) -> bool:
    """Is ``text`` (part of one line) blank, or a comment from its first character on?"""
    code = text.strip()
    return not code or code.startswith(tuple(d.encode() for d in (*spec.line_comment, *(a for a, _ in spec.block_comment))))


def openers_needed(doc: Document) -> str:
    """The brackets that the text after the last hole closes and opens nowhere, as the openers
    a fill there would leave open, outermost first (for a hole with no bracket open before it)."""
    g, root = doc.grammar, doc.tree.root_node
    opener = g.spec.openers
    return "".join(opener[n.type] for n in reversed(list(_unmatched(g, root, doc.spans[-1][1], None))) if n.type in opener)


_HEAD_WORD = re.compile(rb"[^\W\d]\w*")
_WORD_END = re.compile(rb"\w$")


HEAD_TRIES = 12  # the most words whose example line block_heads tries in the hole


def block_heads(doc: Document, i: int, indent: str = "", limit: int = 2) -> list[str]:
    """The words that a fill of hole ``i`` which must open the block whose closer the text after it
    has stray (``HoleContext.surplus``: the opener of ``after``'s first closer, the innermost) may
    begin with: a hole cut where a block's opening line stood. Read from the document's own lines
    that open such a block (their code ends with the opener), so no language's keywords are named
    here: by their first word, the words whose first such line, put in the hole, leaves the
    document with no error at all (``errors``' clean: the block's body after the hole is one that
    such a line opens, a struct's fields or a statement's body), then the rest; each group most
    common first, lines at the hole's indentation before the others; of the HEAD_TRIES most
    common, and after those that mend, the words of the language's example lines
    (``LanguageSpec.block_lines``) that the document has no such line of, where one mends it;
    before them all, the word that the language's table says opens a block whose closer
    the word after the stray closer follows (``LanguageSpec.continuations``: ``} catch`` -> ``try``).
    ``indent``: the indentation that the fill writes first (the engine moves a line's into its
    hole). [] where the hole is not at a line's start, or its text after closes nothing stray."""
    ctx, (s, _) = hole_context(doc, i), doc.spans[i]
    before = doc.data[line_start(doc.data, s) : s]
    opener = doc.grammar.spec.openers.get(ctx.after[0], "") if ctx.surplus else ""
    if ctx.in_text or before.strip() or not opener:
        return []
    width = indent_width(before + indent.encode())
    counts: dict[bytes, list] = {}  # word -> [lines at the hole's indentation, other lines, its first line]
    for line in doc.data.split(b"\n"):
        code = line.strip()
        word = _HEAD_WORD.match(code)
        if word is None or not code.endswith(opener.encode()):
            continue
        n = counts.setdefault(word.group(), [0, 0, code])
        n[indent_width(line[: len(line) - len(line.lstrip())]) != width] += 1
    ranked = sorted(counts, key=lambda w: (-counts[w][0], -counts[w][1]))[:HEAD_TRIES]

    def mends(word: bytes) -> bool:
        fills = [b""] * len(doc.spans)
        fills[i] = indent.encode() + counts[word][2]
        return doc.errors(fills)[2]

    mending = [w for w in ranked if mends(w)]  # most common first within each group
    # and after those, the words of the language's example lines (LanguageSpec.block_lines) that the
    # document has no such line of, where one mends it (a struct's fields in a file with no other struct)
    for line in doc.grammar.spec.block_lines:
        code, word = line.encode(), _HEAD_WORD.match(line.encode())
        if word is not None and word.group() not in counts and code.endswith(opener.encode()):
            counts[word.group()] = [0, 0, code]
            if mends(word.group()):
                mending.append(word.group())
            else:
                del counts[word.group()]
    ranked = mending + [w for w in ranked if w not in mending]
    # The word after the stray closer on its line tells the block's head where the language's table
    # says so (``} catch`` -> ``try``): first, though no line of the document shows it.
    closer = next(_unmatched(doc.grammar, doc.tree.root_node, doc.spans[i][1], None), None)
    word = _HEAD_WORD.match(doc.data[closer.end_byte : line_end(doc.data, closer.end_byte)].strip()) if closer is not None else None
    head = doc.grammar.spec.continuations.get(word.group().decode("utf-8", "replace"), "") if word is not None else ""
    if head:
        ranked = [head.encode(), *(w for w in ranked if w != head.encode())]
    return [w.decode("utf-8", "replace") for w in ranked[:limit]]


def block_tails(doc: Document, i: int, indent: str = "", limit: int = 2) -> list[str]:
    """The texts that the document's own lines which open what a fill of hole ``i`` must open end
    with, from the first bracket they leave open on: ``(() => {`` where a cut took a callback's
    opening line. What the fill must open: the openers of the closers that the text after the
    hole has and nothing opens, beyond those that close the brackets open before it
    (``HoleContext.after`` against ``base``), at least two of them (one opener is what a mend
    branch writes itself). Read from the document's lines, so no language's syntax is named here:
    of the HEAD_TRIES most common, first those whose first line, put in the hole (after ``indent``;
    after code on the hole's line, the tail alone, that code its head), leaves the document with
    no error at all (the body after the hole is one that such a line opens: statements after
    ``(function (err) {``, not an object's members after ``({``); each group most common first,
    then shortest. [] where code before the hole on its line does not end in a word (a name the
    tail's brackets would follow), or the hole is in a string or comment, or the text after it
    closes the brackets before it out of order. After the document's own that mend, the
    language's example tails (``LanguageSpec.block_tails``) that do."""
    ctx, (s, _) = hole_context(doc, i), doc.spans[i]
    data, g = doc.data, doc.grammar
    m = len(ctx.after) - len(ctx.base)
    before = data[line_start(data, s) : s].strip()
    mid_line = bool(before)
    if ctx.in_text or m < 2 or (mid_line and not _WORD_END.search(before)):
        return []
    pairs = g.spec.brackets
    if any(pairs[o] != c for o, c in zip(reversed(ctx.base), ctx.after[m:])):
        return []
    needed = [g.spec.openers.get(c) for c in reversed(ctx.after[:m])]
    if None in needed:
        return []
    counts: dict[bytes, list] = {}  # tail -> [lines that end with it, the first such line's code]
    by_line: dict[int, list] = {}
    for n in _brackets(g, doc.tree.root_node, 0, None):
        by_line.setdefault(line_start(data, n.start_byte), []).append(n)
    for row, nodes in by_line.items():
        stack: list = []
        for n in nodes:
            if n.type in pairs:
                stack.append(n)
            elif stack and pairs[stack[-1].type] == n.type:
                stack.pop()
        if [n.type for n in stack] == needed and not data[stack[-1].end_byte : line_end(data, row)].strip():
            tail = data[stack[0].start_byte : stack[-1].end_byte]
            counts.setdefault(tail, [0, data[row : stack[-1].end_byte].strip()])[0] += 1
    ranked = sorted(counts, key=lambda t: (-counts[t][0], len(t)))[:HEAD_TRIES]

    def mends(tail: bytes, line: bytes) -> bool:  # ``line``: the code that ends with ``tail``
        fills = [b""] * len(doc.spans)
        fills[i] = tail if mid_line else indent.encode() + line
        return doc.errors(fills)[2]

    mending = [t for t in ranked if mends(t, counts[t][1])]
    # and after those, the language's example tails (LanguageSpec.block_tails) that open what the
    # fill must and the document has no line of, where one mends it (a stand-in name its head)
    mending += [t for t in (x.encode() for x in g.spec.block_tails)
                if t not in counts and _left_open(g.spec, t) == needed and mends(t, b"f" + t)]
    ranked = mending + [t for t in ranked if t not in mending]
    return [t.decode("utf-8", "replace") for t in ranked[:limit]]


def _left_open(spec: LanguageSpec, text: bytes) -> list[str]:
    """The one-character brackets that ``text`` (an example from the language's table, no string
    or comment in it) leaves open, in order."""
    stack: list[str] = []
    openers = {o: c for o, c in spec.brackets.items() if len(o) == 1}
    for ch in text.decode():
        if ch in openers:
            stack.append(ch)
        elif stack and openers[stack[-1]] == ch:
            stack.pop()
    return stack


def unbalanced(ctx: HoleContext, pairs: dict[str, str]) -> bool:
    """Does the text after a hole close brackets, but not exactly those open before it (more,
    other or fewer), so that a fill that opens or closes the difference could mend it?"""
    return bool(ctx.after) and ctx.after != tuple(pairs[b] for b in reversed(ctx.base))


def _inside_text(g: Grammar, doc: Document, pos: int, end: int) -> tuple[bool, str]:
    """Whether a hole from ``pos`` to ``end`` starts inside a string or comment, and for a string
    whose text it lies in, the delimiter that closes it (:func:`closing_quote`)."""
    lo = max(pos - 1, 0)
    caps = g.captures("strings", doc.tree.root_node, lo, pos + 1)
    for name, nodes in caps.items():
        for n in nodes:
            # a line comment that holds its line break (Rust's doc comments) ends before it
            stop = n.end_byte - (name == "comment" and doc.data[n.end_byte - 1 : n.end_byte] == b"\n")
            if n.start_byte < pos < stop:
                return True, closing_quote(g, n, pos, end) if name == "string" else ""
            if name == "comment" and n.start_byte < pos == stop and not doc.data.endswith(b"*/", 0, pos):
                return True, ""
    return False, ""


def closing_quote(g: Grammar, node, pos: int, end: int) -> str:
    """The delimiter that closes string ``node``, where bytes ``pos`` to ``end`` lie in its text: after
    its opening quote, before its closing one, and in no interpolation (``f"{x}"``, ``${x}``: code);
    "" where not, where its last child is no quote of the language (a raw string's ``"#``), or
    where the tree may have misread it (it has an error, or spans lines that its quote may not or
    before text that is broken: a docstring whose closing quotes were cut takes the next one's)."""
    kids = node.children
    if len(kids) < 2 or kids[-1].child_count or node.has_error:
        return ""
    close = kids[-1].text.decode("utf-8", "replace")
    if close not in g.spec.quotes or pos < kids[0].end_byte or end > kids[-1].start_byte:
        return ""
    if kids[0].start_point[0] != kids[-1].start_point[0] and (close not in g.spec.multiline or _broken_after(node)):
        return ""  # over several lines: where the text after it is broken, it may be the next string's quote that closes it
    code = [k for k in kids[1:-1] if k.child_count and k.children[0].type in g.spec.brackets]  # '{' x '}'
    if any(k.start_byte < end and pos < k.end_byte for k in code):
        return ""
    return close


def _broken_after(node) -> bool:
    """Does the text after ``node`` hold an error (a sibling of it or of an ancestor that has one)?"""
    while node is not None:
        sibling = node.next_sibling
        while sibling is not None:
            if sibling.has_error:
                return True
            sibling = sibling.next_sibling
        node = node.parent
    return False


def last_leaf(root, pos: int):
    """The last non-comment leaf that starts before ``pos`` (None if there is none)."""
    node, found = root, None
    while True:
        kids = [c for c in node.children if c.start_byte < pos and c.end_byte > c.start_byte and "comment" not in c.type]
        if not kids:
            return found
        node = found = kids[-1]
        if node.child_count == 0:
            return node


def hole_context(doc: Document, i: int) -> HoleContext:
    """What the steering lexer must know at the start of hole ``i`` of ``doc`` (found once per
    document: in a large file, reading the brackets around a hole is what costs)."""
    if i not in doc.contexts:
        doc.contexts[i] = _hole_context(doc, i)
    return doc.contexts[i]


def _hole_context(doc: Document, i: int) -> HoleContext:
    g, data, root = doc.grammar, doc.data, doc.tree.root_node
    s, e = doc.spans[i]
    inside, string = _inside_text(g, doc, s, e)
    if inside:
        return HoleContext(in_text=not string, string=string, next_char=data[e : e + 1].decode("utf-8", "replace"),
                           lang=doc.hooks.hole_context(doc, i, None, []))
    pairs = g.spec.brackets
    # In an error-free tree, top-level nodes wholly before the hole's own are balanced.
    tops = [c for c in root.children if c.start_byte <= s]
    scan_from = tops[-1].start_byte if tops and not root.has_error else 0
    stack: list[str] = []
    opened: list[int] = []  # where each of ``stack`` opened
    for n in _brackets(g, root, scan_from, s):
        if n.type in pairs:
            stack.append(n.type)
            opened.append(n.start_byte)
        elif stack and pairs[stack[-1]] == n.type:
            stack.pop()
            opened.pop()
    # The text after the hole (up to the next hole) closes some of what is open.
    stop = doc.spans[i + 1][0] if i + 1 < len(doc.spans) else None
    if not root.has_error:  # then what the prefix opened closes within the same top-level node
        top = next((c for c in root.children if c.end_byte >= e), None)
        stop = top.end_byte if top is not None and (stop is None or top.end_byte < stop) else stop
    closers = list(_unmatched(g, root, e, stop))
    after = tuple(n.type for n in closers)
    last = i + 1 == len(doc.spans)
    # The last hole's innermost brackets that the layout shows the text after it does not close
    # (_owed): the fill closes them, and that text's closers pair with the brackets outside them.
    owed = _owed(data, opened, closers[0]) if last and closers else 0
    due = _due(g.spec, data, e, stack, opened, stop)
    owed = max(owed, due)
    needed, surplus = _pair(pairs, stack[: len(stack) - owed], after)
    if surplus and owed:
        owed = due = 0
        needed, surplus = _pair(pairs, stack, after)
    row = line_start(data, s)
    before = data[row:s]
    at_line_start = not before.strip()
    ctx = dict(base=tuple(stack), needed=needed, surplus=surplus, after=after, at_line_start=at_line_start and not stack, due=due,
               headless=surplus and _headless(data, row, e, closers[0].start_byte, opened[-1] if opened else None, g.spec.labels))
    if last and not needed and not surplus:
        ctx["unclosed"] = len(stack)
    elif owed:
        ctx["unclosed"] = owed
    ctx["next_char"] = data[e : e + 1].decode("utf-8", "replace")
    ctx["indent"] = indent_width(before) if at_line_start else 0
    if not at_line_start and not _inside_text(g, doc, row, row)[0]:  # the line starts in code (not in a string over lines)
        ctx["open_string"] = open_string(g.spec, before.decode("utf-8", "replace"))
    ctx["lang"] = doc.hooks.hole_context(doc, i, tuple(stack), opened)
    return HoleContext(in_text=False, **ctx)


def _headless(data: bytes, row: int, end: int, closer: int, opened: int | None, labels: tuple[str, ...] = ()) -> int:
    """How many bytes from a hole's end (``end``; ``row``: its line's start) through the line of
    ``closer`` (the first closer after it that closes nothing there, a byte offset) are a block's
    body without its opening line: the rest of the hole's line blank, at least one line of code
    indented deeper than the hole's line and the others too, but for lines that begin with one of
    ``labels`` at the hole's indentation (a switch's ``case``, as gofmt lays it out), and the
    closer first on its line, indented no deeper than the hole's line, and not as the line that
    opened the innermost bracket before the hole (``opened``; then it would be that bracket's
    closer, as the layout reads it); or the closer after code on the last of such lines (what went
    on from the line the hole took: a parameter list, a call's arguments). 0 where they are not."""
    nl = data.find(b"\n", end)
    if nl < 0 or nl >= closer or data[end:nl].strip():
        return 0
    width = indent_width(data[row:nl])
    closing = data[line_start(data, closer) : closer]
    if closing.strip():  # the closer after code: the lines that go on from the hole's, its own the last
        lines = [x for x in data[nl + 1 : line_end(data, closer)].split(b"\n") if x.strip()]
        return line_end(data, closer) - end if all(indent_width(x) > width for x in lines) else 0
    body = [x for x in data[nl + 1 : line_start(data, closer)].split(b"\n") if x.strip()]

    def inside(line: bytes) -> bool:
        word = _HEAD_WORD.match(line.strip())
        return indent_width(line) > width or (indent_width(line) == width and word is not None and word.group().decode() in labels)

    if not any(indent_width(x) > width for x in body) or indent_width(closing) > width or not all(inside(x) for x in body):
        return 0
    if opened is not None and indent_width(data[line_start(data, opened) : opened]) == indent_width(closing):
        return 0
    return line_end(data, closer) - end


def _pair(pairs: dict[str, str], stack: list[str], after: tuple[str, ...]) -> tuple[int, bool]:
    """(needed, surplus): how many of ``stack``'s innermost brackets the closers ``after`` close, in
    order, and whether one of them closes none of those."""
    needed = 0
    for closer in after:
        if needed < len(stack) and pairs[stack[len(stack) - 1 - needed]] == closer:
            needed += 1
        else:
            return needed, True
    return needed, False


def open_string(spec: LanguageSpec, code: str) -> str:
    """The delimiter of a one-line string that ``code`` (text that starts in code, a line's start
    up to a hole) opens and leaves open at its end; "" where none is (or the text ends in a
    comment, or right after a backslash in the string). Only quotes and comments are read; where
    a ``'`` opens a char literal only when one closes it (``char_literal`` "closed"), one followed
    by an escape opens one all the same (a lifetime has none: ``'\\u{1e`` is a char being typed)."""
    i, n = 0, len(code)
    while i < n:
        if any(code.startswith(c, i) for c in spec.line_comment):
            return ""
        block = next(((a, b) for a, b in spec.block_comment if code.startswith(a, i)), None)
        if block:
            close = code.find(block[1], i + len(block[0]))
            if close < 0:
                return ""
            i = close + len(block[1])
            continue
        quote = next((q for q in spec.quotes if code.startswith(q, i)), None)
        if spec.char_literal == "closed" and code[i] == "'":
            m = CLOSED_CHAR.match(code, i)
            if m is not None or not code.startswith("\\", i + 1):
                i += len(m.group(0)) if m else 1  # a char literal, or a lifetime
                continue
            quote = "'"  # an escape after it: a char literal (no lifetime has one), read as a one-line string
        if quote is None:
            i += 1
            continue
        j, escape = i + len(quote), False
        while j < n and (escape or not code.startswith(quote, j)):
            escape = not escape and code[j] == "\\" and quote not in spec.raw
            j += 1
        if j >= n:
            return "" if quote in spec.multiline or escape else quote
        i = j + len(quote)
    return ""


# ------------------------------------------------------------------------------------------------
# Syntax-aware truncation.


def touching(errors, start: int, end: int) -> bool:
    return any(_touch(e.start, e.end, start, end) for e in errors)


def line_of_cut(errors_of: Callable[[bytes], list[ErrorSpan]], mid: bytes, cut: bytes) -> bytes:
    """``cut`` (a prefix of the fill ``mid``), or where the fill up to the end of the cut's line
    leaves the document fewer errors, that: a unit ends inside its line, while what the line goes
    on with (a block's opener, a statement's terminator, a list's separator) is still the fill's.
    ``errors_of``: the document's error spans with a given fill in place."""
    errors = len(errors_of(cut))
    if not errors:
        return cut
    nl = mid.find(b"\n", len(cut))
    line = mid[: nl if nl >= 0 else len(mid)]
    return line if line != cut and len(errors_of(line)) < errors else cut


def truncate_completion(language: str | Grammar | None, prefix: str, fill: str, suffix: str,
                        parse: Callable[[bytes], Any] | None = None) -> str:
    """Cut a completion inserted at a cursor where the syntactic unit around the cursor ends.

    The unit is the innermost statement, block or bracketed list (``boundaries.scm``) that starts
    before the cursor and ends inside the fill; the fill is cut at its end (as SAFIM's
    post-processing does), or at the end of that line where that leaves fewer errors
    (:func:`line_of_cut`: a header's ``f(x) {`` or ``f, x):``, a statement's ``g(x);``, not
    ``f(x)`` or ``g(x)``). Conservative: no grammar, no such unit, a unit with errors in it, or a
    cut that leaves more errors than the whole fill, and the fill comes back unchanged.
    ``parse``: the tree of ``prefix`` + a given fill (UTF-8) + ``suffix``, where the caller parses it
    incrementally (a Document's); by default each is parsed whole.
    """
    g = language if isinstance(language, Grammar) else lookup_grammar(language)
    if g is None or not fill.strip():
        return fill
    pre, mid, suf = (x.encode("utf-8", "surrogatepass") for x in (prefix, fill, suffix))
    c, f = len(pre), len(pre) + len(mid)
    parse = parse or (lambda m: g.parse(pre + m + suf))
    tree = parse(mid)
    whole = error_spans(tree.root_node)
    parsed = {mid: whole}

    def errors_of(m: bytes) -> list[ErrorSpan]:  # each fill parsed once
        if m not in parsed:
            parsed[m] = error_spans(parse(m).root_node)
        return parsed[m]

    best = None
    for nodes in g.captures("boundaries", tree.root_node, c, f).values():
        for n in nodes:
            if n.start_byte < c < n.end_byte < f and (best is None or n.end_byte - n.start_byte < best.end_byte - best.start_byte):
                best = n
    if best is None or best.has_error:
        return fill
    # The unit must be the innermost one around the cursor, not merely one that ends in the fill.
    for nodes in g.captures("boundaries", tree.root_node, c, c + 1).values():
        for n in nodes:
            if n.start_byte < c < n.end_byte and n.end_byte - n.start_byte < best.end_byte - best.start_byte:
                return fill  # a smaller unit around the cursor reaches past the fill
    end = best.end_byte - c
    rest = mid[end:]
    # Keep the line break that ends the unit's line, unless the suffix brings its own.
    if rest.lstrip(b" \t").startswith(b"\n") and not suf.lstrip(b" \t").startswith((b"\n", b"\r")):
        end += len(rest) - len(rest.lstrip(b" \t")) + 1
    cut = mid[:end]
    if not cut.strip():
        return fill
    cut = line_of_cut(errors_of, mid, cut)
    after = len(errors_of(cut))
    if after > len(whole) and after > len(errors_of(b"")):
        return fill  # the cut breaks more than the whole fill and than the document without it
    return fill[: byte_to_str(mid, len(cut))]
