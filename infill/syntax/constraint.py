"""The sampler's syntax constraint: steer, repair, judge and select fills with tree-sitter.

:class:`SyntaxConstraint` implements the sampler's ``Constraint`` protocol for one engine chunk
(rows = candidates of requests; each row's window slots belong to that request's holes):

- ``steer``: for the first ``LOOKAHEAD`` masked slots of each hole (a frontier schedule's: every
  slot the step may commit), the steering lexer
  (infill/syntax/steering.py) refuses a proposed token that breaks bracket, quote, indentation or (for
  Python) line rules given the hole's left context, the tokens committed before it and the
  tokens proposed for the masked slots between (the draft a left-to-right order commits); the
  end of the fill (a pad, or the window's last slot) must be a place where the fill may end,
  and what the fill still must close must fit in the free slots after a token.
  A refused proposal at a hole's first masked slot that is the text after the hole (a closer
  that text needs, the quote of the string the hole is in, a header's head's ':') ends the fill
  there, where it may end: the model means it to (``f.read(path|)``, not ``f.read(path,
  pathfile, ...|)``). Another refused proposal there is replaced by the model's next best token
  the lexer allows, in the same walk (one pass over the draft a step); failing those, what the
  language's line rules say is owed comes (a Python block header whose brackets are closed
  takes its ':', ``def f(self)``), and a header's head alone that nothing may continue ends
  there, where it may (``else`` takes nothing before its ':');
- ``remask``: after a full draft, each row's fills are parsed with the top-level statements
  around them (infill/syntax/document.py; where the language's hooks have a compiler, it judges
  too: Python's, infill/lang/python/pycompile.py); the slots whose
  token bytes overlap a newly introduced ERROR or MISSING node or SyntaxError are sent back to
  be denoised again (the sampler bounds the rounds), unless another candidate of the same
  request is valid already (selection takes valid candidates first, so repairing costs steps for nothing);
- ``judge``: whether a row's final fill texts are syntax-valid, adding no error (for selection:
  valid candidates first, then by model score); ``final``: what ``Fill.valid`` says, ``judge``
  and no closer after a hole left stray (``RequestCheck.strays``: a block's body whose opening
  line the fill does not write again).

For the engine's finishing (infill/engine/finish.py) it answers, per row and hole, without the
engine reaching into its checks: :meth:`SyntaxConstraint.checked`, :meth:`~SyntaxConstraint.truncate`
(a cursor completion cut at its syntactic unit's end) and :meth:`~SyntaxConstraint.close`
(a fill with the brackets it leaves open closed).

Requests without a known, installed grammar, or with ``constrained=False``, get no checks (their
rows are let through and judged ``None``). A constraint that fails internally logs once and lets
the fill go on unconstrained: it never breaks a fill. Nothing here runs the model.
"""

from __future__ import annotations

import functools
import logging
import time

import torch

from infill.protocol import FillRequest
from infill.syntax.document import Document, ErrorSpan, block_heads as block_heads_of, block_tails as block_tails_of, hole_context, truncate_completion, unbalanced
from infill.syntax.hooks import Shape, hooks_for
from infill.syntax.languages import grammar as lookup_grammar
from infill.syntax.steering import LexState, Lexer
from infill.text.textpos import line_start

log = logging.getLogger(__name__)

__all__ = ["RequestCheck", "SyntaxConstraint", "block_heads", "block_tails", "for_chunk", "headless", "is_clean", "is_valid", "mendable", "reopens", "request_valid", "strays",
           "truncate_completion", "verdict"]

_SYNTAX_CHARS = set("()[]{}\"'`")
LOOKAHEAD = 2  # masked slots of a hole whose proposals steering judges, left to right


class RequestCheck:
    """One request's parsed document and one steering lexer per hole (None: not steered).

    ``shape``: what stand-in fills told of the request (its language's hooks' ``shape_of``, or
    none); its opener follows the last hole's fill in what the model reads and in the result, so
    fills are judged with it, and the hooks add what it tells to each hole's steering context.
    """

    def __init__(self, request: FillRequest, shape: Shape | None = None):
        g = lookup_grammar(request.language)
        if g is None:
            raise LookupError(request.language)
        self.grammar = g
        hooks = hooks_for(g.spec)
        shape = shape if shape is not None else hooks.no_shape()
        self.doc = shape.doc or Document(g, request.text, [(h.start, h.end) for h in request.holes])
        self.tails = [b""] * (len(request.holes) - 1) + [shape.opener.encode()]
        self.lexers: list[Lexer | None] = []
        self.headless: list[int] = []  # per hole: the bytes after it that are a block's body whose opening line is missing
        for i in range(len(request.holes)):
            ctx = hooks.steering_context(self.doc, i, hole_context(self.doc, i), shape)
            self.lexers.append(None if ctx.in_text else Lexer(g.spec, ctx))
            self.headless.append(ctx.headless)  # (never set inside a string or comment: hole_context returns first)
        self._judged: dict[tuple[bytes, ...], tuple[bool, bool]] = {}  # fills: (valid, clean)

    def new_errors(self, fills: list[bytes]):
        """The document's new errors with ``fills`` (and the opener after the last): see
        Document.new_errors; and, at its end, each fill that leaves open a bracket before its hole
        that the layout says it closes (``HoleContext.due``: the parse cannot tell, where the
        document with the hole is broken there already), or that ends where its language's line
        rules never let a fill end (Lexer.ends_wrong: Python's decorator with no definition after it)."""
        errors, spans, clean = self.doc.errors([f + t for f, t in zip(fills, self.tails)])
        for h, lexer in enumerate(self.lexers):
            if lexer is not None and lexer.leaves_due(fills[h].decode("utf-8", "replace")):
                errors = [*errors, ErrorSpan(spans[h][1], spans[h][1], "MISSING closer")]
                clean = False
            elif lexer is not None and not self.tails[h] and lexer.ends_wrong(fills[h].decode("utf-8", "replace")):
                errors = [*errors, ErrorSpan(spans[h][1], spans[h][1], "a fill may not end here")]
                clean = False
        self._judged[tuple(fills)] = (not errors, clean)
        return errors, spans

    def _judge(self, fills: list[bytes]) -> tuple[bool, bool]:
        key = tuple(fills)
        if key not in self._judged:
            self.new_errors(fills)
        return self._judged[key]

    def valid(self, fills: list[bytes]) -> bool:
        return self._judge(fills)[0]

    def clean(self, fills: list[bytes]) -> bool:
        """Do ``fills`` leave the judged region with no error at all (Document.errors)?"""
        return self._judge(fills)[1]

    def strays(self, fills: list[bytes]) -> bool:
        """Do ``fills``, which add no error, leave a block whose opening line a hole's cut took
        broken: the text after a hole is a block's body whose opening line is missing
        (HoleContext.headless: a hole cut where that line stood, its closer stray), and either the
        hole's fill leaves no bracket open for it while the judged region still has an error, or
        that body, through its closer's line, still has one (a fill that opened another block than
        the body's: an ``if`` where ``case`` labels follow)? The document such a fill leaves does
        not parse, so it is not valid in the end (:meth:`final`), though the steering and the
        repair, which judge what a fill adds (:meth:`valid`), let it be. A document broken
        elsewhere (a stray closer further down that no such body leads to) keeps the verdict on
        what the fill adds."""
        if not any(self.headless) or not self.valid(fills) or self.clean(fills):
            return False
        tailed = [f + t for f, t in zip(fills, self.tails)]
        for h, (body, lexer, fill) in enumerate(zip(self.headless, self.lexers, fills)):
            if not body or lexer is None:
                continue
            st = lexer.feed(lexer.start, fill.decode("utf-8", "replace"))[0]
            if not st.stack or self.doc.broken_after(tailed, h, body) or not _closed_in_order(lexer, st):
                return True
        return False

    def final(self, fills: list[bytes]) -> bool:
        """Is ``fills`` valid in the end (Fill.valid): it adds no error and leaves no block whose
        opening line a hole's cut took broken (:meth:`strays`)?"""
        return self.valid(fills) and not self.strays(fills)

    def first_error(self, fills: list[bytes], hole: int) -> tuple[int, int] | None:
        """None if ``fills`` are valid; else the span of the first new error, in bytes from the
        start of hole ``hole``'s fill (negative: before it; past its length: after it)."""
        errors, spans = self.new_errors(fills)
        if not errors:
            return None
        first = min(errors, key=lambda e: (e.start, e.end))
        return first.start - spans[hole][0], first.end - spans[hole][0]


def _closed_in_order(lexer: Lexer, st: LexState) -> bool:
    """Do the closers after a hole (HoleContext.after) close, in order, the brackets that its
    fill leaves open and those before it that the fill closed (state ``st``)? A fill that closes
    brackets before it and opens others can pair the stray closer right after its body and leave
    the ones after that closing the wrong brackets (``}) ( {`` where a struct field's ``subpat: {``
    was cut: the struct's own ``})`` further down then close ``(`` and ``{``)."""
    ctx = lexer.ctx
    kept = list(ctx.base[: len(ctx.base) - st.popped]) + list(st.stack)
    want = [lexer.pairs[o] for o in reversed(kept)][: len(st.stack) + st.popped]
    return list(ctx.after[: len(want)]) == want


def _document(language: str | None, text: str, holes: list[tuple[int, int]], whole: bool = False) -> Document | None:
    """The parsed document of ``text`` with ``holes`` (None without a usable grammar). The last few
    are kept: the engine's questions of one request (headless, mendable, block_heads, block_tails)
    ask the same document, and a Document holds only what its inputs determine."""
    return _parsed(language, text, tuple(holes), whole)


@functools.lru_cache(maxsize=4)
def _parsed(language: str | None, text: str, holes: tuple[tuple[int, int], ...], whole: bool) -> Document | None:
    g = lookup_grammar(language)
    return Document(g, text, list(holes), judge_whole=whole) if g is not None else None


def _encoded(fills: list[str]) -> list[bytes]:
    return [f.encode("utf-8", "surrogatepass") for f in fills]


def verdict(language: str | None, text: str, holes: list[tuple[int, int]], fills: list[str],
            whole: bool = False) -> tuple[bool, bool] | None:
    """(valid, clean) of ``text`` with ``fills`` in ``holes`` (str offsets), from one parse: no new
    error node (:func:`is_valid`), and no error at all in the judged region (:func:`is_clean`).
    ``whole``: the region is the whole document (the engine judges the part around the holes).
    None when the language has no usable grammar."""
    doc = _document(language, text, holes, whole)
    if doc is None:
        return None
    new, _, clean = doc.errors(_encoded(fills))
    return not new, clean


def is_valid(language: str | None, text: str, holes: list[tuple[int, int]], fills: list[str],
             whole: bool = False) -> bool | None:
    """Does ``text`` with ``fills`` in ``holes`` (str offsets) parse with no new error node?
    ``whole``: judged in the whole document, not the region around the holes that the engine judges.

    None when the language has no usable grammar. For benchmarks and callers outside the engine.
    """
    judged = verdict(language, text, holes, fills, whole)
    return judged[0] if judged is not None else None


def request_valid(request: FillRequest, fills: list[str]) -> bool | None:
    """Is ``request`` with ``fills`` valid in the end, as Fill.valid says (RequestCheck.final: the
    parse, the language's line rules on where a fill may end, and no closer after a hole left
    stray)? None without a usable grammar."""
    try:
        return RequestCheck(request).final(_encoded(fills))
    except LookupError:
        return None


def strays(request: FillRequest, fills: list[str]) -> bool:
    """Do ``fills`` add no error to ``request``'s document but leave a closer after a hole stray
    (RequestCheck.strays)? False without a usable grammar."""
    try:
        return RequestCheck(request).strays(_encoded(fills))
    except LookupError:
        return False


def headless(request: FillRequest) -> bool:
    """Is the text after one of ``request``'s holes a block's body whose opening line the hole's cut
    took (HoleContext.headless), so that only a fill that writes that line again leaves its document
    whole? False without a usable grammar."""
    doc = _document(request.language, request.text, [(h.start, h.end) for h in request.holes])
    return doc is not None and any(hole_context(doc, i).headless for i in range(len(request.holes)))


def reopens(request: FillRequest) -> str:
    """The closer of the innermost bracket open before ``request``'s one hole, where the hole starts
    its line (after its indentation) and the text after it closes that bracket, no more: a fill
    there may close that block and open the next (``} else {``, ``} catch (E e) {``) and leave the
    brackets as they were. "" elsewhere, or without a usable grammar."""
    doc = _document(request.language, request.text, [(h.start, h.end) for h in request.holes])
    if doc is None or len(request.holes) != 1:
        return ""
    ctx, s = hole_context(doc, 0), doc.spans[0][0]
    if ctx.in_text or ctx.surplus or not ctx.base or not ctx.needed or doc.data[line_start(doc.data, s) : s].strip():
        return ""
    return doc.grammar.spec.brackets[ctx.base[-1]]


def is_clean(language: str | None, text: str, holes: list[tuple[int, int]], fills: list[str]) -> bool | None:
    """Does ``text`` with ``fills`` in ``holes`` leave the judged region with no error at all
    (Document.errors: what the holes' cut broke elsewhere mended too)? None without a usable grammar."""
    judged = verdict(language, text, holes, fills)
    return judged[1] if judged is not None else None


def mendable(language: str | None, text: str, holes: list[tuple[int, int]], fills: list[str]) -> bool:
    """Do ``fills`` leave ``text`` broken away from its ``holes`` (not Document.errors' clean), where
    the text after a hole closes brackets, but not exactly those open before it (``HoleContext.after``
    against ``base``: more, or other, or fewer), so that a fill that opens or closes the difference
    could mend it? False without a usable grammar."""
    doc = _document(language, text, holes)
    if doc is None or doc.errors(_encoded(fills))[2]:
        return False
    return any(unbalanced(hole_context(doc, i), doc.grammar.spec.brackets) for i in range(len(holes)))


def block_heads(language: str | None, text: str, holes: list[tuple[int, int]], indent: str = "") -> list[str]:
    """document.block_heads of ``text``'s last hole (str offsets): the words that the text's own
    lines opening the block that the text after the hole closes stray begin with, most common
    first. [] without a usable grammar."""
    doc = _document(language, text, holes)
    return block_heads_of(doc, len(holes) - 1, indent) if doc is not None else []


def block_tails(request: FillRequest, indent: str = "") -> list[str]:
    """document.block_tails of ``request``'s last hole (its fill writing ``indent`` first): how the
    document's own lines that open what a fill there must open end (``(() => {``). [] without a
    usable grammar."""
    doc = _document(request.language, request.text, [(h.start, h.end) for h in request.holes])
    return block_tails_of(doc, len(request.holes) - 1, indent) if doc is not None else []


class SyntaxConstraint:
    """The Constraint of one engine chunk. ``checks[r]`` is row r's request check (or None)."""

    def __init__(self, checks: list[RequestCheck | None], hole: torch.Tensor, tokenizer, pad_id: int, mask_id: int,
                 heals: list[list[bytes]] | None = None, frontier: bool = False):
        self.checks = checks
        # A frontier schedule asks a step's frontier and the slots after its speculative drafts, and
        # commits them together while the drafts before them were right: steering walks them all.
        self.frontier = frontier
        # heals[r][h]: the text that the first token of hole h of row r writes again (token
        # healing: the engine took the context's last token back, and binds the slot to tokens
        # that start with it); they are in the document already, so the constraint reads that
        # token without them. ASCII (whitespace, or a word's characters), decoded once here.
        self.heals = [[b.decode("ascii") for b in row] for row in heals] if heals else [[] for _ in range(hole.shape[0])]
        self.tokenizer = tokenizer
        self.pad_id, self.mask_id = pad_id, mask_id
        hole = hole.cpu()
        # slots[r][h]: the window slots of hole h in row r, in order (contiguous: spans[r][h] is
        # their range [start, end)).
        self.slots: list[list[list[int]]] = []
        self.spans: list[list[tuple[int, int]]] = []
        for r in range(hole.shape[0]):
            n = int(hole[r].max()) + 1 if (hole[r] >= 0).any() else 0
            self.slots.append([(hole[r] == h).nonzero().flatten().tolist() for h in range(n)])
            self.spans.append([(s[0], s[-1] + 1) if s else (0, 0) for s in self.slots[-1]])
            if any(s != list(range(a, b)) for s, (a, b) in zip(self.slots[-1], self.spans[-1])):
                raise ValueError("a hole's window slots must be contiguous")
        self._bytes: dict[int, bytes] = {}
        self._texts: dict[int, str] = {}
        self._lex: dict[tuple[int, int], tuple[list[int], LexState]] = {}
        # kept[(r, h)]: where a left-to-right fill of hole h of row r said all it will (Engine.end_said),
        # the characters of its text kept; what its window holds after them is not the fill's.
        self.kept: dict[tuple[int, int], int] = {}
        self.seconds = 0.0
        self._failed = False

    # -- tokens ------------------------------------------------------------------------------

    def token_bytes(self, t: int) -> bytes:
        b = self._bytes.get(t)
        if b is None:
            b = self._bytes[t] = b"" if t in (self.pad_id, self.mask_id) else self.tokenizer.token_bytes(t)
        return b

    def _text(self, tokens: list[int]) -> str:
        return b"".join(self.token_bytes(t) for t in tokens).decode("utf-8", "replace")

    def _heal(self, r: int, h: int) -> str:
        heals = self.heals[r]
        return heals[h] if h < len(heals) else ""

    def _run_text(self, r: int, h: int, run: list[int]) -> str:
        """The text of the tokens ``run`` from hole h's first slot on, its healed bytes left out."""
        return b"".join(self.token_bytes(t) for t in run)[len(self._heal(r, h)) :].decode("utf-8", "replace")

    def _lead_tokens(self, texts: list[str]) -> list[int]:
        """The first token of each of ``texts`` (if the tokenizer can say)."""
        encode = getattr(self.tokenizer, "encode", None)
        return [ids[0] for ids in map(encode, texts) if ids] if encode is not None else []

    def _token_text(self, t: int) -> str:
        s = self._texts.get(t)
        if s is None:
            s = self._texts[t] = self.token_bytes(t).decode("utf-8", "replace")
        return s

    def _fill_tokens(self, ids: list[int]) -> list[int]:
        return ids[: ids.index(self.pad_id)] if self.pad_id in ids else ids

    def _state(self, r: int, h: int, lexer: Lexer, run: list[int]) -> LexState:
        """Lexer state after the committed run ``run`` of hole h in row r (cached, incremental)."""
        cached = self._lex.get((r, h))
        if cached is not None and cached[0] and run[: len(cached[0])] == cached[0]:
            done, st = cached
            if len(run) > len(done):
                st = lexer.feed(st, self._text(run[len(done) :]))[0]
        else:
            st = lexer.feed(lexer.start, self._run_text(r, h, run))[0]
        self._lex[(r, h)] = (list(run), st)
        return st

    # -- the protocol ------------------------------------------------------------------------

    def steer(self, state, proposal: torch.Tensor, candidates: torch.Tensor, alternatives=None) -> tuple[torch.Tensor, torch.Tensor]:
        """The sampler's hook (see sampler.Constraint): walk each hole's draft left to right from
        its first masked slot; the first asked proposal the lexer refuses is refused (and the
        walk of that hole stops: what follows it is not known yet), unless it is the first
        masked slot's and the lexer allows one of ``alternatives(r, k)``: then the first such
        takes its place and the walk goes on. Only there: a later slot's proposal is read after
        a draft that is not committed yet, and is often refused for that draft's sake (looking
        for alternatives there costs more than it gives)."""
        if self._failed:
            return proposal, candidates
        t0 = time.perf_counter()
        try:
            rows = [r for r in candidates.any(1).nonzero().flatten().tolist() if self.checks[r] is not None]
            refuse = torch.zeros(state.masked.shape, dtype=torch.bool)
            tokens = proposal.clone()
            if rows:
                picked = torch.tensor(rows, device=candidates.device)
                ids, masked, prop, asked = (t.index_select(0, picked).tolist() for t in (state.ids, state.masked, proposal, candidates))
                no_pad = state.no_pad.index_select(0, picked).tolist() if state.no_pad is not None else [[False] * len(m) for m in masked]
                for i, r in enumerate(rows):
                    draft = list(prop[i])
                    for h, span in enumerate(self.spans[r]):
                        lexer = self._lexer(r, h)
                        k = None if lexer is None else self._walk(r, h, lexer, span, ids[i], masked[i], draft, asked[i], no_pad[i], alternatives)
                        if k is not None:
                            refuse[r, k] = True
                    if draft != prop[i]:
                        tokens[r] = torch.tensor(draft, dtype=tokens.dtype, device=tokens.device)
            return tokens, candidates & ~refuse.to(candidates.device)
        except Exception:  # never break a fill
            self._fail("steer")
            return proposal, candidates
        finally:
            self.seconds += time.perf_counter() - t0

    def _lexer(self, r: int, h: int) -> Lexer | None:
        """The steering lexer of hole h of row r (None: not steered)."""
        lexers = self.checks[r].lexers
        return lexers[h] if h < len(lexers) else None

    def _walk(self, r: int, h: int, lexer: Lexer, span: tuple[int, int], ids: list[int], masked: list[bool],
              draft: list[int], asked: list[bool], no_pad: list[bool], alternatives) -> int | None:
        """Walk the draft of hole h (window range ``span`` of row r: committed tokens, and
        ``draft`` at masked slots) over its first LOOKAHEAD masked slots (see steer; a
        replacement is written into ``draft``; ``no_pad``: slots that may not end the fill).
        With a frontier schedule (``frontier``: it asks its frontier and the slots after its
        speculative drafts, and commits them in one step while the drafts before them were
        right) it walks every slot asked, up to the first masked slot not asked, so that none is
        committed unjudged: a step commits what one step per slot would.
        Returns the first slot refused; None if none is."""
        a, b = span
        first = next((k for k in range(a, b) if masked[k]), None)
        if first is None or not any(asked[first:b]) or self.pad_id in ids[a:first]:
            return None
        limit = b - a if self.frontier else LOOKAHEAD
        st = self._state(r, h, lexer, ids[a:first])
        # From the last committed slot on, every slot is free: a slot knows how many follow it.
        free_from = next((k + 1 for k in range(b - 1, first - 1, -1) if not masked[k]), first)
        last_masked = max(k for k in range(first, b) if masked[k]) if lexer.ctx.due else None
        seen = 0
        for k in range(first, b):
            if self.frontier and masked[k] and not asked[k]:
                return None  # past what the step may commit
            tok = draft[k] if masked[k] else ids[k]
            room = b - k - 1 if k >= free_from else None
            # The hole's last masked slot before committed ones: the rest of the fill is known (and
            # judged with it, where a bracket before the hole is due: Lexer.leaves_due).
            rest = self._text(self._fill_tokens(ids[k + 1 : b])) if k == last_masked and room is None else None
            heal = self._heal(r, h) if k == a else ""
            if masked[k] and asked[k] and not self._may_take(lexer, st, tok, room, heal, rest):
                options = alternatives(r, k) if alternatives is not None and k == first else ()
                # The end the model proposes ends the fill even before committed slots (they are cut).
                may_end = k == first and not no_pad[k] and not heal
                ends = self._end_signal(lexer, tok) if may_end else []
                mend = self._lead_tokens(lexer.mend_next(st)) if tok == self.pad_id or "\n" in self._token_text(tok) else []
                tok = self._first_allowed(lexer, st, [*mend, *ends, *options], room, heal, rest)
                if tok is None and k == first:  # a header's ':' the model ranks low; a head nothing ranked may go on ends
                    forced = self._lead_tokens(lexer.owes(st)) if not heal else []
                    forced += [self.pad_id] if may_end and room is not None and lexer.ends_short() else []
                    tok = self._first_allowed(lexer, st, forced, room, heal, rest)
                if tok is None:
                    return k
                draft[k] = tok
            seen += masked[k]
            if tok == self.pad_id or seen == limit:
                return None
            st = lexer.feed(st, self._token_text(tok)[len(heal) :])[0]
        return None

    def _end_signal(self, lexer: Lexer, tok: int) -> list[int]:
        """The tokens that end the fill where the model's refused proposal ``tok`` is the text that
        follows the hole: a closer that text needs (``f.read(|)``: the model proposes ')' after
        ``path``), the quote that closes the string the hole is in (``print("Hello, |")``), or the
        ':' after a header's head alone (``head_only``: ``if x|`` with ':'). The model means the
        fill to end there; the next best tokens would only run on past it (``path, pathfile, ...``).
        The pad (which cuts off what was committed after it: the model wrote that past the end it
        now proposes), or first the closers before that ':' (the ')' of '):')."""
        nxt, raw = lexer.ctx.next_char, self._token_text(tok)
        text = raw.lstrip(" ")
        if (nxt in lexer.closers and text.startswith(nxt)) or (lexer.ctx.string and raw.startswith(lexer.ctx.string)):
            return [self.pad_id]
        before = lexer.head_end(text)  # the language's: a header's head alone's ':' (the text before it)
        if before is None:
            return []
        return self._lead_tokens([before]) if before else [self.pad_id]

    def _may_take(self, lexer: Lexer, st: LexState, tok: int, room: int | None, heal: str = "",
                  rest: str | None = None) -> bool:
        """May a slot after the state ``st`` take token ``tok``? ``room``: how many free slots of
        the window follow it (0: the fill ends with it; None: not known, committed ones follow);
        what the fill must still close has to fit in them. ``rest``: where the slot is the last
        masked one and committed slots follow (asked where a bracket is due), the text they hold:
        the fill with the token is then whole, and must be one that may end. ``heal``: the healed text the slot's
        token must start with (read without it)."""
        if tok == self.pad_id:
            return not heal and lexer.can_end(st)
        text = self._token_text(tok)
        if heal:
            if not text.startswith(heal):
                return False
            text = text[len(heal) :]
        if lexer.ctx.mends and (("\n" in text and not lexer.may_break(st, text[: text.index("\n")])) or lexer.empties_owed(st, text)):
            return False
        if rest is not None:
            text += rest
        elif room != 0:
            if not lexer.accepts(st, text):
                return False
            return room is None or lexer.closers_needed(lexer.feed(st, text)[0]) <= room
        after, ok = lexer.feed(st, text, final=True)
        return ok and lexer.can_end(after)

    def _first_allowed(self, lexer: Lexer, st: LexState, tokens, room: int | None, heal: str = "",
                       rest: str | None = None) -> int | None:
        """The first of ``tokens`` (best first) a slot after the state ``st`` may take; None if none may."""
        return next((t for t in tokens if t != self.mask_id and self._may_take(lexer, st, t, room, heal, rest)), None)

    def first_admissible(self, state, r: int, slot: int, tokens: list[int]) -> int | None:
        """The first of ``tokens`` that window slot ``slot`` of row ``r`` may take, where it is
        the first masked slot of its hole; None if none may, or the slot is not steered."""
        if self._failed or self.checks[r] is None:
            return None
        t0 = time.perf_counter()
        try:
            for h, (a, b) in enumerate(self.spans[r]):
                if not a <= slot < b:
                    continue
                lexer = self._lexer(r, h)
                run = state.ids[r, a:slot].tolist()
                if lexer is None or self.pad_id in run or state.masked[r, a:slot].any():
                    return None
                st = self._state(r, h, lexer, run)
                room = b - slot - 1 if bool(state.masked[r, slot:b].all()) else None
                # Committed slots alone follow it: the fill is whole with it (judged so where a bracket is due).
                known = bool(lexer.ctx.due) and room is None and not bool(state.masked[r, slot + 1 : b].any())
                rest = self._text(self._fill_tokens(state.ids[r, slot + 1 : b].tolist())) if known else None
                heal = self._heal(r, h) if slot == a else ""
                found = self._first_allowed(lexer, st, tokens, room, heal, rest)
                if found is None and not heal:  # what must come next (a closer, a header's first word), if the model ranks it low
                    due = self._lead_tokens(lexer.due(st, ending=room is not None or known))
                    found = self._first_allowed(lexer, st, due, room, rest=rest)
                return found
            return None
        except Exception:
            self._fail("first_admissible")
            return None
        finally:
            self.seconds += time.perf_counter() - t0

    def remask(self, state) -> torch.Tensor:
        out = torch.zeros_like(state.masked)
        if self._failed:
            return out
        t0 = time.perf_counter()
        try:
            ids = state.ids.cpu()
            flag = torch.zeros(out.shape, dtype=torch.bool)
            blamed = {r: self._repair_row(check, r, ids[r].tolist()) for r, check in enumerate(self.checks) if check is not None}
            # A request with a valid candidate already has what selection needs: its rows are left as they are.
            settled = {id(self.checks[r]) for r, slots in blamed.items() if not slots}
            for r, slots in blamed.items():
                if id(self.checks[r]) not in settled:
                    flag[r, sorted(slots)] = True
            return flag.to(out.device)
        except Exception:
            self._fail("remask")
            return out
        finally:
            self.seconds += time.perf_counter() - t0

    def keep(self, r: int, h: int, chars: int) -> None:
        """Hole h of row r said all it will with its text's first ``chars`` characters
        (Engine.end_said): a repair judges that fill, not what its window wrote after it."""
        self.kept[(r, h)] = chars

    def _kept(self, r: int, h: int, fill: bytes) -> bytes:
        """Fill ``fill`` of hole h of row r as far as it is kept (:meth:`keep`; as the engine's text
        has it, undecodable bytes one character each); whole where none was said or that text
        is not its prefix."""
        chars = self.kept.get((r, h))
        if chars is None:
            return fill
        kept = fill.decode("utf-8", "replace")[:chars].encode("utf-8")
        return kept if fill.startswith(kept) else fill

    def _repair_row(self, check: RequestCheck, r: int, row: list[int]) -> set[int]:
        """Window slots of row r whose tokens overlap errors its fills introduced."""
        holes = []  # per hole: (slots, fill tokens, byte offset of each token in its fill, its length there)
        fills = []
        for h, slots in enumerate(self.slots[r]):
            toks = self._fill_tokens([row[s] for s in slots])
            cut = len(self._heal(r, h))  # the healed bytes the tokens start with are not the fill's
            offs, lens, at = [], [], -cut
            for t in toks:
                end = at + len(self.token_bytes(t))
                offs.append(max(at, 0))
                lens.append(max(end, 0) - max(at, 0))
                at = end
            holes.append((slots, toks, offs, lens))
            fills.append(self._kept(r, h, b"".join(self.token_bytes(t) for t in toks)[cut:]))
        errors, spans = check.new_errors(fills)
        flag: set[int] = set()

        def touches(s0: int, s1: int) -> list[int]:
            return [h for h, (a, b) in enumerate(spans) if s0 <= b and a <= s1]

        for err in errors:
            if touches(err.start, err.end):
                # Blame the stray parts of an ERROR node that touch a fill, else the whole node.
                parts = [p for p in err.parts if touches(*p)] or [(err.start, err.end)]
                for s0, s1 in parts:
                    for h in touches(s0, s1):
                        flag.update(self._blame(holes[h], spans[h], s0, s1))
            else:  # outside every fill (e.g. MISSING '}' at the end): blame the nearest fill before it
                before = [h for h, (a, _) in enumerate(spans) if a <= err.start] or [0]
                slots, toks, _, _ = holes[before[-1]]
                syntax = [slots[k] for k, t in enumerate(toks) if _SYNTAX_CHARS & set(self._token_text(t))]
                flag.update(syntax or slots[max(len(toks) - 1, 0) :])
        return flag

    def _blame(self, hole, span: tuple[int, int], s0: int, s1: int) -> list[int]:
        """Slots of one hole's fill whose tokens overlap error bytes [s0, s1] of the filled text."""
        slots, toks, offs, lens = hole
        a, b = span
        lo, hi = s0 - a, max(s1, s0 + 1) - a
        if s0 == s1:
            lo -= 1  # a MISSING node: blame the token before it too
        hit = [slots[k] for k in range(len(toks)) if offs[k] < hi and offs[k] + lens[k] > lo]
        if s1 >= b or not hit:  # at the fill's end: let it shrink (its last token) or grow (its pads)
            hit += slots[max(len(toks) - 1, 0) :]
        return hit

    def judge(self, r: int, texts: list[str]) -> bool | None:
        """Is row r with final fill texts ``texts`` valid? None if the row is not checked."""
        return self._ask(r, texts, lambda check, fills: check.valid(fills))

    def clean(self, r: int, texts: list[str]) -> bool | None:
        """Does row r with fill texts ``texts`` leave its judged region with no error at all, the
        errors the holes' cut left away from them mended too (RequestCheck.clean)? None if not checked."""
        return self._ask(r, texts, lambda check, fills: check.clean(fills))

    def final(self, r: int, texts: list[str]) -> bool | None:
        """Is row r with final fill texts ``texts`` valid in the end, as Fill.valid says
        (RequestCheck.final: :meth:`judge`, and no closer after a hole left stray)? None if not checked."""
        return self._ask(r, texts, lambda check, fills: check.final(fills))

    def strays(self, r: int, texts: list[str]) -> bool:
        """Do row r's fill texts ``texts`` add no error but leave a closer after a hole stray
        (RequestCheck.strays)? False if the row is not checked."""
        return bool(self._ask(r, texts, lambda check, fills: check.strays(fills)))

    def broken(self, r: int) -> bool:
        """Is row r's document broken away from its holes (errors its fills are not judged by,
        Document.baseline), or has one of its holes text after it that closes brackets, but not
        exactly those open before it (document.unbalanced), so that a fill may mend it (``clean``)?"""
        if not self.checked(r):
            return False
        lexers = [x for x in self.checks[r].lexers if x is not None]
        return bool(self.checks[r].doc.baseline) or any(unbalanced(x.ctx, x.pairs) for x in lexers)

    def error_at(self, r: int, texts: list[str], hole: int) -> tuple[int, int] | None:
        """The span of the first new error of row r with fill texts ``texts``, in bytes from hole
        ``hole``'s fill start (see RequestCheck.first_error); None if valid or not checked (judge
        tells which, from its cache)."""
        return self._ask(r, texts, lambda check, fills: check.first_error(fills, hole))

    # -- for the engine's finishing -----------------------------------------------------------

    def checked(self, r: int) -> bool:
        """Is row r checked (its request constrained, with a usable grammar)?"""
        return r < len(self.checks) and self.checks[r] is not None

    def truncate(self, r: int, i: int, text: str) -> str:
        """``text``, a cursor completion in hole i of row r, cut where the syntactic unit around
        the cursor ends (document.truncate_completion, in the judged region); unchanged where the
        hole's fill goes on with a shape's opener."""
        check = self.checks[r]
        if check.tails[i]:
            return text
        doc = check.doc
        before, after = doc.region_text(i)
        kept = [doc.local[s:e] for s, e in doc.local_spans]  # the other holes keep their text

        def parse(fill: bytes):  # the region with ``fill`` in hole i, parsed incrementally
            return doc.parse(kept[:i] + [fill] + kept[i + 1 :])[0]

        return truncate_completion(check.grammar, before, text, after, parse)

    def close(self, r: int, i: int, text: str) -> str | None:
        """``text``, a fill of hole i of row r, with the closers of the brackets it leaves open
        (steering.Lexer.close); None where there is nothing to close or the hole is not steered."""
        lexers = self.checks[r].lexers
        lexer = lexers[i] if i < len(lexers) else None
        return lexer.close(text) if lexer is not None else None

    def separators(self, r: int) -> tuple[str, ...]:
        """What may follow a closed bracket in row r's language to end a list's item or a statement
        (LanguageSpec.separators; none where the row is not checked)."""
        return self.checks[r].grammar.spec.separators if self.checked(r) else ()

    def brackets(self, r: int, i: int) -> set[str]:
        """The one-character brackets of hole i of row r's language, opening and closing (none
        where the hole is not steered)."""
        lexers = self.checks[r].lexers
        return lexers[i].openers | lexers[i].closers if i < len(lexers) and lexers[i] is not None else set()

    def steered(self, r: int, i: int) -> bool:
        """Has hole i of row r a steering lexer?"""
        lexers = self.checks[r].lexers
        return i < len(lexers) and lexers[i] is not None

    def _ask(self, r: int, texts: list[str], question):
        check = self.checks[r] if r < len(self.checks) else None
        if check is None or self._failed:
            return None
        t0 = time.perf_counter()
        try:
            return question(check, [t.encode("utf-8", "surrogatepass") for t in texts])
        except Exception:
            self._fail("judge")
            return None
        finally:
            self.seconds += time.perf_counter() - t0

    def _fail(self, where: str) -> None:
        log.exception("syntax constraint failed in %s; continuing without constraints", where)
        self._failed = True


def for_chunk(requests: list[FillRequest], rows: list[int], hole: torch.Tensor, tokenizer, pad_id: int, mask_id: int,
              shapes: list[Shape] | None = None, heals: list[list[bytes]] | None = None,
              frontier: bool = False) -> SyntaxConstraint | None:
    """The constraint for an engine chunk: ``rows[r]`` is the request index of row r;
    ``shapes[i]`` is request i's (see RequestCheck; without ``shapes``, each request's language hooks' ``no_shape``);
    ``heals[i]``: request i's healed bytes per hole (SyntaxConstraint.heals); ``frontier``: the
    chunk's schedule is a frontier schedule (SyntaxConstraint.frontier).

    None when no request in the chunk is constrained and has a usable grammar.
    """
    t0 = time.perf_counter()
    checks: list[RequestCheck | None] = []
    for i, req in enumerate(requests):
        check = None
        if req.options.constrained and req.language:
            try:
                check = RequestCheck(req, shapes[i] if shapes else None)
            except LookupError:
                pass  # unknown language: languages.grammar logged it once
            except Exception:
                log.exception("could not prepare syntax checks for %s; filling it unconstrained", req.path or "a request")
        checks.append(check)
    if not any(checks):
        return None
    c = SyntaxConstraint([checks[i] for i in rows], hole, tokenizer, pad_id, mask_id,
                         [heals[i] for i in rows] if heals else None, frontier)
    c.seconds += time.perf_counter() - t0
    return c
