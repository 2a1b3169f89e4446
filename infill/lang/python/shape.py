"""Python: whether a hole's fill must open a block or brackets, and the opener that tells the model so.

A hole on lines of its own whose following text is indented deeper than anything before it
allows (a loop body whose header was cut out, an ``else`` branch's body) can only be filled by a
block header. A model that has not seen a ':' there writes a statement; steering then refuses
to end the fill, the fill runs on looking for a header, and no repair of committed tokens turns
a statement into one. So the engine puts the ':' after such a hole in the text the model reads
(:func:`shape_of`): the model writes the header's head (``for x in xs``) against the ':' and the
body it opens, the syntax checks judge that head with the ':' after it (:func:`before_opener`
for the steering lexer), and the ':' goes into the fill. Where only a header fits, the fill is
its head alone, one line, from the first round on (:func:`first_round_shape`). Where no one
header fits either, because the text after the hole is indented two or more levels deeper than
the hole (a loop and the ``if`` in it cut out), the headers it needs are found the same way
(``Shape.scaffold``, :func:`_scaffold_shape`) and the engine fills them as holes of their own
(infill/lang/python/scaffold.py). At the end of the file, where nothing follows the hole, a fill owes only
what a statement before it still needs: a ``try``'s ``except:`` clause, found and filled the same
way (:func:`_tail_shape`). Inside brackets that the text after the hole leaves open while that
text is indented as a block's body (a dict's last entries, its '}' and the loop over it cut out),
the scaffold's free lines must close them first (:func:`_closing_shape`).

Found by parsing stand-in fills (infill/syntax/document.py, ``Document``): when no simple statement
(``pass``) at any indentation the text before the hole allows makes the document valid, but a
block header (``if x:``, ``def f():``, ...) at one of them does, the fill must open a block. The
fill's first line may start at any width where either parses. Where the text after the hole
closes brackets it never opens (a multi-line call or dict whose first line was cut out), that
comes first: the fill must open them, and the innermost is the opener (``x = f(`` leaves no
error, so the model reads ``(`` after the hole and writes ``sys.stderr.write`` before it). Only for one-hole requests in
indentation-sensitive languages whose hole takes whole lines or ends its line, and
only for constrained requests. It does not look at tokens or the model.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from typing import NamedTuple

from infill.syntax.languages import grammar as lookup_grammar
from infill.protocol import FillRequest, Hole
from infill.lang.python.pycompile import first_error
from infill.lang.python.blocks import levels_with
from infill.syntax import hooks
from infill.syntax.document import Document, HoleContext, hole_context, openers_needed
from infill.text.textpos import indent_width

STATEMENT = "pass"
# A header's head for each word that starts one (the ':' is the opener's): a retry's head may
# start only with a word whose stand-in parses (after an ``if`` body ``else`` may; before an
# ``except`` only ``try`` may).
HEADS = {"if": "if x", "elif": "elif x", "else": "else", "for": "for x in y", "while": "while x", "with": "with x",
         "try": "try", "except": "except", "finally": "finally", "def": "def f()", "class": "class C",
         "async": "async def f()"}
# Block headers; more than one, as the body may hold what only some allow (``return``, ``break``)
# or the text after it may continue only some (``except`` a ``try``).
HEADERS = tuple(HEADS[w] + ":" for w in ("if", "def", "for", "try"))
# How a stand-in statement opens each bracket (a call's arguments may be keywords: ``f(a=1)``).
OPENING = {"(": "f("}
OPENING_HEADS = ("x = ", "if ")  # a statement, or a header whose ':' comes after the brackets close
LOOKBACK_LINES = 40  # lines before the hole whose indentation widths are tried when the tree cannot tell
LOOKAHEAD_LINES = 8  # lines after the hole whose widths deeper than the levels may be tried after a ':'
SCAFFOLD_DEPTH = 4  # the most nested block headers a scaffold opens
# Stand-ins for a scaffold's headers: the outermost may be a loop (the text after the hole may
# ``break``) or a clause of a statement before the hole (an ``except:`` its ``try`` still needs),
# the last one a ``try`` where that text goes on with ``except:``.
SCAFFOLD_FIRST = ("if x:", "for x in y:", "except:", "else:")
SCAFFOLD_LAST = ("if x:", "try:")
# Clauses a statement before a hole at the end of the file may still need (_tail_shape).
TAIL_CLAUSES = ("except:", "finally:")


class ScaffoldHole(NamedTuple):
    """One hole of a scaffolded request (infill/lang/python/scaffold.py), as its syntax checks must know it:
    the free lines before the scaffold (``seam``: the width of the line after them), or one line
    of it (``width``; where ``head``, a header's head alone before its ':', starting with one of
    ``head_words``). ``levels``: the indentation levels open at it; ``opened``: it follows a
    header (the scaffold's, or for the free lines the one before the hole). The tree of the
    scaffold with its holes empty cannot tell these two."""

    hole: int
    levels: tuple[int, ...] | None
    seam: int | None = None
    width: int | None = None
    head: bool = False
    head_words: tuple[str, ...] = ()
    opened: bool = False
    closes: bool = False  # free lines: they close the brackets open before them; a line: those are closed


@dataclass(frozen=True)
class Shape(hooks.Shape):
    """What a hole's fill must look like at its edges, as far as stand-in fills tell (Python's).

    ``opener`` (the general shape's): what to put after the hole (and into the fill): ':' (a block
    header), or the brackets the text after the hole closes and never opens (_opening_shape), then
    a line break where the hole takes whole lines; '' for none. ``closes``: a retry's (see
    :func:`strict_shape`). ``doc``: the request's parsed document, for the syntax checks to reuse."""

    leaves_open: str = ""  # with a bracket opener: the brackets outside it that the fill opens itself
    first_indents: tuple[int, ...] | None = None  # where a line there parses; None: unknown
    levels: tuple[int, ...] | None = None  # Python's indentation levels at the hole (read with a stand-in)
    head_only: bool = False  # with an opener: the fill is one line, the header's head (a retry's strict shape)
    head_words: tuple[str, ...] = ()  # with head_only: the words the head may start with (HEADS)
    # The width where a retry's fill is a block header (where no statement parses; see
    # shape_of) and the opener that says so: what :func:`strict_shape` turns this shape into.
    header_indents: tuple[int, ...] = ()
    header_opener: str = ""
    # Where neither a statement nor one header parses at any width: the lines of the nested
    # block headers the fill must end with, as (width, words): the words a header's head may
    # start with (HEADS whose stand-in parses there), or () for a body line after the last
    # header where the text after the hole goes on with a clause of it; see _scaffold_shape.
    scaffold: tuple[tuple[int, tuple[str, ...]], ...] = ()
    scaffold_after_header: bool = False  # the hole follows a header: the scaffold's free lines hold its body
    scaffold_closes: bool = False  # the hole is inside brackets: the scaffold's free lines close them
    # A scaffolded request's (infill/lang/python/scaffold.py): what its holes must be (scaffold_context).
    scaffold_holes: tuple[ScaffoldHole, ...] = ()


def shape_of(request: FillRequest) -> Shape:
    """The shape of the fill of a one-hole request whose hole starts a line and ends one (or
    ends at a line start); ``Shape()`` for every other request, or when no stand-in parses."""
    if len(request.holes) != 1 or not request.options.constrained:
        return Shape()
    g = lookup_grammar(request.language)
    if g is None or hooks.hooks_for(g.spec).name != "python":  # a language without Python's offside rule
        return Shape()
    h, text = request.holes[0], request.text
    if text[text.rfind("\n", 0, h.start) + 1 : h.start]:
        return Shape()  # the hole does not start a line (the engine moves it past bare indentation)
    old = text[h.start : h.end]
    if text[h.end :].startswith(("\n", "\r\n")):
        end = ""
    elif (not old and (h.start == 0 or text[h.start - 1] == "\n")) or old.endswith("\n"):
        end = "\n"
    else:
        return Shape()
    doc = Document(g, text, [(h.start, h.end)])
    shape = _shape_in(doc, h, end)
    return shape if shape.doc is not None else replace(shape, doc=doc)  # the syntax checks reuse its parse


def _shape_in(doc: Document, h: Hole, end: str) -> Shape:
    """shape_of's shape of the one hole ``h`` of ``doc``; ``end``: what a stand-in ends with."""
    text = doc.text
    ctx = hole_context(doc, 0)
    if ctx.in_text or ctx.string:
        return Shape()
    if ctx.base:  # inside brackets: only where the fill must close them and then open a block
        return _closing_shape(doc, ctx, h, end) if text[h.end :].strip() else Shape()
    if not text[h.end :].strip():  # nothing follows the hole: only a clause still owed gives it a shape
        return _tail_shape(doc, ctx, h, end)
    if ctx.surplus:  # the text after the hole closes brackets nothing opens: the document is broken
        # without a fill that opens them, and any stand-in that does not is excused by that
        return _opening_shape(doc, ctx, h, end)

    def fits(k: int, stand_in: str) -> bool:
        return doc.valid([(" " * k + stand_in + end).encode()])

    # The levels' widths; where nothing parses at any of them, the deeper ones the text after
    # the hole shows (tried only then: an error there that the empty hole has too is excused).
    for widths in (_widths(text[: h.start], ctx), _deeper_widths(text[h.end :], ctx)):
        statements = tuple(k for k in widths if fits(k, STATEMENT))
        headers: dict[int, str] = {}  # width -> the first stand-in header that parses there (where no statement does)
        for k in (k for k in widths if k not in statements):
            header = next((x for x in HEADERS if fits(k, x)), None)
            if header:
                headers[k] = header
        if statements or headers:
            break
    else:
        return _scaffold_shape(doc, ctx, h, end)
    k = statements[0] if statements else next(iter(headers))
    levels = _levels(doc, ctx.lang.levels, " " * k + (STATEMENT if statements else headers[k]) + end)
    # The first line may be a statement or a header wherever one parses; it must be a header
    # (and the opener tells the model so) only where no statement does.
    first = tuple(sorted(set(statements) | set(headers), reverse=True))
    # A retry's header goes at the deepest width where only a header parses (``else:`` after an
    # ``if`` body), never at the top level of a file where a statement fits elsewhere (it would
    # cut the function around the hole in two).
    only = [k for k in first if k not in statements and (k > 0 or not statements)][:1]
    return Shape(opener="" if statements else ":" + end, first_indents=first, levels=levels, doc=doc,
                 header_indents=tuple(only), header_opener=":" + end if only else "")


def _opening_shape(doc: Document, ctx: HoleContext, hole: Hole, end: str) -> Shape:
    """Where the text after the hole closes brackets it never opens (the first line of a call or
    a dict cut out), the fill opens them where a statement that ends with them parses
    (``x = f(``): the innermost is its opener, the others the fill leaves open itself
    (``print("{}".format(``)."""
    brackets = openers_needed(doc)
    if not brackets:
        return Shape()
    opening = "".join(OPENING.get(b, b) for b in brackets)
    # The tree of the document without the brackets may misread its indentation: where no width
    # of its levels fits, those of the lines before the hole are tried; a stand-in must leave no
    # error at all (the document without it has some).
    prefix = doc.text[: hole.start]
    for widths in (_widths(prefix, ctx), _widths(prefix, _with(ctx, levels=None))):
        fits: dict[int, str] = {}
        for k in widths:
            stand_in = next((x for x in (" " * k + head + opening + end for head in OPENING_HEADS) if _clean(doc, x)), None)
            if stand_in:
                fits[k] = stand_in
        if fits:
            break
    else:
        return Shape()
    return Shape(opener=brackets[-1] + end, leaves_open=brackets[:-1], first_indents=tuple(fits), doc=doc,
                 levels=_levels(doc, None, next(iter(fits.values()))))


def _closing_shape(doc: Document, ctx: HoleContext, hole: Hole, end: str) -> Shape:
    """Inside brackets that the text after the hole leaves open, where that text is indented as a
    block's body (a dict's last entries, its '}', and the loop over it cut out): a scaffold whose
    free lines close the brackets (a stand-in closes them on a line of its own, at the width of
    the line that opened them) before its headers; ``Shape()`` where none parses."""
    pairs = doc.grammar.spec.brackets
    if ctx.unclosed != len(ctx.base) or any(b not in pairs for b in ctx.base):
        return Shape()
    lines = doc.text[: hole.start].split("\n")[-LOOKBACK_LINES:]
    widths = [indent_width(ln) for ln in lines if ln.strip()]
    width = next((w for w in reversed(widths) if w < widths[-1]), 0)  # the line that opened them
    closing = " " * width + "".join(pairs[b] for b in reversed(ctx.base))
    shape = _scaffold_shape(doc, _with(ctx, after_colon=False), hole, end, before=[closing])
    return replace(shape, scaffold_closes=True) if shape.scaffold else shape


def _scaffold_shape(doc: Document, ctx: HoleContext, hole: Hole, end: str, before: list[str] | None = None) -> Shape:
    """Where the text after the hole is indented deeper than one header at any width allows (a
    loop and the ``if`` in it cut out above their body), the headers that must open its block:
    one at each indentation step from a width the fill's lines may start at down to the level
    above that text's first line (or at it, followed by a body line, where that line is a clause:
    an ``else:`` needs its ``if`` and the ``if`` a body). The first that parses with stand-ins
    (SCAFFOLD_FIRST, SCAFFOLD_LAST, ``pass``), fewest headers first, at most SCAFFOLD_DEPTH, then
    the same after a body line where the hole follows a header (or after the lines ``before``,
    which the fill must start with); Shape() if none does."""
    target = ctx.lang.seam_here
    if not target:  # unknown, or nothing to open a block for
        return Shape()
    ordered = sorted(ctx.lang.levels or ())
    unit = indent_unit(ordered)
    clause = ctx.lang.clause_here
    if before:
        bodies = [before]
    else:  # after a header the free lines before the scaffold hold its body (steering asks for one)
        bodies = [[]] + ([[" " * (ordered[-1] + unit) + STATEMENT]] if ctx.lang.after_colon and ordered else [])
    tried: set[str] = set()  # one header before a clause is the clause's own: its first is not tried
    for body, n in itertools.product(bodies, range(1, SCAFFOLD_DEPTH + 1)):
        top = target - (n - 1 if clause else n) * unit
        if top < 0:
            continue
        widths = [top + j * unit for j in range(n)]
        for first, last in itertools.product(SCAFFOLD_FIRST, SCAFFOLD_LAST if clause else ("if x:",)):
            heads = [first] + ["if x:"] * (n - 1)
            heads[-1] = last if clause else heads[-1]
            lines = body + [" " * w + head for w, head in zip(widths, heads)]
            lines += [" " * (widths[-1] + unit) + STATEMENT] if clause else []
            stand_in = "\n".join(lines) + end
            if stand_in in tried:
                continue
            tried.add(stand_in)
            if doc.valid([stand_in.encode()]):
                scaffold = tuple((w, _scaffold_words(doc, lines, len(body) + j, end)) for j, w in enumerate(widths))
                scaffold += ((widths[-1] + unit, ()),) if clause else ()
                return Shape(scaffold=scaffold, scaffold_after_header=ctx.lang.after_colon,
                             levels=_levels(doc, ctx.lang.levels, stand_in), doc=doc)
    return Shape()


def _tail_shape(doc: Document, ctx: HoleContext, hole: Hole, end: str) -> Shape:
    """At the end of the file, where no statement at any width parses but one ending with a
    clause that a statement before the hole still needs does (a ``try`` with no ``except``): that
    clause's header and a body line as a scaffold, the free lines before it (after a header,
    its body). The first such width, innermost first, of TAIL_CLAUSES; ``Shape()`` where a
    statement parses (a fill at the end of a file that owes nothing keeps no shape) or none does."""
    prefix = doc.text[: hole.start]
    widths = _widths(prefix, ctx)
    if not widths or any(doc.valid([(" " * k + STATEMENT + end).encode()]) for k in widths):
        return Shape(doc=doc)
    ordered = sorted(widths)
    unit = indent_unit(ordered)
    body = [" " * ordered[-1] + STATEMENT] if ctx.lang.after_colon else []  # _widths put one level deeper last
    for k, clause in itertools.product(reversed(ordered[:-1] if ctx.lang.after_colon else ordered), TAIL_CLAUSES):
        lines = [*body, " " * k + clause, " " * (k + unit) + STATEMENT]
        stand_in = "\n".join(lines) + end
        if doc.valid([stand_in.encode()]):
            scaffold = ((k, _scaffold_words(doc, lines, len(body), end)), (k + unit, ()))
            return Shape(scaffold=scaffold, scaffold_after_header=ctx.lang.after_colon,
                         levels=_levels(doc, ctx.lang.levels, stand_in), doc=doc)
    return Shape(doc=doc)


def _scaffold_words(doc: Document, lines: list[str], j: int, end: str) -> tuple[str, ...]:
    """The words of HEADS whose stand-in parses in place of the scaffold's header ``j``
    (``if`` but no ``for`` before a ``break``, no ``else`` with no ``if`` before it)."""
    width = " " * (len(lines[j]) - len(lines[j].lstrip()))

    def parses(head: str) -> bool:
        return doc.valid([("\n".join([*lines[:j], width + head + ":", *lines[j + 1 :]]) + end).encode()])

    return tuple(w for w, head in HEADS.items() if parses(head))


def _clean(doc: Document, stand_in: str) -> bool:
    """Does the judged region with ``stand_in`` in the hole have no error at all (tree-sitter's or CPython's)?"""
    tree, data, _ = doc.parse([stand_in.encode()])
    return not tree.root_node.has_error and first_error(data) is None


def _levels(doc: Document, levels: tuple[int, ...] | None, stand_in: str) -> tuple[int, ...] | None:
    """The indentation levels at the hole: ``levels`` where the tree told them, else read with a
    stand-in fill in it (in the judged region: the whole document need not be parsed again)."""
    return levels if levels is not None else levels_with(doc, stand_in)


def strict_shape(shape: Shape) -> Shape:
    """The strict shape of a retry: the fill closes the brackets the text after it leaves open;
    where a block header parses at some width where no statement does, the fill is that header's
    head alone (one line at one of those widths, starting with a word of HEADS whose stand-in
    parses there; the opener adds the ':'); otherwise ``shape`` as it is."""
    if not shape.header_indents or shape.doc is None:
        return replace(shape, closes=True)
    k, doc = shape.header_indents[0], shape.doc
    words = tuple(w for w, head in HEADS.items() if doc.valid([(" " * k + head + shape.header_opener).encode()]))
    return replace(shape, opener=shape.header_opener, first_indents=shape.header_indents, head_only=True,
                   head_words=words, closes=True)


def first_round_shape(shape: Shape) -> Shape:
    """The shape a request's first round fills: where only a block header fits (no statement
    parses at any width), the header's head alone, as a retry would have it (:func:`strict_shape`),
    so that steering holds the model to one line and the first round is valid more often
    (HumanEval single-line: 15 retries instead of 22); otherwise ``shape`` as it is."""
    return strict_shape(shape) if shape.opener.startswith(":") and shape.header_indents else shape


def scaffold_context(ctx: HoleContext, hole: ScaffoldHole, line_before: str = "") -> HoleContext:
    """The steering context of a scaffolded request's hole, with what the scaffold tells of it.
    ``line_before``: the text of the hole's line before it (a line's indentation, or nothing)."""
    ctx = _with(ctx, levels=hole.levels or ctx.lang.levels)
    if hole.seam is not None:  # free lines: the scaffold's first line follows them
        ctx = _with(ctx, seam_here=hole.seam, seam_next=hole.seam, clause_here=False, clause_next=False,
                    after_colon=ctx.lang.after_colon or hole.opened)
        return replace(ctx, closes=ctx.closes or hole.closes, unclosed=len(ctx.base) if hole.closes else ctx.unclosed)
    if hole.closes and ctx.base:  # the free lines closed the brackets the tree reads open before this line
        ctx = replace(ctx, base=(), needed=0, unclosed=0, due=0, surplus=False, at_line_start=True, indent=indent_width(line_before))
        ctx = _with(ctx, line_before="", last_sig="")  # no ':' ends the line before
    # A scaffold line follows a header of the scaffold's or the free lines, which hold the body
    # of a header before them: the tree, which reads them empty, cannot tell which.
    return _with(ctx, first_indents=(hole.width,), head_only=hole.head, head_words=hole.head_words, colon_rest=hole.head,
                 after_colon=hole.opened)


def _with(ctx: HoleContext, **lang) -> HoleContext:
    """``ctx`` with the fields ``lang`` of its Python part (OffsideContext) replaced."""
    return replace(ctx, lang=replace(ctx.lang, **lang))


def indent_unit(widths) -> int:
    """The indentation step of a file whose levels are ``widths``: their smallest difference (4 if none)."""
    ordered = sorted(widths)
    return min((b - a for a, b in zip(ordered, ordered[1:])), default=4)


def _widths(prefix: str, ctx: HoleContext) -> list[int]:
    """Indentation widths a fill's first line may have, innermost first: the levels open at the
    hole (or, where the tree cannot tell, those of the lines before it), and one deeper after a ':'."""
    lc = ctx.lang
    widths = set(lc.levels) if lc.levels is not None else _widths_of(prefix.split("\n")[-LOOKBACK_LINES:]) | {0}
    if lc.after_colon:
        widths.add(max(widths) + indent_unit(widths))
    return sorted(widths, reverse=True)


def _deeper_widths(suffix: str, ctx: HoleContext) -> list[int]:
    """After a ':' whose levels are known, the widths of the lines after the hole that are deeper
    than those levels (a file indented by other units than its levels show), innermost first."""
    lc = ctx.lang
    if not lc.after_colon or lc.levels is None:
        return []
    return sorted((k for k in _widths_of(suffix.split("\n")[:LOOKAHEAD_LINES]) if k > max(lc.levels)), reverse=True)


def _widths_of(lines: list[str]) -> set[int]:
    return {indent_width(ln) for ln in lines if ln.strip() and "\t" not in ln[: len(ln) - len(ln.lstrip())]}


def before_opener(ctx: HoleContext, shape: Shape) -> HoleContext:
    """The steering context of a hole, read from the original text, with what its shape adds:
    the opener after it, the first line's widths, the levels the tree could not tell."""
    lc = ctx.lang
    ctx = replace(ctx, closes=shape.closes, mends=shape.mends)
    ctx = _with(ctx, first_indents=shape.first_indents, levels=lc.levels if lc.levels is not None else shape.levels)
    if not shape.opener:
        return ctx
    if not shape.opener.startswith(":"):  # brackets: the fill's last line goes on with them, and they close what was surplus
        return _with(replace(ctx, next_char=shape.opener[0], surplus=bool(shape.leaves_open)), colon_rest=False)
    ctx = _with(replace(ctx, next_char=":"), colon_rest=True, head_only=shape.head_only, head_words=shape.head_words)
    if shape.opener.endswith("\n"):  # the text after the hole now starts on the line after the ':'
        return _with(ctx, seam_next=ctx.lang.seam_here, clause_next=ctx.lang.clause_here)
    return ctx
