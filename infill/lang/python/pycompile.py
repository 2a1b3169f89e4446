"""Python's own compiler as a second, stricter judge of Python fills than tree-sitter.

tree-sitter-python recovers from what CPython rejects: an unexpected indent, a block opener
without its body on the next line, duplicate parameters, ``*, *args``, assignment to a literal.
For Python documents, :class:`StrictCheck` compiles the region that infill/syntax/document.py judges (the
top-level statements around the holes, never the whole file, so a fill costs well under a
millisecond even in a large file) and reports the first SyntaxError as a byte span in it.

Like tree-sitter errors, compile errors are judged against the original: a region that already
fails to compile somewhere away from the holes cannot tell new errors from old, so the strict
check is off for that document. An error at a hole (a deleted line that left an indented body
behind, say) is the fill's business; one that it hid (the region has it at the same place with the
holes' lines taken out) is not, though a fill that mends the hole's brings it to light. The
lines that go on from a hole's line, all indented deeper than it (a bracket's contents whose
opener the cut took), are the hole's too, whatever error CPython finds in them. ``compile``
never executes code; its warnings are silenced.

:func:`line_broken` is the same judge for one logical line while it is being written, for the
steering lexer (infill/syntax/steering.py): a line the model is writing token by token is cut off
anywhere, so only an error that no text after it can undo counts.

Not here: tree-sitter parsing (infill/syntax/document.py), steering, or which slots to remask.
"""

from __future__ import annotations

import ast
import codeop
import functools
import io
import keyword
import re
import tokenize
import warnings
from dataclasses import dataclass

from infill.text.textpos import blank_around, indent_width, line_end, line_start, str_to_byte


@dataclass(frozen=True)
class CompileError:
    start: int  # bytes, in the text given to :func:`first_error`
    end: int
    message: str


@functools.lru_cache(maxsize=16)
def first_error(data: bytes) -> CompileError | None:
    """The first SyntaxError of ``data`` as Python source (None: it compiles, or cannot be judged).
    Kept for the last few sources: a request's region is compiled as its baseline again and again."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, "<fill>", "exec", dont_inherit=True)
        return None
    except SyntaxError as e:  # IndentationError and TabError included
        return _span(text, e)
    except (ValueError, RecursionError, MemoryError, OverflowError):  # null bytes, deep nesting: no verdict
        return None


def _span(text: str, e: SyntaxError) -> CompileError:
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(lineno: int | None, col: int | None, default_end: bool) -> int:
        if not lineno or lineno < 1:
            return len(text)
        i = min(lineno, len(lines)) - 1 if lines else 0
        line = lines[i] if lines else ""
        if col is None or col < 1:
            col = len(line.rstrip("\r\n")) + 1 if default_end else 1
        return starts[i] + min(col - 1, len(line))

    s = offset(e.lineno, e.offset, False)
    end = offset(e.end_lineno or e.lineno, e.end_offset, True) if (e.end_offset or 0) > 0 else offset(e.lineno, None, True)
    s_b, e_b = str_to_byte(text, s), str_to_byte(text, max(s, end))
    return CompileError(s_b, e_b, f"{type(e).__name__}: {e.msg}")


class StrictCheck:
    """The compile check of a Python region (whole top-level statements) with holes (byte spans)."""

    def __init__(self, data: bytes, spans: list[tuple[int, int]]):
        self.spans = spans
        self.enabled = True
        self._data = data
        self._hidden: tuple[bytes, CompileError | None] | None = None  # :meth:`_lines_out`'s
        self._base = first_error(data)
        if self._base is not None and not _at_hole(data, self._base, spans):
            self.enabled = False  # already broken elsewhere: no way to tell new errors from old

    def error(self, filled: bytes, fills: list[tuple[int, int]] | None = None) -> CompileError | None:
        """The first compile error of the filled region, if any (None also when not enabled).
        ``fills``: the fills' byte spans in ``filled``; an error on none of their lines that the
        region also has at the same place with the holes' lines taken out is the document's, not
        theirs: an error at a hole hides the errors after it (a half-typed string, and further down
        a call the cut left open), which a fill that mends it brings to light. Only where the region
        has an error (at a hole) to hide one: taking out a line that compiled can break what is left."""
        err = first_error(filled) if self.enabled else None
        if err is None or fills is None or self._base is None or len(fills) != len(self.spans):
            return err
        rest, hidden = self._lines_out()
        if hidden is None:
            return err
        taken = _lines_of(filled, fills)
        if any(a <= err.start < b for a, b in taken) or _without(filled, taken) != rest:
            return err
        shift = sum(b - a for a, b in taken if b <= err.start)
        return None if (err.start - shift, err.end - shift, err.message) == (hidden.start, hidden.end, hidden.message) else err

    def _lines_out(self) -> tuple[bytes, CompileError | None]:
        """The region with its holes' lines taken out, and its first compile error where that is
        away from where they were (one right there is theirs: a body their header left behind)."""
        if self._hidden is None:
            taken = _lines_of(self._data, self.spans)
            rest = _without(self._data, taken)
            err = first_error(rest)
            points = [a - sum(d - c for c, d in taken[:k]) for k, (a, _) in enumerate(taken)]
            self._hidden = rest, None if err is None or _at_hole(rest, err, [(p, p) for p in points]) else err
        return self._hidden


def _lines_of(data: bytes, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The whole lines (line breaks included) that ``spans`` are on, merged, in order."""
    lines: list[tuple[int, int]] = []
    for a, b in spans:
        a, b = line_start(data, a), line_end(data, b)
        if lines and a <= lines[-1][1]:
            lines[-1] = (lines[-1][0], max(b, lines[-1][1]))
        else:
            lines.append((a, b))
    return lines


def _without(data: bytes, ranges: list[tuple[int, int]]) -> bytes:
    """``data`` without the (ordered, disjoint) byte ``ranges``."""
    parts, at = [], 0
    for a, b in ranges:
        parts.append(data[at:a])
        at = b
    return b"".join(parts) + data[at:]


def _at_hole(data: bytes, err: CompileError, spans: list[tuple[int, int]]) -> bool:
    """Does the baseline error sit on a line from a hole's first to the first non-blank line
    after its end, or between the hole and the last significant character before it
    (``expected an indented block`` after a header whose body is the hole: CPython places it
    at the header's line break, or, where blank lines follow the hole, at the next
    statement), or is it a bracket before the hole that is never closed, or in the lines that go
    on from a hole's line (:func:`_continued`)?"""
    if "was never closed" in err.message and any(err.start <= a for a, _ in spans):
        return True  # a bracket open at a hole: the fill may close it
    if err.message.startswith(("IndentationError", "TabError")) and any(_left_behind(data, a, b, err.start) for a, b in spans):
        return True  # a body the hole's cut left behind, whose dedent CPython finds some lines on
    if any(_continued(data, a, b, err.start) for a, b in spans):
        return True  # in the lines that go on from the hole's (a bracket's contents whose opener it took)
    for a, b in spans:
        lo, blank_end = blank_around(data, a, b)
        lo = min(line_start(data, a), lo)
        hi = line_end(data, max(line_end(data, b), blank_end))
        if err.start <= hi and lo <= err.end:
            return True
    return False


def _left_behind(data: bytes, start: int, end: int, at: int) -> bool:
    """Does byte ``at`` lie in the lines right after a hole (bytes ``start`` to ``end``) that are all,
    its own line included, indented deeper than the last line of code before the hole: the body of
    a block whose header the hole took, left behind?"""
    if at < end:
        return False
    before = [line for line in data[: line_start(data, start)].split(b"\n") if line.strip()]
    if not before:
        return False
    floor = indent_width(before[-1])
    lines = data[line_start(data, end) : line_end(data, at)].split(b"\n")
    return all(indent_width(line) > floor for line in lines if line.strip())


def _continued(data: bytes, start: int, end: int, at: int) -> bool:
    """Does byte ``at`` lie in the lines right after a hole's line (bytes ``start`` to ``end``)
    that are all indented deeper than that line: what goes on from it (the contents of a bracket it
    opens, the body of a block it heads), whatever a cut there left them? A hole on an empty line
    has the indentation the fill gives it: unknown, so nothing goes on from it."""
    first = line_end(data, end)
    own = data[line_start(data, start) : first]
    if at < first or own.strip(b"\r\n") == b"":
        return False
    width = indent_width(own)
    lines = data[first : line_end(data, at)].split(b"\n")
    return all(indent_width(line) > width for line in lines if line.strip())


# An ended line in the REPL's mode: a block header reads as "incomplete input". A cut-off line is
# parsed as it is: the parser then finds an error before an open bracket that the REPL's mode hides.
_ENDED_FLAGS = codeop.PyCF_ALLOW_INCOMPLETE_INPUT | codeop.PyCF_DONT_IMPLY_DEDENT | ast.PyCF_ONLY_AST
# A clause that continues a compound statement, judged after a statement it can continue.
_CLAUSE_CONTEXT = {"elif": "if 1:\n pass\n", "else": "if 1:\n pass\n", "except": "try:\n pass\n",
                   "finally": "try:\n pass\n", "case": "match x:\n "}
_HEAD = re.compile(r"[^\W\d]\w*")
_WORD_END = re.compile(r"\w*$")
_DEF_HEAD = re.compile(r"(async\s+)?def\s")
_OPERATOR_END = re.compile(r"[-+*/%@&|^~<>=!:.]*$")
_OPERATOR_GROWTH = ("=", ">", "*", "/", "<", ".", "..")  # what turns a half-written operator into a whole one


_GROWING_WORDS = tuple(keyword.kwlist + keyword.softkwlist)
_STRING_PREFIX = re.compile(r"(?i)[rbuft]{1,2}")


def _may_grow(word: str) -> bool:
    """Could a line's last word, cut off, still grow into one that mends an error at it? Only
    into a keyword (``i`` into ``if``), a string's prefix (``f`` of ``f"..."``) or a number's
    next digits; an identifier that grows stays an identifier."""
    return (not _HEAD.fullmatch(word) or bool(_STRING_PREFIX.fullmatch(word))
            or any(k.startswith(word) for k in _GROWING_WORDS))


@functools.lru_cache(maxsize=16384)
def line_broken(line: str, ended: bool) -> bool:
    """Is a Python logical line certainly wrong, whatever comes after it?

    ``line`` runs from the line's first significant character (continuation lines included).
    ``ended``: its line break has come, so it must be a whole simple statement or a block
    header (``if x:``, ``else:``, ``@decorator``). Otherwise the text is cut off anywhere, and
    only an error CPython places before the word the text ends in counts, and not one that
    cut-off text draws (an open bracket or string, "expected ':'", a number or name half
    written). Unsure means not broken.
    """
    if not line.strip():
        return False
    if _duplicate_parameter(line):
        return True
    head = _HEAD.match(line)
    contexts = ["", _CLAUSE_CONTEXT.get(head.group(0) if head else "", "")]
    return all(_line_error(before, line, ended) for before in dict.fromkeys(contexts))


def _duplicate_parameter(line: str) -> bool:
    """Is ``line`` a def (maybe cut off) that names a parameter twice? Only whole names count
    (the last word of a cut-off line may still grow). The compiler's symbol table says so, not
    the parser: no ``ast`` check of a line sees it, and a cut-off line does not compile."""
    if not _DEF_HEAD.match(line) or "lambda" in line:  # a lambda's parameters sit among the def's
        return False
    names = _parameter_names(line)
    return len(names) != len(set(names))


def _parameter_names(line: str) -> list[str]:
    """The whole parameter names of a def's head, in order (the text after the def's name)."""
    skip = (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.ENDMARKER)
    toks = [t for t in _tokens(line) if t.type not in skip]
    names, depth = [], 0
    for k, tok in enumerate(toks):
        if tok.type == tokenize.OP and tok.string in "([{":
            depth += 1
        elif tok.type == tokenize.OP and tok.string in ")]}":
            depth -= 1
            if depth == 0:
                break  # the parameter list ends
        elif (depth == 1 and tok.type == tokenize.NAME and k + 1 < len(toks)
              and toks[k - 1].string in ("(", ",", "*", "**")):
            names.append(tok.string)  # a token follows it: the name is whole
    return names


def _tokens(line: str) -> list[tokenize.TokenInfo]:
    """Python's tokens of ``line``, as far as a cut-off line can be read."""
    toks = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(line).readline):
            toks.append(tok)
    except (tokenize.TokenError, SyntaxError):
        pass  # the end of a cut-off line: what came before it is read
    return toks


def _closing(line: str) -> str:
    """The brackets that close what ``line`` (cut off) leaves open, innermost first."""
    pairs, stack = {"(": ")", "[": "]", "{": "}"}, []
    for tok in _tokens(line):
        if tok.type == tokenize.OP and tok.string in pairs:
            stack.append(pairs[tok.string])
        elif tok.type == tokenize.OP and tok.string in ")]}" and stack:
            stack.pop()
    return "".join(reversed(stack))


def _line_error(before: str, line: str, ended: bool, grow: bool = True, closers: str = "") -> bool:
    """Does CPython place a certain error in ``line`` (see line_broken)? ``closers``: brackets
    put after a cut-off line that leaves some open, so that errors inside them show (only
    errors before the closers count)."""
    src = before + line + closers + ("\n" if ended else "")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(src, "<line>", "exec", _ENDED_FLAGS if ended else ast.PyCF_ONLY_AST, dont_inherit=True)
        return False
    except SyntaxError as e:
        msg = e.msg or ""
        if "was never closed" in msg and not ended and not closers:
            closing = _closing(line)
            return bool(closing) and _line_error(before, line, False, grow, closing)
        if msg == "incomplete input" or "was never closed" in msg:
            return False
        if ended:
            return True
        if msg.startswith(("expected", "unterminated")) or not e.lineno or not e.offset:
            return False
        rows = src.split("\n")

        def offset(lineno: int, col: int) -> int:  # in ``line``
            return sum(len(r) + 1 for r in rows[: lineno - 1]) + col - 1 - len(before)

        at = offset(e.lineno, e.offset)
        text = line.rstrip()
        whole = len(text) < len(line)  # the last word is whole
        if whole and not closers:
            return 0 <= at < len(text)
        word_at = len(text) if whole else _WORD_END.search(text).start()
        if closers:  # made up: only an error wholly before the last word (and what follows it) counts
            end = offset(e.end_lineno, e.end_offset) if e.end_lineno and e.end_offset else None
            # Only the parser's plain verdicts: others speak of what the closers cut short (a bare
            # ``*,`` with no name after it yet). A forgotten comma's span is loose across lines.
            plain = msg == "invalid syntax" or (msg.endswith("forgot a comma?") and e.lineno == e.end_lineno)
            if not plain or end is None or at < 0 or end >= word_at:
                return False
        elif at < 0 or at > word_at or (at == word_at and _may_grow(text[word_at:])):
            return False  # at the last word, which may yet grow (``i`` into ``if``)
        if not grow or not _OPERATOR_END.search(text).group(0):
            return True
        # A half-written operator (``=`` of ``==``, ``.`` of ``...``) may draw an error before it: one
        # that a longer operator does not have is not certain.
        return all(_line_error(before, line + c, False, False, closers) for c in _OPERATOR_GROWTH)
    except (ValueError, RecursionError, MemoryError, OverflowError):
        return False
