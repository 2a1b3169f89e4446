"""Refactor recipes: where the sites of a batch edit are, found with tree-sitter queries.

A recipe turns a file's text into :class:`Site` s: a span of the text (empty = an insertion
point) that the edit replaces with ``before + fill + after``, where the model writes ``fill``.
Built-in recipes:

- ``holes``: explicit ``<FILL>`` / ``<FILL:N>`` markers (infill/text/holes.py); any text file; all
  markers of a file are filled jointly, in one request;
- ``docstrings``: Python functions and classes without a docstring get a one-line docstring;
- ``annotate``: missing return annotations (Python ``-> T``, TypeScript ``: T``);
- ``bodies``: functions whose body is only ``pass``, ``...`` or ``raise NotImplementedError``
  (Python) or ``todo!()`` / ``unimplemented!()`` (Rust) get a body;
- ``query FILE.scm``: the user's own query; see the conventions below.

Each query-based recipe is ``grammars/<lang>/refactor-<recipe>.scm``; a language has the
recipe when that file exists. Query conventions (the same for the user's queries):

- capture ``@hole``: the node's text is replaced by the fill; ``@hole.before`` /
  ``@hole.after``: the fill is inserted just before / after the node; ``@name`` (optional):
  what the site is called in messages;
- ``(#set! before "...")`` / ``(#set! after "...")``: text written around the fill (``{indent}``
  stands for the indentation of the node's line); ``(#set! max_tokens "N")``: the hole's budget;
  ``(#set! filter "NAME")``: a check in :data:`FILTERS` that each site must pass.

Sites that overlap an earlier one are dropped. Pure functions of the text; no torch, no I/O
except reading the recipe's query file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from infill.errors import InputError
from infill.text.holes import DEFAULT_MAX_TOKENS, MAX_HOLE_TOKENS, find_holes
from infill.syntax.languages import GRAMMARS_DIR, Grammar, LanguageSpec
from infill.text.textpos import byte_to_str

HOLE_CAPTURES = ("hole", "hole.before", "hole.after")

# Compiled queries by (language, source), never freed: with tree-sitter 0.26.1, compiling a query
# after a query with predicates and settings has been run and freed can crash the process.
_COMPILED: dict[tuple[str, str], object] = {}


@dataclass(frozen=True)
class Site:
    """One place to edit: text[start:end] becomes ``before + fill + after``."""

    start: int  # str offsets into the file's text
    end: int
    before: str = ""
    after: str = ""
    max_tokens: int = DEFAULT_MAX_TOKENS
    name: str = ""  # what the site belongs to (a function's name), for messages

    def edit(self, fill: str) -> str:
        return self.before + fill + self.after


# ---------------------------------------------------------------------------------- filters


def _decorators(func) -> list[str]:
    parent = func.parent
    if parent is None or parent.type != "decorated_definition":
        return []
    return [d.text.decode("utf-8", "replace") for d in parent.named_children if d.type == "decorator"]


def _is_docstring(node) -> bool:
    return (
        node.type == "expression_statement"
        and node.named_child_count > 0
        and node.named_children[0].type in ("string", "concatenated_string")
    )


def _own_line(node, data: bytes) -> bool:
    line_start = data.rfind(b"\n", 0, node.start_byte) + 1
    return not data[line_start : node.start_byte].strip()


def no_docstring(node, captures: dict, data: bytes, path: str) -> bool:
    """``node`` (a body's first statement) is not a docstring and starts its own line."""
    statements = [c for c in node.parent.named_children if c.type != "comment"]
    if statements and _is_docstring(statements[0]):
        return False
    return _own_line(node, data)


def stub_body(node, captures: dict, data: bytes, path: str) -> bool:
    """``node`` is the body's only statement (besides comments and a leading docstring), and the
    function is not an @overload, an @abstractmethod, a Protocol's method or in a .pyi stub."""
    if path.endswith(".pyi"):
        return False
    block = node.parent
    others = [c for c in block.named_children if c.type != "comment" and c != node]
    if others and not (len(others) == 1 and _is_docstring(others[0]) and others[0].start_byte < node.start_byte):
        return False
    func = block.parent
    if any(re.search(r"\b(overload|abstractmethod)\b", d) for d in _decorators(func)):
        return False
    owner = func.parent.parent if func.parent is not None and func.parent.type == "decorated_definition" else func.parent
    while owner is not None and owner.type not in ("class_definition", "module"):
        owner = owner.parent
    if owner is not None and owner.type == "class_definition":
        supers = owner.child_by_field_name("superclasses")
        if supers is not None and b"Protocol" in supers.text:
            return False
    return True


Filter = Callable[[object, dict, bytes, str], bool]
FILTERS: dict[str, Filter] = {"no_docstring": no_docstring, "stub_body": stub_body}


# ---------------------------------------------------------------------------------- recipes


class Recipe:
    name = ""
    joint = False  # all sites of a file go to the engine in one request

    def accepts(self, spec: LanguageSpec | None) -> bool:
        raise NotImplementedError

    def sites(self, text: str, grammar: Grammar | None, path: str, max_tokens: int | None = None) -> list[Site]:
        raise NotImplementedError


class MarkerRecipe(Recipe):
    """``<FILL>`` markers: any text file, all of a file's holes filled jointly."""

    name = "holes"
    joint = True

    def accepts(self, spec: LanguageSpec | None) -> bool:
        return True

    def sites(self, text: str, grammar: Grammar | None, path: str, max_tokens: int | None = None) -> list[Site]:
        _, holes = find_holes(text, max_tokens or DEFAULT_MAX_TOKENS)  # InputError on a bad marker
        out, removed = [], 0
        for h in holes:
            start = h.start + removed  # where the marker stands in the original text
            end = text.index(">", start) + 1
            removed += end - start
            out.append(Site(start, end, max_tokens=h.max_tokens))
        return out


class QueryRecipe(Recipe):
    """Sites from a tree-sitter query: a built-in one per language, or the user's own."""

    def __init__(self, name: str, source: str | None = None, language: str | None = None, origin: str = ""):
        self.name = name
        self.source = source  # the user's query text; None = grammars/<lang>/refactor-<name>.scm
        self.language = language  # for a user's query: the one language it is written for
        self.origin = origin or name

    def _file(self, spec: LanguageSpec) -> Path:
        return GRAMMARS_DIR / spec.queries / f"refactor-{self.name}.scm"

    def accepts(self, spec: LanguageSpec | None) -> bool:
        if spec is None:
            return False
        if self.source is not None:
            return spec.name == self.language
        return self._file(spec).is_file()

    def compile(self, grammar: Grammar):
        """The compiled query for ``grammar``; InputError if it has errors or no hole capture."""
        source = self.source if self.source is not None else self._file(grammar.spec).read_text(encoding="utf-8")
        key = (grammar.name, source)
        if key not in _COMPILED:
            import tree_sitter

            try:
                query = tree_sitter.Query(grammar.language, source)
            except tree_sitter.QueryError as e:
                raise InputError(f"{self.origin}: bad {grammar.name} query: {e}") from None
            _COMPILED[key] = query  # kept for good: see _COMPILED
            names = {query.capture_name(i) for i in range(query.capture_count)}
            if not names & set(HOLE_CAPTURES):
                raise InputError(f"{self.origin}: the query has no @hole, @hole.before or @hole.after capture")
            for i in range(query.pattern_count):
                settings = query.pattern_settings(i)
                if settings.get("filter") and settings["filter"] not in FILTERS:
                    raise InputError(f"{self.origin}: unknown filter {settings['filter']!r} (known: {', '.join(FILTERS)})")
                if "max_tokens" in settings and not _budget(settings["max_tokens"]):
                    raise InputError(f"{self.origin}: max_tokens must be a number from 1 to {MAX_HOLE_TOKENS}")
        return _COMPILED[key]

    def sites(self, text: str, grammar: Grammar | None, path: str, max_tokens: int | None = None) -> list[Site]:
        import tree_sitter

        assert grammar is not None
        query = self.compile(grammar)
        data = text.encode("utf-8", "surrogatepass")
        tree = grammar.parse(data)
        found: list[Site] = []
        for pattern, captures in tree_sitter.QueryCursor(query).matches(tree.root_node):
            settings = query.pattern_settings(pattern)
            check = FILTERS.get(settings.get("filter") or "")
            names = captures.get("name") or []
            name = names[0].text.decode("utf-8", "replace") if names else ""
            budget = max_tokens or _budget(settings.get("max_tokens", "")) or DEFAULT_MAX_TOKENS
            for kind in HOLE_CAPTURES:
                for node in captures.get(kind, []):
                    if check is not None and not check(node, captures, data, path):
                        continue
                    s, e = byte_to_str(data, node.start_byte), byte_to_str(data, node.end_byte)
                    if kind == "hole.before":
                        e = s
                    elif kind == "hole.after":
                        s = e
                    line_start = text.rfind("\n", 0, s) + 1
                    indent = re.match(r"[ \t]*", text[line_start:]).group()
                    before = settings.get("before", "").replace("{indent}", indent)
                    after = settings.get("after", "").replace("{indent}", indent)
                    found.append(Site(s, e, before, after, budget, name))
        return without_overlaps(found)


def _budget(value: str) -> int | None:
    try:
        n = int(value)
    except (TypeError, ValueError):
        return None
    return n if 1 <= n <= MAX_HOLE_TOKENS else None


def without_overlaps(sites: list[Site]) -> list[Site]:
    """Sites in text order; one that overlaps (or inserts at the same place as) an earlier is dropped."""
    out: list[Site] = []
    for s in sorted(sites, key=lambda s: (s.start, s.end)):
        if out and (s.start < out[-1].end or (s.start, s.end) == (out[-1].start, out[-1].end)):
            continue
        out.append(s)
    return out


BUILTIN = ("holes", "docstrings", "annotate", "bodies")


def recipe(name: str, query_file: str | None = None, language: str = "python") -> Recipe:
    """The recipe called ``name``; ``query`` needs ``query_file`` (InputError if unreadable)."""
    if name == "holes":
        return MarkerRecipe()
    if name in BUILTIN:
        return QueryRecipe(name)
    if name == "query":
        if not query_file:
            raise InputError("the query recipe needs a query file: infill refactor query FILE.scm PATH...")
        try:
            source = Path(query_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise InputError(f"{query_file}: cannot read the query ({getattr(e, 'strerror', None) or e})") from None
        return QueryRecipe("query", source=source, language=language, origin=query_file)
    raise InputError(f"unknown recipe {name!r} (use one of: {', '.join(BUILTIN)}, query FILE.scm)")
