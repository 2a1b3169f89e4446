"""Tree-sitter judgements on a document with holes: new errors, bracket context, truncation.

- :class:`Document` parses a request's text once and judges fills: prefix + fills + suffix must
  have no ERROR or MISSING node that the document did not already have, within the top-level
  statements around the holes (:func:`judged_region`), or for Python, within the method of a
  top-level class that holds them (:func:`method_region`); for Python, CPython's compiler must
  accept that region too (infill/lang/python/pycompile.py). Errors of the original that touch a hole, or
  that only whitespace parts from one, are the fill's business (a half-typed line is what a
  completion finishes; an unclosed bracket before a hole at the end of a file, the fill closes);
  errors elsewhere are the baseline, matched by position through the edit. Fills are parsed
  incrementally from the original tree.
- :func:`hole_context` tells the steering lexer (infill/syntax/steering.py) what is open at a hole's
  start: brackets, strings or comments, and Python's indentation levels.
- :func:`truncate_completion` cuts a cursor completion where its syntactic unit ends.

Everything works in UTF-8 bytes (tree-sitter's unit); str offsets go through infill/text/textpos.py.
Nothing here knows about tokens, tensors or the sampler.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from infill.syntax.languages import Grammar, grammar as lookup_grammar
from infill.lang.python.pycompile import StrictCheck
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
            todo.extend(reversed(n.children))
    return out


def _touch(a0: int, a1: int, b0: int, b1: int) -> bool:
    """Do closed ranges [a0, a1] and [b0, b1] overlap or touch?"""
    return a0 <= b1 and b0 <= a1


def judged_region(root, data: bytes, spans: list[tuple[int, int]]) -> tuple[int, int]:
    """Bytes [start, end) of the whole lines of the top-level nodes around the holes.

    A fill's syntax is judged there: top-level statements, functions and classes parse on their
    own, so a fill that breaks something shows within them, and a large file is not reparsed for
    every candidate. From the last top-level node that starts at or before the first hole to the
    first that ends at or after the last hole (the file's ends where there is none).
    """
    tops = [(c.start_byte, c.end_byte) for c in root.children]
    lo, hi = min(s for s, _ in spans), max(e for _, e in spans)
    starts = [a for a, _ in tops if a <= lo]
    ends = [b for _, b in tops if b >= hi]
    return (line_start(data, starts[-1]) if starts else 0), (line_end(data, ends[0]) if ends else len(data))


# The first line of a definition in a class's body (a method, a nested class, or a decorator).
_DEFINITION = re.compile(rb"[ \t]*(@|def\b|async[ \t]+def\b|class\b)")


def method_region(root, data: bytes, spans: list[tuple[int, int]]) -> tuple[int, int] | None:
    """Python: bytes [start, end) of the whole lines of the method (or class) in the body of a
    top-level class (at any depth of classes) that holds every hole past its first line; None
    where the holes are not in one (at a top-level class's own level, between two methods).

    A method parses on its own after ``if 1:``; in a file of one large class it is a small part
    of the top-level region, which every judged fill would otherwise reparse and compile whole.
    The method is the last statement of the class's body that starts before the holes, where its
    first line starts a definition; it runs to the end of its node or by the offside rule
    (:func:`offside_end`), whichever is further: a hole often breaks the tree of the method it is
    in (a body left empty is an ERROR node).
    """
    lo, hi = min(s for s, _ in spans), max(e for _, e in spans)
    node = next((c for c in root.children if c.start_byte <= lo and hi <= c.end_byte), None)
    found = None
    while node is not None:
        definition = node.child_by_field_name("definition") if node.type == "decorated_definition" else node
        body = definition.child_by_field_name("body") if definition is not None and definition.type == "class_definition" else None
        node = next((c for c in reversed(body.children) if c.start_byte < lo), None) if body is not None else None
        if node is None or line_end(data, node.start_byte) > lo or not _DEFINITION.match(data, line_start(data, node.start_byte)):
            break
        start = header = line_start(data, node.start_byte)
        while data.startswith(b"@", header + node.start_byte - start) and header < lo:  # decorators' lines
            header = line_end(data, header)
        end = max(line_end(data, node.end_byte), offside_end(data, line_end(data, header), node.start_byte - start))
        if end < hi:
            break
        found = start, end
    return found


def offside_end(data: bytes, at: int, indent: int) -> int:
    """Past the lines from ``at`` on that belong to a block whose header is indented ``indent``
    bytes: up to the first line with code indented no deeper. Where the tree ends a method
    before that (a hole that broke a ``try`` in it, say), the lines after are still its."""
    while at < len(data):
        end = line_end(data, at)
        line = data[at:end]
        if line.strip() and len(line) - len(line.lstrip(b" \t")) <= indent:
            break
        at = end
    return at


class Document:
    """A document with holes (str offsets, ordered, disjoint), parsed once.

    ``tree`` is the whole document's; fills are judged in :func:`judged_region` (``start``, ``end``),
    or for Python in :func:`method_region` where the holes lie in a method: its lines, after
    ``head`` (``if 1:``, so that they parse on their own), which :meth:`new_errors` hands to the
    top-level region (:meth:`outer`) whenever a fill leaves that header's block (a fill that
    dedents out of the class). :meth:`new_errors` speaks in the judged bytes' offsets (``local``).
    """

    def __init__(self, grammar: Grammar, text: str, holes: list[tuple[int, int]], nest: bool = True, tree=None):
        self.grammar = grammar
        self.text = text
        self.holes = holes
        self.data = text.encode("utf-8", "surrogatepass")
        self.spans = [(str_to_byte(text, s), str_to_byte(text, e)) for s, e in holes]
        self.tree = tree if tree is not None else grammar.parse(self.data)
        method = method_region(self.tree.root_node, self.data, self.spans) if nest and grammar.name == "python" and self.spans else None
        if method is not None:
            self.start, self.end = method
            self.head = b"if 1:\r\n" if self.data[: self.end].endswith(b"\r\n") else b"if 1:\n"
            self.local = self.head + self.data[self.start : self.end]
            self.local_tree = grammar.parse(self.local)
        if method is None or self.local_tree.root_node.child_count != 1:  # no method, or one that does not parse as one block
            self.start, self.end = judged_region(self.tree.root_node, self.data, self.spans) if self.spans else (0, len(self.data))
            self.head, self.local = b"", self.data[self.start : self.end]
            whole = (self.start, self.end) == (0, len(self.data))
            self.local_tree = self.tree if whole else grammar.parse(self.local)
        self.local_spans = [(s - self.start + len(self.head), e - self.start + len(self.head)) for s, e in self.spans]
        # An error that only whitespace parts from a hole is the hole's too (an unclosed '{' or
        # a block header with no body right before it, a stray 'else:' right after it).
        reach = [blank_around(self.local, s, t) for s, t in self.local_spans]
        self.baseline = [e for e in error_spans(self.local_tree.root_node) if not any(_touch(e.start, e.end, s, t) for s, t in reach)]
        # Python: CPython's compiler judges too, for what tree-sitter lets through (infill/lang/python/pycompile.py).
        self.strict = StrictCheck(self.local, self.local_spans) if grammar.name == "python" and self.spans else None
        self._outer: Document | None = None
        self.contexts: dict[int, HoleContext] = {}  # hole_context's, per hole

    def outer(self) -> "Document":
        """The same document judged in the top-level statements around the holes (itself where it is)."""
        if not self.head:
            return self
        if self._outer is None:
            self._outer = Document(self.grammar, self.text, self.holes, nest=False, tree=self.tree)
        return self._outer

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
        tree, data, spans = self.parse(fills)
        if self.head and tree.root_node.child_count != 1:  # the fill left the method's block: it is the class's business
            return self.outer().new_errors(fills)
        # Map each baseline error into the filled document: shift by the growth of earlier holes.
        shifted = []
        for b in self.baseline:
            delta = sum((f1 - f0) - (e - s) for (s, e), (f0, f1) in zip(self.local_spans, spans) if e <= b.start)
            shifted.append((b.start + delta, b.end + delta))
        new = []
        for err in error_spans(tree.root_node):
            in_fill = any(_touch(err.start, err.end, a, b) for a, b in spans)
            if in_fill or not any(_touch(err.start, err.end, a, b) for a, b in shifted):
                new.append(err)
        if not new and self.strict is not None:
            err = self.strict.error(data)
            if err is not None:
                new.append(ErrorSpan(err.start, err.end, err.message))
        return new, spans

    def valid(self, fills: list[bytes]) -> bool:
        return not self.new_errors(fills)[0]


# ------------------------------------------------------------------------------------------------
# What is open at a hole's start.


@dataclass(frozen=True)
class HoleContext:
    """The syntactic situation at a hole's start, as the steering lexer needs it."""

    in_text: bool  # the hole starts inside a comment, or a string steering cannot read: no steering
    # The hole is inside a string literal (the text of it, not an interpolation's code) that this
    # delimiter closes after the hole: steering keeps the fill inside it (then nothing else is set).
    string: str = ""
    base: tuple[str, ...] = ()  # brackets open before the hole (opener tokens, outermost first)
    needed: int = 0  # how many of the innermost ``base`` entries the text after the hole closes
    surplus: bool = False  # the text after the hole closes more than ``base`` holds
    # The last hole: how many of ``base`` the text after it leaves open (all or none: the fill can
    # close them only when that text closes none); a fill that ``closes`` must close them.
    unclosed: int = 0
    closes: bool = False
    next_char: str = ""  # the first character after the hole ("" at the end)
    levels: tuple[int, ...] | None = None  # Python: indentation levels, current last; None = unknown
    after_colon: bool = False  # Python: the last logical line ended with ':'
    at_line_start: bool = False  # only whitespace between the line start and the hole
    indent: int = 0  # width of that whitespace
    last_sig: str = ""  # the last significant character before the hole on its logical line
    # Python: the indentation of the first significant line of the text after the hole, read as
    # if that text started a line (``seam_here``) and from its first line break on (``seam_next``).
    seam_here: int | None = None
    seam_next: int | None = None
    # ... and whether that line continues a compound statement (elif, else, except, finally).
    clause_here: bool = False
    clause_next: bool = False
    colon_rest: bool = False  # Python: the rest of the hole's line after it is a block's ':'
    first_indents: tuple[int, ...] | None = None  # Python: the widths the fill's first line may have (infill/lang/python/shape.py)
    # Python: the hole's logical line before it, from its first significant character ("" when
    # the hole starts the line); None where that is not known (inside brackets, after a '\').
    line_before: str | None = None
    # Python: the fill is only the head of the block header whose ':' follows the hole (one
    # logical line, no ':' of its own); set for a retry of a fill that found no valid header.
    head_only: bool = False
    head_words: tuple[str, ...] = ()  # with head_only: the words the head may start with (none: any header's)


def _brackets(g: Grammar, root, start: int, end: int | None) -> list:
    nodes = g.captures("brackets", root, start, end).get("bracket", [])
    lo, hi = start, end if end is not None else root.end_byte
    return sorted((n for n in nodes if not n.is_missing and n.start_byte >= lo and n.end_byte <= hi), key=lambda n: n.start_byte)


def _unmatched(g: Grammar, root, start: int, end: int | None):
    """The closing brackets between ``start`` and ``end`` that close nothing opened there, in order."""
    local: list[str] = []
    for n in _brackets(g, root, start, end):
        if n.type in g.spec.brackets:
            local.append(n.type)
        elif local:
            local.pop()
        else:
            yield n.type


def openers_needed(doc: Document) -> str:
    """The brackets that the text after the last hole closes and opens nowhere, as the openers
    a fill there would leave open, outermost first (for a hole with no bracket open before it)."""
    g, root = doc.grammar, doc.tree.root_node
    opener = {c: o for o, c in g.spec.brackets.items()}
    return "".join(opener[c] for c in reversed(list(_unmatched(g, root, doc.spans[-1][1], None))) if c in opener)


def _inside_text(g: Grammar, doc: Document, pos: int, end: int) -> tuple[bool, str]:
    """Whether a hole from ``pos`` to ``end`` starts inside a string or comment, and for a string
    whose text it lies in, the delimiter that closes it (:func:`closing_quote`)."""
    lo = max(pos - 1, 0)
    caps = g.captures("strings", doc.tree.root_node, lo, pos + 1)
    for name, nodes in caps.items():
        for n in nodes:
            if n.start_byte < pos < n.end_byte:
                return True, closing_quote(g, n, pos, end) if name == "string" else ""
            if name == "comment" and n.start_byte < pos == n.end_byte and not doc.data[:pos].endswith(b"*/"):
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


def _last_leaf(root, pos: int):
    """The last non-comment leaf that starts before ``pos`` (None if there is none)."""
    node, found = root, None
    while True:
        kids = [c for c in node.children if c.start_byte < pos and c.end_byte > c.start_byte and "comment" not in c.type]
        if not kids:
            return found
        node = found = kids[-1]
        if node.child_count == 0:
            return node


def _row_indent(data: bytes, node) -> int:
    row_start = node.start_byte - node.start_point[1]
    end = data.find(b"\n", row_start)
    return indent_width(data[row_start : end if end >= 0 else len(data)])


MAX_LINE_BEFORE = 1000  # bytes of a logical line before a hole inside brackets that steering checks as a line


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
        return HoleContext(in_text=not string, string=string, next_char=data[e : e + 1].decode("utf-8", "replace"))
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
    needed, surplus = 0, False
    for closer in _unmatched(g, root, e, stop):
        if needed < len(stack) and pairs[stack[len(stack) - 1 - needed]] == closer:
            needed += 1
        else:
            surplus = True
            break
    row = line_start(data, s)
    before = data[row:s]
    at_line_start = not before.strip()
    ctx = dict(base=tuple(stack), needed=needed, surplus=surplus, at_line_start=at_line_start and not stack)
    if i + 1 == len(doc.spans) and not needed and not surplus:
        ctx["unclosed"] = len(stack)
    ctx["next_char"] = data[e : e + 1].decode("utf-8", "replace")
    ctx["indent"] = indent_width(before) if at_line_start else 0
    if g.spec.indent:
        ctx.update(_python_levels(root, data, s))
        continued = data[max(0, row - 3) : row].rstrip(b"\r\n").endswith(b"\\")
        if not stack and not continued:
            ctx["line_before"] = before.decode("utf-8", "replace").lstrip(" \t\f")
        elif stack and not continued and s - line_start(data, opened[0]) <= MAX_LINE_BEFORE:
            # Inside brackets: the logical line from the line its outermost open bracket is on (one
            # that a bracket closed there began earlier reads as broken already: it is not judged).
            ctx["line_before"] = data[line_start(data, opened[0]) : s].decode("utf-8", "replace").lstrip(" \t\f")
        stop = doc.spans[i + 1][0] if i + 1 < len(doc.spans) else len(data)
        if stop == len(data):  # the seam is only known when no other hole comes first
            nl = data.find(b"\n", e)
            here, next_ = _first_line(data[e:]), (0, False) if nl < 0 else _first_line(data[nl + 1 :])
            rest = data[e : len(data) if nl < 0 else nl].split(b"#")[0].strip()
            ctx.update(seam_here=here[0], clause_here=here[1], seam_next=next_[0], clause_next=next_[1], colon_rest=rest == b":")
    return HoleContext(in_text=False, **ctx)


_CLAUSES = (b"elif", b"else", b"except", b"finally")


def _first_line(data: bytes) -> tuple[int, bool]:
    """Python: the indentation of the first line of ``data`` that is neither blank nor a comment
    (0: none), and whether it continues a compound statement (``elif``, ``else``, ...)."""
    for line in data.split(b"\n"):
        body = line.strip()
        if body and not body.startswith(b"#"):
            word = (body.replace(b":", b" ").split() or [b""])[0]
            return indent_width(line), word in _CLAUSES
    return 0, False


def levels_with(doc: Document, fill: str) -> tuple[int, ...] | None:
    """Python: the indentation levels at the start of ``doc``'s one hole with ``fill`` in it (a
    stand-in that mends the tree there), read in the judged region's tree; None where that tree
    has an error on the way up."""
    tree, data, spans = doc.parse([fill.encode("utf-8", "surrogatepass")])
    return _python_levels(tree.root_node, data, spans[0][0])["levels"]


def _python_levels(root, data: bytes, pos: int) -> dict:
    last = _last_leaf(root, pos)
    if last is None:
        return dict(levels=(0,), after_colon=False, last_sig="")
    levels = {0}
    n, exact = last, True
    while n is not None:
        if n.is_error or n.is_missing:
            exact = False
        parent = n.parent
        if parent is not None and parent.type in ("block", "module"):
            levels.add(_row_indent(data, n))
        n = parent
    between = data[last.end_byte : pos]
    after_colon = last.type == ":" and b"\n" in between
    last_sig = ":" if last.type == ":" else last.text.decode("utf-8", "replace")[-1:] if last.text else ""
    return dict(levels=tuple(sorted(levels)) if exact else None, after_colon=after_colon, last_sig=last_sig)


# ------------------------------------------------------------------------------------------------
# Syntax-aware truncation.


def _header_line_end(errors_of, pre: bytes, mid: bytes, suf: bytes, cut: bytes) -> bytes:
    """``cut`` (a prefix of the fill ``mid``), or where it leaves an error at its end that the
    whole fill does not have there, the fill up to the end of the cut's line if that leaves none
    (the ':' of a header whose brackets the cut closed). ``errors_of``: a document's error spans."""
    c = len(pre)
    if _touching(errors_of(pre + mid + suf), c, c + len(mid)):
        return cut
    if not _touching(errors_of(pre + cut + suf), c, c + len(cut)):
        return cut
    nl = mid.find(b"\n", len(cut))
    line = mid[: nl if nl >= 0 else len(mid)]
    ok = not _touching(errors_of(pre + line + suf), c, c + len(line))
    return line if ok and line != cut else cut


def _touching(errors, start: int, end: int) -> bool:
    return any(_touch(e.start, e.end, start, end) for e in errors)


def truncate_completion(language: str | Grammar | None, prefix: str, fill: str, suffix: str) -> str:
    """Cut a completion inserted at a cursor where the syntactic unit around the cursor ends.

    The unit is the innermost statement, block or bracketed list (``boundaries.scm``) that starts
    before the cursor and ends inside the fill; the fill is cut at its end (as SAFIM's
    post-processing does). In Python a cut that leaves an error at its end, inside a block
    header's line, goes on to that line's end (``f, x):``, not ``f, x)``). Conservative: no
    grammar, no such unit, a unit with errors in it, or a cut that leaves more errors than the
    whole fill, and the fill comes back unchanged.
    """
    g = language if isinstance(language, Grammar) else lookup_grammar(language)
    if g is None or not fill.strip():
        return fill
    pre, mid, suf = (x.encode("utf-8", "surrogatepass") for x in (prefix, fill, suffix))
    c, f = len(pre), len(pre) + len(mid)
    tree = g.parse(pre + mid + suf)
    whole = error_spans(tree.root_node)
    parsed = {pre + mid + suf: whole}

    def errors_of(data: bytes) -> list[ErrorSpan]:  # each document parsed once
        if data not in parsed:
            parsed[data] = error_spans(g.parse(data).root_node)
        return parsed[data]

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
    if g.spec.indent:  # Python: a cut inside a block header's line goes on to the line's end (``f):``, not ``f)``)
        cut = _header_line_end(errors_of, pre, mid, suf, cut)
    after = len(errors_of(pre + cut + suf))
    if after > len(whole) and after > len(errors_of(pre + suf)):
        return fill  # the cut breaks more than the whole fill and than the document without it
    return fill[: byte_to_str(mid, len(cut))]
