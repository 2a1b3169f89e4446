"""Python's block structure read from the tree: the region a fill is judged in, the indentation
levels and seam at a hole.

- :func:`method_region`: the method (or class) of a top-level class that holds the holes, which
  parses on its own after ``if 1:`` (``PythonHooks.nested_region``); where the tree is one ERROR
  around the holes, :func:`offside_method_region` reads the same from the lines' indentation;
- :func:`region_end`: the top-level region's end past the lines its layout makes its own
  (``PythonHooks.region_end``);
- :func:`hole_context`: Python's part of a hole's context (:class:`OffsideContext`): the
  indentation levels open at it, the logical line before it, the seam with the text after it.

Everything in UTF-8 bytes, as infill/syntax/document.py. It does not steer or sample. Reading
the lines never names a region the tree would not (tests/test_constraints.py checks them against
each other where the tree can tell); it may name none where the tree would.
"""

from __future__ import annotations

import re

from infill.lang.python.offside import OffsideContext
from infill.syntax.document import Document, last_leaf
from infill.text.textpos import indent_width, line_end, line_start

MAX_LINE_BEFORE = 1000  # bytes of a logical line before a hole inside brackets that steering checks as a line


_DEFINITION = re.compile(rb"[ \t]*(@|def\b|async[ \t]+def\b|class\b)")


def method_region(root, data: bytes, spans: list[tuple[int, int]]) -> tuple[int, int] | None:
    """Bytes [start, end) of the whole lines of the method (or class) in the body of a
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


def region_end(data: bytes, start: int, end: int) -> int:
    """Past the lines after the region [start, end) (whole lines) that are indented deeper than
    its first line: by the offside rule they are the body of its last statement, though a cut
    document's tree may make them statements of their own (a function's header cut down to
    ``d``, its body after it; a fill that writes the header is judged with that body). Blank lines
    after its last such line stay out."""
    first = data[start : line_end(data, start)]
    stop = offside_end(data, end, len(first) - len(first.lstrip(b" \t")))
    while stop > end and not data[line_start(data, stop - 1) : stop].strip():
        stop = line_start(data, stop - 1)
    return stop


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


def nested_region(root, data: bytes, spans: list[tuple[int, int]]) -> tuple[int, int, bytes] | None:
    """:func:`method_region` (:func:`offside_method_region` where the tree cannot tell) with the
    header line after which its lines parse on their own."""
    method = method_region(root, data, spans)
    if method is None and _in_error(root, spans):
        method = offside_method_region(root, data, spans)
    if method is None:
        return None
    start, end = method
    return start, end, b"if 1:\r\n" if data[:end].endswith(b"\r\n") else b"if 1:\n"


def _in_error(root, spans: list[tuple[int, int]]) -> bool:
    """Whether the top-level node that holds the holes is an ERROR."""
    lo, hi = min(s for s, _ in spans), max(e for _, e in spans)
    node = next((c for c in root.children if c.start_byte <= lo and hi <= c.end_byte), None)
    return node is not None and node.is_error


def _first_code(data: bytes, at: int) -> int:
    """The first byte of the line starting at ``at`` after its indentation."""
    end = line_end(data, at)
    return end - len(data[at:end].lstrip(b" \t"))


def _continues(root, data: bytes, at: int) -> bool:
    """Whether the line starting at ``at`` goes on with the line before, whatever its indentation:
    it starts by closing a bracket (a multi-line header's ``) -> None:``) or inside a string (by the
    tree: strings are lexed within an ERROR too)."""
    first = _first_code(data, at)
    if data[first : first + 1] in (b")", b"]", b"}"):
        return True
    node = root.descendant_for_byte_range(first, first + 1)
    while node is not None and node.type not in ("string", "string_content", "concatenated_string"):
        node = node.parent
    return node is not None


def _decorated_from(root, data: bytes, at: int, indent: int) -> int:
    """The first line of the decorators of the definition whose line starts at ``at`` (``at``
    where it has none): the lines above it at its indentation that start with ``@``, over the
    lines of their brackets between them."""
    start = k = at
    while k > 0:
        k = line_start(data, k - 1)
        first = _first_code(data, k)
        if first - k == indent and data.startswith(b"@", first):
            start = k
        elif not data[first : line_end(data, k)].strip() or (first - k <= indent and not _continues(root, data, k)):
            break
    return start


def offside_method_region(root, data: bytes, spans: list[tuple[int, int]]) -> tuple[int, int] | None:
    """:func:`method_region` read from the lines' indentation, for a document whose tree cannot
    tell (the top-level node around the holes is an ERROR: a cut ``try:`` whose ``except`` stays
    below makes one of most of a file, which every judged fill would reparse and compile whole).

    The lines that hold the holes are those before them each indented less than the one after,
    skipping blank and comment lines and lines that go on with the one before (:func:`_continues`).
    The outermost must be a top-level ``class``; the region is the innermost definition reached
    through classes only (with its decorators), to the next line indented no deeper than it that
    does not go on with the one before. None where there is none (a hole on a blank line's margin,
    or on a definition's own first line). The caller checks that the region parses as one block
    (``if 1:`` before it).
    """
    lo, hi = min(s for s, _ in spans), max(e for _, e in spans)
    row = line_start(data, lo)
    limit = _first_code(data, row) - row if data[row : line_end(data, row)].strip() else lo - row  # the holes' line's indentation
    chain = []  # (line start, indent, code) of the lines that hold the holes, innermost first
    at = row
    while at > 0 and limit > 0:
        at = line_start(data, at - 1)
        first = _first_code(data, at)
        code, indent = data[first : line_end(data, at)], first - at
        if indent >= limit or not code.strip() or code.startswith(b"#") or _continues(root, data, at):
            continue
        chain.append((at, indent, code))
        limit = indent
    chain.reverse()
    if not chain or chain[0][1] or not re.match(rb"class\b", chain[0][2]):
        return None
    found = None
    for at, indent, code in chain[1:]:
        if not _DEFINITION.match(code) or code.startswith(b"@"):  # not a definition, or in a decorator's brackets
            break
        start = _decorated_from(root, data, at, indent)
        end = offside_end(data, line_end(data, at), indent)
        while end < len(data) and _continues(root, data, end):
            end = offside_end(data, line_end(data, end), indent)
        if end < hi:
            break
        found = start, end
        if not re.match(rb"class\b", code):
            break
    return found


def _row_indent(data: bytes, node) -> int:
    row_start = node.start_byte - node.start_point[1]
    end = data.find(b"\n", row_start)
    return indent_width(data[row_start : end if end >= 0 else len(data)])



def hole_context(doc: Document, i: int, base: tuple[str, ...] | None, opened: list[int]) -> OffsideContext:
    """Python's part of the context of hole ``i`` of ``doc``, where the brackets ``base`` are open
    before it (``opened``: where each opened); ``base`` None: the hole is in a string or comment."""
    if base is None:
        return OffsideContext()
    data, root = doc.data, doc.tree.root_node
    s, e = doc.spans[i]
    row = line_start(data, s)
    before = data[row:s]
    ctx = levels_at(root, data, s)
    continued = data[max(0, row - 3) : row].rstrip(b"\r\n").endswith(b"\\")
    if not base and not continued:
        ctx["line_before"] = before.decode("utf-8", "replace").lstrip(" \t\f")
        last = data[:row].rstrip().rsplit(b"\n", 1)[-1]
        ctx["after_decorator"] = not before.strip() and last.lstrip().startswith(b"@")
    elif base and not continued and s - line_start(data, opened[0]) <= MAX_LINE_BEFORE:
        # Inside brackets: the logical line from the line its outermost open bracket is on (one
        # that a bracket closed there began earlier reads as broken already: it is not judged).
        ctx["line_before"] = data[line_start(data, opened[0]) : s].decode("utf-8", "replace").lstrip(" \t\f")
    stop = doc.spans[i + 1][0] if i + 1 < len(doc.spans) else len(data)
    if stop == len(data):  # the seam is only known when no other hole comes first
        nl = data.find(b"\n", e)
        here, next_ = _first_line(data[e:]), (0, False) if nl < 0 else _first_line(data[nl + 1 :])
        rest = data[e : len(data) if nl < 0 else nl].split(b"#")[0].strip()
        ctx.update(seam_here=here[0], clause_here=here[1], seam_next=next_[0], clause_next=next_[1], colon_rest=rest == b":",
                   decorates_here=bool(_DEFINITION.match(data, e)), decorates_next=nl >= 0 and bool(_DEFINITION.match(data, nl + 1)))
    return OffsideContext(**ctx)


_CLAUSES = (b"elif", b"else", b"except", b"finally")


def _first_line(data: bytes) -> tuple[int, bool]:
    """The indentation of the first line of ``data`` that is neither blank nor a comment
    (0: none), and whether it continues a compound statement (``elif``, ``else``, ...)."""
    for line in data.split(b"\n"):
        body = line.strip()
        if body and not body.startswith(b"#"):
            word = (body.replace(b":", b" ").split() or [b""])[0]
            return indent_width(line), word in _CLAUSES
    return 0, False


def levels_with(doc: Document, fill: str) -> tuple[int, ...] | None:
    """The indentation levels at the start of ``doc``'s one hole with ``fill`` in it (a
    stand-in that mends the tree there), read in the judged region's tree; None where that tree
    has an error on the way up."""
    tree, data, spans = doc.parse([fill.encode("utf-8", "surrogatepass")])
    return levels_at(tree.root_node, data, spans[0][0])["levels"]


def levels_at(root, data: bytes, pos: int) -> dict:
    """The indentation levels open at byte ``pos`` (None where an error on the way up hides them),
    whether the last logical line before it ended with ':', and its last significant character."""
    last = last_leaf(root, pos)
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
