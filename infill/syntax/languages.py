"""The language registry: which tree-sitter grammar, queries and token rules belong to a language.

``grammars/languages.toml`` (installed as ``infill.grammars``) lists each language (its PyPI grammar wheel, LSP language ids,
file extensions, bracket pairs, quote and comment delimiters); ``grammars/<lang>/*.scm``
hold its queries (``boundaries``, ``strings``, ``brackets``). ``grammar(name)`` looks a language
up by LSP id, file extension or path and returns a :class:`Grammar` whose tree-sitter language,
parser and queries load lazily.

An unknown language, or one whose grammar wheel is not installed or does not load, gives
``None`` and one log line per name; it never raises. It parses only when asked (:meth:`Grammar.parse`).
"""

from __future__ import annotations

import functools
import importlib
import logging
import re
import threading
import tomllib
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import infill.grammars as grammars_package

log = logging.getLogger(__name__)

GRAMMARS_DIR = Path(grammars_package.__file__).parent
QUERY_NAMES = ("boundaries", "strings", "brackets")
KEPT_TREES = 8  # whole parses kept per grammar (Grammar.parse)

_warned: set[str] = set()
_lock = threading.Lock()


CLOSED_CHAR = re.compile(r"'(?:\\[^\n']{1,10}|[^\\'\n])'")  # a char literal where ``char_literal`` is "closed"


@dataclass(frozen=True)
class LanguageSpec:
    """One table of languages.toml."""

    name: str
    package: str
    function: str
    pin: str
    lsp_ids: tuple[str, ...]
    extensions: tuple[str, ...]
    queries: str
    brackets: dict[str, str]  # opener -> closer
    quotes: tuple[str, ...]  # longest first
    multiline: frozenset[str] = frozenset()
    raw: frozenset[str] = frozenset()
    line_comment: tuple[str, ...] = ()
    block_comment: tuple[tuple[str, str], ...] = ()
    hooks: str | None = None  # the package infill/lang/<hooks>/ of the language's hooks (infill/syntax/hooks.py)
    char_literal: str | None = None  # "closed": a ' starts a char literal only where one closes it (else a lifetime)
    directive: tuple[str, ...] = ()  # what starts a line that is not code for the layout (C's preprocessor lines)
    separators: tuple[str, ...] = ()  # what may follow a closed bracket to end a list's item or a statement
    # a word that may follow a block's closer on its line -> the word its opening line begins with (`catch` -> `try`)
    continuations: dict[str, str] = field(default_factory=dict)
    block_lines: tuple[str, ...] = ()  # example lines that open a block (`type T struct {`), tried where a document has none
    labels: tuple[str, ...] = ()  # words of lines that may sit at their block's opening line's indentation (`case`)
    block_tails: tuple[str, ...] = ()  # example ends of lines that open several brackets (`(() => {`), tried where a document has none

    @property
    def openers(self) -> dict[str, str]:
        """Closer -> the one-character opener it closes (``{`` for ``}``, never a template's ``${``)."""
        return {c: o for o, c in self.brackets.items() if len(o) == 1}

    @classmethod
    def from_table(cls, name: str, t: dict) -> "LanguageSpec":
        return cls(
            name=name,
            package=t["package"],
            function=t.get("function", "language"),
            pin=t.get("pin", ""),
            lsp_ids=tuple(t.get("lsp_ids", [name])),
            extensions=tuple(t.get("extensions", [])),
            queries=t.get("queries", name),
            brackets=dict(t.get("brackets", {"(": ")", "[": "]", "{": "}"})),
            quotes=tuple(sorted(t.get("quotes", []), key=len, reverse=True)),
            multiline=frozenset(t.get("multiline", [])),
            raw=frozenset(t.get("raw", [])),
            line_comment=tuple(t.get("line_comment", [])),
            block_comment=tuple((a, b) for a, b in t.get("block_comment", [])),
            hooks=t.get("hooks"),
            char_literal=t.get("char_literal"),
            directive=tuple(t.get("directive", [])),
            separators=tuple(t.get("separators", [])),
            continuations=dict(t.get("continuations", {})),
            block_lines=tuple(t.get("block_lines", [])),
            labels=tuple(t.get("labels", [])),
            block_tails=tuple(t.get("block_tails", [])),
        )


@dataclass
class Grammar:
    """A language with its tree-sitter objects, loaded on first use (thread-safe)."""

    spec: LanguageSpec
    _language: object = None
    _queries: dict = field(default_factory=dict)
    _local: threading.local = field(default_factory=threading.local)
    _trees: OrderedDict = field(default_factory=OrderedDict, compare=False, repr=False)  # recent whole parses: bytes -> tree
    _trees_lock: threading.Lock = field(default_factory=threading.Lock, compare=False, repr=False)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def language(self):
        """The ``tree_sitter.Language`` (raises ImportError/OSError if the wheel is unusable)."""
        if self._language is None:
            import tree_sitter

            module = importlib.import_module(self.spec.package)
            self._language = tree_sitter.Language(getattr(module, self.spec.function)())
        return self._language

    def parser(self):
        """A ``tree_sitter.Parser`` for this thread (parsers are not shared between threads)."""
        p = getattr(self._local, "parser", None)
        if p is None:
            import tree_sitter

            p = self._local.parser = tree_sitter.Parser(self.language)
        return p

    def parse(self, data: bytes, old_tree=None):
        """The tree of ``data``. A parse from scratch is the same for the same bytes, so the last
        few are kept (:data:`KEPT_TREES`): a request judges one document several times over (its
        constraint, its retry, the check that an empty fill parses), and each would reparse a large
        file whole. A tree is never edited in place (Document.parse edits a copy), so sharing one
        is safe. A parse from an edited ``old_tree`` is incremental, never kept."""
        if old_tree is not None:
            return self.parser().parse(data, old_tree=old_tree)
        with self._trees_lock:
            tree = self._trees.get(data)
            if tree is not None:
                self._trees.move_to_end(data)
                return tree
        tree = self.parser().parse(data)
        with self._trees_lock:
            self._trees[data] = tree
            while len(self._trees) > KEPT_TREES:
                self._trees.popitem(last=False)
        return tree

    def query(self, name: str):
        """The compiled ``tree_sitter.Query`` of ``grammars/<queries>/<name>.scm``."""
        if name not in self._queries:
            import tree_sitter

            source = (GRAMMARS_DIR / self.spec.queries / f"{name}.scm").read_text(encoding="utf-8")
            self._queries[name] = tree_sitter.Query(self.language, source)
        return self._queries[name]

    def captures(self, name: str, node, start: int = 0, end: int | None = None) -> dict[str, list]:
        """Captures of query ``name`` under ``node`` intersecting bytes [start, end)."""
        import tree_sitter

        cursor = tree_sitter.QueryCursor(self.query(name))
        if start or end is not None:
            cursor.set_byte_range(start, end if end is not None else node.end_byte)
        return cursor.captures(node)


@functools.cache
def specs() -> dict[str, LanguageSpec]:
    """Every language in languages.toml, by name."""
    data = tomllib.loads((GRAMMARS_DIR / "languages.toml").read_text(encoding="utf-8"))
    return {name: LanguageSpec.from_table(name, t) for name, t in data.items()}


@functools.cache
def _index() -> dict[str, str]:
    """LSP id, extension (with and without the dot) and name -> language name."""
    out: dict[str, str] = {}
    for spec in specs().values():
        for ext in spec.extensions:
            out.setdefault(ext.lower(), spec.name)
            out.setdefault("." + ext.lower(), spec.name)
        for key in (*spec.lsp_ids, spec.name):
            out[key.lower()] = spec.name
    return out


def spec_for(language: str | None) -> LanguageSpec | None:
    """The spec for an LSP language id, a file extension (``py``, ``.py``) or a path; else None."""
    if not language:
        return None
    key = language.strip().lower()
    name = _index().get(key)
    if name is None and ("/" in key or "\\" in key or "." in key):
        name = _index().get(Path(key).suffix)
    return specs().get(name) if name else None


_grammars: dict[str, Grammar | None] = {}


def grammar(language: str | None) -> Grammar | None:
    """A loaded Grammar for ``language``, or None (logged once per name) if unknown or unusable."""
    if not language:
        return None
    spec = spec_for(language)
    if spec is None:
        _warn_once(language, "no grammar for language %r: filling without syntax constraints", language)
        return None
    with _lock:
        if spec.name not in _grammars:
            g = Grammar(spec)
            try:
                g.language  # noqa: B018 - load now so failures surface here, once
                for q in QUERY_NAMES:
                    g.query(q)
            except Exception as e:  # ImportError, OSError, ValueError (ABI), QueryError
                log.warning("grammar for %s (%s) is unavailable: %s; filling without syntax constraints", spec.name, spec.pin, e)
                g = None
            _grammars[spec.name] = g
        return _grammars[spec.name]


def _warn_once(key: str, msg: str, *args) -> None:
    with _lock:
        if key in _warned:
            return
        _warned.add(key)
    log.warning(msg, *args)
