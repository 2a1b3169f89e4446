"""Language hooks: what the general syntax code asks a language beyond its languages.toml table.

The general code (document, steering, constraint, and the engine) knows brackets, strings and
comments from the table alone; everything else a language needs it asks the language's hooks:

- block structure: the steering lexer's line and block rules (:meth:`LanguageHooks.line_rules`,
  Python's offside rule) and the hook-owned part of a hole's context (:meth:`LanguageHooks.hole_context`);
- what may end a fill: those rules' ``can_end`` (the text after the hole must follow by them);
- shapes: what stand-in fills tell of a hole (:meth:`shape_of`, :meth:`first_round`,
  :meth:`strict`) and what that adds to the steering context (:meth:`steering_context`);
- scaffolds: a hole filled as several (:meth:`scaffold`, :meth:`join_scaffold`);
- an optional compiler check of the judged region (:meth:`strict_check`);
- which region a fill is judged in (:meth:`nested_region`, :meth:`region_end`).

:class:`LanguageHooks` is the default, a brace language's: nothing beyond the table, so that adding
a brace language stays data only (a table in languages.toml and its queries). A language with
rules of its own (an indentation language) has a package ``infill/lang/<name>/`` whose ``hooks``
module holds ``HOOKS``, a subclass instance; :func:`hooks_for` finds it (languages.toml may name
the package: ``hooks = "python"``).

Invariant: no module of infill/syntax, infill/engine, infill/decode or infill/model tests a
language's name or imports infill.lang; they ask these hooks.
"""

from __future__ import annotations

import importlib
import importlib.util
import threading
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Protocol

from infill.syntax.languages import LanguageSpec, spec_for

if TYPE_CHECKING:
    from infill.protocol import FillRequest, FillResult
# Document, HoleContext and ErrorSpan in annotations are infill/syntax/document.py's (which imports
# this module: they are not imported here).

LANG_PACKAGE = "infill.lang"


@dataclass(frozen=True)
class Shape:
    """What a hole's fill must look like at its edges, as far as the language's hooks tell
    (a language may subclass it with more).

    Invariant: ``opener`` follows the last hole in what the model reads and goes into its fill,
    so the syntax checks judge that fill with it; ``closes``: the last hole's fill must close the
    brackets open before it that the text after it leaves open (a retry's); ``mends``: the last
    hole's fill must leave open the brackets that the text after it closes and nothing opens (a
    mend branch's, HoleContext.mends)."""

    opener: str = ""
    closes: bool = False
    mends: bool = False
    # The request's parsed document, for the syntax checks to reuse (not part of the shape).
    doc: "Document | None" = field(default=None, compare=False, repr=False)


class CompileCheck(Protocol):
    """A language's compiler as a second judge of a filled region (see :meth:`LanguageHooks.strict_check`)."""

    def error(self, filled: bytes, fills: list[tuple[int, int]] | None = None) -> Any:
        """The first error of the filled region (with ``start``, ``end``: bytes in it, and
        ``message``) that is the fills' (``fills``: their byte spans in it), or None."""


class LineRules(Protocol):
    """A language's line and block rules for the steering lexer (infill/syntax/steering.py), for
    one hole. Its state is one slot of the lexer's state (``LexState.lang``): hashable, immutable.

    During a scan the lexer calls ``begin`` and then the returned scan's ``newline``, ``space``,
    ``comment`` and ``code`` at each such character outside strings and comments, and ``end``.
    Each of those returns whether the scan still broke no rule of these (cumulative: once False,
    False); the lexer's verdict follows it at once (a broken scan stops popping brackets)."""

    def start(self) -> Any:
        """The state at the hole's start."""

    def begin(self, state: Any, text: str) -> "LineScan":
        """A scan of ``text`` (what the lexer scans: its kept-back tail and the new text) after ``state``."""

    def can_end(self, st) -> bool:
        """May the fill end after the lexer state ``st`` by these rules (its last line, and the
        text after the hole that follows it)?"""

    def owes(self, st) -> list[str]:
        """Texts of which one must come next when the model ranks nothing allowed (Python: a
        block header's ':')."""

    def due(self, st) -> list[str]:
        """Words that may come next when the model offers nothing allowed (a header's head's first word)."""

    def head_end(self, text: str) -> str | None:
        """Where the model's refused proposal ``text`` is the text after the hole (a header's
        ':'), the part of it before that (``""``: the fill ends there); None where it is not."""

    def ends_short(self) -> bool:
        """May a fill that nothing ranked may continue end where it may (a header's head alone)?"""

    def ends_wrong(self, st) -> bool:
        """Would a whole fill that ends after the lexer state ``st`` end where these rules never let
        one end, though it parses (Python: on a decorator that the text after the hole does not
        go on with its definition)? The judge asks it (RequestCheck.new_errors)."""


class LineScan(Protocol):
    """One scan of a text by a language's line rules (see :class:`LineRules`)."""

    at_line_start: bool  # only indentation so far on the current line (the lexer then hands it whitespace)

    def newline(self, i: int, depth: int) -> bool: ...  # a line break in code at text[i], inside depth brackets
    def space(self, c: str) -> bool: ...  # indentation at a line's start
    def comment(self) -> bool: ...  # a line comment starts
    def code(self, c: str, i: int, depth: int, final: bool) -> bool: ...  # a significant character at text[i]
    def end(self, i: int) -> tuple[Any, bool]: ...  # the state after the scan, stopped at text[i], and its verdict


class LanguageHooks:
    """The default hooks: a brace language, whose table in languages.toml says all there is.

    Every method answers "nothing of the language's own": no line rules, no shapes beyond the
    retry's ``closes``, no scaffold, no compiler, cuts and regions as the general code finds them.
    """

    name = "default"

    # -- block structure: steering ---------------------------------------------------------------

    def hole_context(self, doc: "Document", i: int, base: tuple[str, ...] | None, opened: list[int]) -> Any:
        """The language's part of hole ``i``'s context (``HoleContext.lang``), given the brackets
        open before it (``base``, and where each opened: ``opened``); ``base`` None: the hole is in
        a string or comment."""
        return None

    def line_rules(self, ctx: "HoleContext", closers: set[str]) -> LineRules | None:
        """The steering lexer's line and block rules for a hole of context ``ctx`` (``closers``: the
        language's closing brackets); None: brackets, strings and comments are all there is."""
        return None

    # -- shapes --------------------------------------------------------------------------------

    def no_shape(self) -> Shape:
        """The shape of a fill that stand-ins told nothing of (of the class this language's are)."""
        return Shape()

    def shape_of(self, request: "FillRequest") -> Shape:
        """What stand-in fills tell of the request's fill (the first round's, before :meth:`first_round`)."""
        return Shape()

    def first_round(self, shape: Shape) -> Shape:
        """The shape a request's first round fills with."""
        return shape

    def strict(self, shape: Shape) -> Shape:
        """A retry's shape: at least, its fill closes the brackets the text after it leaves open."""
        return replace(shape, closes=True)

    def head_window(self, shape: Shape) -> int | None:
        """The most tokens a retry's last hole gets (None: its own ``max_tokens``)."""
        return None

    def lead_widths(self, shape: Shape, n_holes: int) -> list[int | None]:
        """Per hole, the indentation width its fill's first line must have, committed before denoising (None: unknown)."""
        return [None] * n_holes

    def steering_context(self, doc: "Document", i: int, ctx: "HoleContext", shape: Shape) -> "HoleContext":
        """Hole ``i``'s steering context with what ``shape`` adds (``doc.holes`` are the request's)."""
        return replace(ctx, closes=shape.closes, mends=shape.mends) if i == len(doc.holes) - 1 else ctx

    # -- scaffolds -----------------------------------------------------------------------------

    def scaffold(self, request: "FillRequest", shape: Shape) -> "tuple[FillRequest, Shape] | None":
        """The request of several holes that fills ``request``'s one hole, and its shape; None: none."""
        return None

    def join_scaffold(self, request: "FillRequest", scaffolded: "FillRequest", result: "FillResult") -> "FillResult":
        """``request``'s result from that of its ``scaffolded`` request (see :meth:`scaffold`)."""
        raise NotImplementedError(f"{self.name} has no scaffolds")

    # -- judging -------------------------------------------------------------------------------

    def nested_region(self, root, data: bytes, spans: list[tuple[int, int]]) -> tuple[int, int, bytes] | None:
        """A region smaller than the top-level statements around the holes that parses on its own
        after the line ``head``, as (start, end, head) in bytes of ``data``; None: none."""
        return None

    def region_end(self, data: bytes, start: int, end: int) -> int:
        """Where the judged region of the top-level statements around the holes, bytes [start, end)
        of ``data``, ends, the lines after it that the language's layout makes part of it
        included (the default: ``end``; by its brackets, the tree's own nodes hold them)."""
        return end

    def strict_check(self, region: bytes, spans: list[tuple[int, int]]) -> CompileCheck | None:
        """A compiler check of the judged ``region`` with holes at ``spans`` (None: tree-sitter alone)."""
        return None


DEFAULT = LanguageHooks()

_hooks: dict[tuple[str, str | None], LanguageHooks] = {}
_lock = threading.Lock()


def hooks_for(language: "LanguageSpec | str | None") -> LanguageHooks:
    """The hooks of a language (a spec, or a name, LSP id, extension or path): ``HOOKS`` of the
    module ``infill.lang.<package>.hooks``, where ``package`` is the table's ``hooks`` or else the
    language's name; :data:`DEFAULT` where there is no such module or no such language.
    A table that names a package whose hooks module does not exist raises ImportError."""
    spec = language if isinstance(language, LanguageSpec) else spec_for(language)
    if spec is None:
        return DEFAULT
    key = (spec.name, spec.hooks)
    found = _hooks.get(key)
    if found is None:
        with _lock:
            found = _hooks[key] = _load(spec)
    return found


def _load(spec: LanguageSpec) -> LanguageHooks:
    module = f"{LANG_PACKAGE}.{spec.hooks or spec.name}.hooks"
    try:
        exists = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # no package infill.lang.<name>
        exists = False
    if not exists:
        if spec.hooks:
            raise ImportError(f"languages.toml names hooks {spec.hooks!r} for {spec.name}, but there is no module {module}")
        return DEFAULT
    return importlib.import_module(module).HOOKS
