"""Finishing a chunk's candidates: repair, selection, and the rounds around them.

After denoising, the engine (infill/engine/fill.py) decodes each candidate row and hands it to a
:class:`Finisher`, which finishes its fills (cut where they loop, the line break the text after
the hole brings dropped, and where the row is constrained: cursor completions truncated at
their syntactic unit's end, an invalid row cut back to a valid prefix or closed) and keeps each
request's best candidate: syntax-valid ones first, then ones with code in every hole, then by
model score (:func:`worth`). :func:`as_result` turns the best into the original request's fills.

The rounds around a chunk: a retry's request and shape (:func:`strict_request`, the language
hooks' ``strict``) and its merge (:func:`merge_retry`); a scaffolded request's join
(:func:`join_scaffold`, the language hooks' ``join_scaffold``).

It asks the syntax constraint (infill/syntax/constraint.py) through its public methods only
(``checked``, ``judge``, ``error_at``, ``truncate``, ``close``) and the language through its hooks
(infill/syntax/hooks.py); it never runs the model.
"""

from __future__ import annotations

import msgspec

from infill.engine.repeats import cut_repeats
from infill.protocol import Fill, FillRequest, FillResult
from infill.syntax.constraint import is_clean, request_valid
from infill.syntax.hooks import Shape, hooks_for

MAX_CUTS = 12  # parses spent cutting an invalid fill back to a valid prefix, longest first, at most
CUTS_PER_PARSE = 4  # and one more per this many tokens of the fill (a long fill is worth more)
SHORT_CUTS = 4  # then parses of its shortest prefixes


def drop_indent(fill: str, indent: str) -> str:
    """A fill made from the line start, as text for the original hole after ``indent``."""
    if not indent:
        return fill
    return fill[len(indent) :] if fill.startswith(indent) else fill.lstrip(" \t")


def keep_indent(fill: str, indent: str) -> str:
    """``fill``, made from a line's start, as it is inserted after the ``indent`` its hole came
    after: a first line with code and less indentation than that gets it (:func:`drop_indent`
    takes it off again); any other fill as it is."""
    first = fill.split("\n", 1)[0]
    if not indent or not first.strip() or first.startswith(indent):
        return fill
    return indent + fill.lstrip(" \t")


def join_line_break(fill: str, after: str) -> str:
    """Drop a fill's final line break where the text after the hole breaks the line itself.

    A hole on a line of its own ("    <FILL>" and then a line break) filled with "x = 1" and a
    line break would leave an empty line behind (and a blank fill, a line break alone, would add one).
    """
    if fill.endswith("\n") and after.startswith(("\n", "\r\n")):
        return fill[:-2] if fill.endswith("\r\n") else fill[:-1]
    return fill


def text_after(request: FillRequest, i: int) -> str:
    """The text after hole i as its fill's lines meet it: an insertion at a line's start, before
    code, inserts whole lines (the code after it is the next line, not the rest of the fill's last
    line), so its text after starts with a line break; any other hole's, as it is."""
    hole, text = request.holes[i], request.text
    whole_lines = hole.start == hole.end and (hole.start == 0 or text[hole.start - 1] == "\n")
    return "\n" + text[hole.end :] if whole_lines and text[hole.end : hole.end + 1] not in ("", "\n", "\r") else text[hole.end :]


def strict_request(request: FillRequest, shape: Shape) -> FillRequest:
    """The request of a retry: left to right, so that every committed token is one steering
    judged (a confident token committed out of order escapes it); its last hole's window at most
    what the language's hooks say for ``shape`` (``head_window``: Python's header's head alone
    gets one line's, HEAD_TOKENS: a longer window only gives a model caught in a loop room to run on)."""
    options = msgspec.structs.replace(request.options, policy="left-to-right")
    holes = request.holes
    window = hooks_for(request.language).head_window(shape)
    if window is not None:
        holes = [*holes[:-1], msgspec.structs.replace(holes[-1], max_tokens=min(holes[-1].max_tokens, window))]
    return msgspec.structs.replace(request, options=options, holes=holes)


def merge_retry(first: FillResult, retry: FillResult) -> FillResult:
    """The retry's fills where they are valid, else the first round's (also where the retry stopped
    under its floor, FillResult.below_floor: it would not be shown); the time of both rounds."""
    t, r = first.timings, retry.timings
    fills = retry.fills if not retry.below_floor and all(f.valid is not False for f in retry.fills) else first.fills
    timings = msgspec.structs.replace(
        t, denoise_ms=t.denoise_ms + r.denoise_ms, constrain_ms=t.constrain_ms + r.constrain_ms, rank_ms=t.rank_ms + r.rank_ms,
        total_ms=t.total_ms + r.total_ms - r.tokenize_ms, steps=t.steps + r.steps, rounds=t.rounds + r.rounds,
        candidates=t.candidates + r.candidates, tokens_filled=r.tokens_filled if fills is retry.fills else t.tokens_filled,
    )
    return FillResult(fills=fills, timings=timings, model=first.model)


def join_scaffold(request: FillRequest, indent: str, scaffolded: FillRequest, result: FillResult) -> FillResult:
    """The result of ``request``'s one hole from that of its ``scaffolded`` request (the language
    hooks' ``join_scaffold``), its fill as text for the hole after ``indent`` (:func:`drop_indent`).
    A result stopped under its floor (FillResult.below_floor) joins as one empty fill, its parts'
    scores summed."""
    if result.below_floor:
        return msgspec.structs.replace(result, fills=[Fill(text="", score=sum(f.score for f in result.fills))])
    joined = hooks_for(request.language).join_scaffold(request, scaffolded, result)
    fill = joined.fills[0]
    return msgspec.structs.replace(joined, fills=[msgspec.structs.replace(fill, text=drop_indent(fill.text, indent))])


def stay_quiet(request: FillRequest, result: FillResult) -> FillResult:
    """``result``, or where a constrained request of cursor insertions (every hole empty, with no
    minimum of tokens) got fills that are not valid and leaving every hole empty is (request_valid,
    as Fill.valid judges: leaving a closer after a hole stray is not), that:
    no suggestion, which is valid, instead of a broken one. A hole that must be filled
    (``min_tokens``), or replaces text, keeps its invalid fill, reported as such."""
    if not request.options.constrained or all(f.valid is not False for f in result.fills):
        return result
    if any(h.min_tokens or h.start != h.end for h in request.holes):
        return result
    empty = [""] * len(request.holes)
    if request_valid(request, empty) is not True:
        return result
    return msgspec.structs.replace(result, fills=[Fill(text="", score=f.score, valid=True) for f in result.fills])


def worth(fills: list[Fill]) -> tuple[bool, bool]:
    """How a candidate ranks before its score: syntax-valid ones first, then ones with code in
    every hole (a blank fill is no suggestion)."""
    return fills[0].valid is True, all(f.text.strip() for f in fills)


def result_rank(request: FillRequest, fills: list[Fill]) -> tuple[bool, bool, bool]:
    """How a result's ``fills`` for ``request`` rank before their score, as Finisher.rank_of ranks
    a row's: valid, then leaving the judged region with no error at all, then code in every hole."""
    valid, code = worth(fills)
    holes = [(h.start, h.end) for h in request.holes]
    clean = valid and request.options.constrained and is_clean(request.language, request.text, holes, [f.text for f in fills])
    return valid, clean is True, code


def as_result(fills: list[Fill], indents: list[str], opener: str) -> list[Fill]:
    """A request's best fills as the original request has them: without the indentation moved
    into each hole (:func:`drop_indent`), and the last with its shape's ``opener``."""
    fills = [msgspec.structs.replace(f, text=drop_indent(f.text, ind)) for f, ind in zip(fills, indents)]
    if opener:
        fills[-1] = msgspec.structs.replace(fills[-1], text=fills[-1].text + opener)
    return fills


class Finisher:
    """Finishes a chunk's candidate rows and keeps each request's best.

    ``syntax``: the chunk's syntax constraint (None: no row is constrained); ``tokenizer``: for
    cutting fills at token boundaries. Invariant: :meth:`take` is called once per row, and
    :meth:`best` of a request after all its rows were taken."""

    def __init__(self, tokenizer, syntax):
        self.tokenizer, self.syntax = tokenizer, syntax
        self._best: dict[int, tuple[tuple[bool, bool, bool, float], list[Fill], int]] = {}
        self._all: dict[int, list[tuple[tuple[bool, bool, bool, float], list[Fill], int]]] = {}

    def take(self, r: int, ri: int, request: FillRequest, fills: list[Fill], score: float, filled: int, ran_out: list[bool],
             indents: list[str] | None = None) -> None:
        """Finish row r's ``fills`` (:meth:`finish_row`), a candidate of request ``ri`` with mean
        log-probability ``score`` and ``filled`` tokens, and keep it where it ranks best so far.
        ``indents``: the indentation the engine moved into each hole (engine.fill.line_start_holes);
        a fill whose first line has less of it is judged again as the user's hole, after that
        indentation, would take it (:func:`keep_indent`: a dedented Python line may no longer parse)."""
        fills = self.finish_row(r, request, fills, ran_out)
        kept = [keep_indent(f.text, ind) for f, ind in zip(fills, indents or [])]
        if any(k != f.text for k, f in zip(kept, fills)):
            fills = [msgspec.structs.replace(f, text=k) for f, k in zip(fills, kept)]
            if self.syntax is not None and self.syntax.checked(r):
                valid = self.syntax.final(r, [f.text for f in fills])
                fills = [msgspec.structs.replace(f, valid=valid) for f in fills]
        key = (*self.rank_of(r, fills), score)
        self._all.setdefault(ri, []).append((key, fills, filled))
        if ri not in self._best or key > self._best[ri][0]:
            self._best[ri] = (key, fills, filled)

    def rank_of(self, r: int, fills: list[Fill]) -> tuple[bool, bool, bool]:
        """How row r's finished ``fills`` rank before their score: :func:`worth`, with the rows whose
        fills leave their judged region with no error at all (``SyntaxConstraint.clean``: they also
        mend what the holes' cut broke away from them) after the valid ones."""
        valid, code = worth(fills)
        clean = valid and self.syntax is not None and self.syntax.checked(r) and self.syntax.clean(r, [f.text for f in fills])
        return valid, bool(clean), code

    def best(self, ri: int) -> tuple[list[Fill], int]:
        """Request ``ri``'s best candidate's fills and token count."""
        _, fills, filled = self._best[ri]
        return fills, filled

    def leaders(self, ri: int) -> dict[str, tuple[list[Fill], int]]:
        """Request ``ri``'s candidates that rank first before their score (:meth:`rank_of`), one per
        distinct text of its holes (the best scored of equals), best scored first."""
        top = self._best[ri][0][:3]
        out: dict[str, tuple[list[Fill], int]] = {}
        for key, fills, filled in sorted(self._all[ri], key=lambda c: c[0], reverse=True):
            if key[:3] == top:
                out.setdefault("\x00".join(f.text for f in fills), (fills, filled))
        return out

    def said_all(self, r: int, request: FillRequest, i: int, text: str) -> int | None:
        """Where a fill of hole i of row r, written left to right up to ``text`` (which ends a line),
        has said all it will: the length of ``text`` to keep, or None where it goes on.

        A causal model seldom ends a fill by itself, so the end is read from the text, by rules
        that keep their answer as the fill grows (nothing written after would be kept):

        * finishing would cut it (it repeats itself or the text after the hole, :func:`cut_repeats`;
          in a constrained row, a cursor insertion's syntactic unit has ended, and where the row has
          one hole, ended where the document with it is valid: not a header whose body is to come);
        * the hole's line goes on after it, or a cursor suggestion (no minimum) starts after code
          on its line: a fill ends with its first line (an insertion at a line's start, before
          code, is not inside that line: it inserts whole lines, :func:`text_after`);
        * a blank line after a line of code ends a suggestion, and so does a line indented less
          than the fill's first (it belongs to the block around the hole): both are not kept.
        """
        hole = request.holes[i]
        after = text_after(request, i)
        head = request.text[request.text.rfind("\n", 0, hole.start) + 1 : hole.start]
        cut = cut_repeats(text, head, after)
        if len(cut) < len(text):
            return len(cut)
        if after[: after.find("\n") if "\n" in after else len(after)].strip():
            return text.find("\n")
        if hole.start == hole.end and not hole.min_tokens and head.strip():  # a cursor suggestion after code
            return text.find("\n")  # on its line ends with that line, as an editor's inline suggestion does
        lines = text.split("\n")[:-1]  # whole lines, each ended by a line break; the first goes on from head
        whole = [head + lines[0], *lines[1:]]
        first = next((line for line in whole[:-1] if line.strip()), None)
        if first is not None:
            last = whole[-1]
            if not last.strip() or len(last) - len(last.lstrip()) < len(first) - len(first.lstrip()):
                return len(text) - len(last) - 1
        if self.syntax is None or not self.syntax.checked(r) or request.text[hole.start : hole.end].strip():
            return None
        cut = self.syntax.truncate(r, i, text)
        if cut == text or (len(request.holes) == 1 and self.syntax.judge(r, [cut]) is False):
            return None  # (a unit that leaves its document invalid has not ended: a header before its body)
        return len(cut)

    def finish_row(self, r: int, request: FillRequest, fills: list[Fill], ran_out: list[bool]) -> list[Fill]:
        """Row r's fills as a result has them: cut where they start to loop (infill/engine/repeats.py;
        ``ran_out``: which ran to their window's end), without the line break the text after the hole
        brings, and where the row is constrained, finished by :meth:`_finish_syntax`: where the cut
        leaves it invalid or blank and the whole fill ranks better (the header a loop ran into), the
        whole fill."""
        afters = [request.text[h.end :] for h in request.holes]
        lines_after = [text_after(request, i) for i in range(len(request.holes))]
        heads = [request.text[request.text.rfind("\n", 0, h.start) + 1 : h.start] for h in request.holes]  # the holes' lines
        cut = [msgspec.structs.replace(f, text=join_line_break(cut_repeats(f.text, head, line_after, out), after))
               for f, head, line_after, after, out in zip(fills, heads, lines_after, afters, ran_out)]
        if self.syntax is None or not self.syntax.checked(r):
            return cut
        whole = [msgspec.structs.replace(f, text=join_line_break(f.text, after)) for f, after in zip(fills, afters)]
        finished = self._finish_syntax(r, request, cut)
        if cut != whole and worth(finished) < (True, True):
            finished = max((finished, self._finish_syntax(r, request, whole)), key=worth)
        return finished

    def _finish_syntax(self, r: int, request: FillRequest, fills: list[Fill]) -> list[Fill]:
        """Cut cursor completions at their syntactic unit's end; mark the row's fills valid or not.

        A row still invalid after repair is cut back, hole by hole, to the longest token prefix
        that parses (never below a hole's min_tokens): "print(x" beats "print(x))"; where none
        does, to a line's end with the brackets it leaves open closed (:meth:`_cut_and_close`);
        where that fails too and the text after the hole starts a line, to a prefix that ends its
        line (:meth:`_cut_and_break`). A valid row (so cut back, or not) of a document broken away
        from its holes is cut where it has just mended that, where it does (:meth:`_cut_to_mend`);
        where it does not, and leaves a closer after a hole stray (SyntaxConstraint.strays: the
        hole was cut where a block's opening line stood), it is not valid: it adds no error, but
        the document it leaves does not parse.
        """
        syntax, texts = self.syntax, []
        for i, (h, f) in enumerate(zip(request.holes, fills)):
            insertion = not request.text[h.start : h.end].strip()  # after a line's indentation, maybe
            texts.append(syntax.truncate(r, i, f.text) if insertion else f.text)
        valid = syntax.judge(r, texts)
        if valid is False:
            for i, h in enumerate(request.holes):
                cut = self._cut_back(r, texts, i, max(h.min_tokens, 1))
                cut = cut if cut is not None else self._cut_and_close(r, texts, i)
                if cut is None and (h.end == 0 or request.text[h.end - 1] == "\n"):  # the text after the hole starts a line
                    cut = self._cut_and_break(r, texts, i, max(h.min_tokens, 1))
                if cut is not None:
                    texts, valid = texts[:i] + [cut] + texts[i + 1 :], True
                    break
        if valid and syntax.broken(r):  # (a fill cut back to valid too: its whole text may mend it sooner)
            for i, h in enumerate(request.holes):
                cut = self._cut_to_mend(r, texts, i, fills[i].text, request.text[h.end :])
                if cut is not None:
                    texts = texts[:i] + [cut] + texts[i + 1 :]
                    break
            valid = not syntax.strays(r, texts)  # a closer after a hole left stray: the document does not parse
        return [Fill(text=t, score=f.score, valid=valid) for t, f in zip(texts, fills)]

    def _cut_to_mend(self, r: int, texts: list[str], i: int, text: str, after: str) -> str | None:
        """Fill i (``text``, before a cursor completion's truncation) of valid fills ``texts`` of a
        document broken away from its holes, cut where it has just opened or closed a bracket: at
        one of its first SHORT_CUTS line ends after one, or where it is one line, at one of its
        MAX_CUTS shortest token prefixes that end with one; else whole. Shortest first, the first
        that leaves row r valid with no error at all in its judged region (``SyntaxConstraint.clean``);
        None where none does. A hole cut where a block's opening line stood leaves that block's
        closer stray further down: a fill that opens the block again and goes on (its body again,
        its own ``}``) mends the document where it has just opened it; the text after the hole has
        the rest. A hole cut where a closer stood (a table's row cut after its first values) is
        mended where the fill closes it."""
        brackets = self.syntax.brackets(r, i)  # where it has just opened or closed a bracket
        if "\n" in text.rstrip("\n"):
            cuts = [text[: m + 1] for m, c in enumerate(text) if c == "\n" and m + 1 < len(text) and text[:m].rstrip()[-1:] in brackets]
            cuts = cuts[:SHORT_CUTS]
        else:
            toks = self.tokenizer.encode(text)
            cuts = [c for c in (self.tokenizer.decode(toks[:k]) for k in range(1, len(toks))) if c.rstrip()[-1:] in brackets][:MAX_CUTS]
        if text not in cuts:
            cuts.append(text)  # and whole (a mending fill's: it ends once it has mended the document)
        for cut in cuts:
            cut = join_line_break(cut, after)
            cand = texts[:i] + [cut] + texts[i + 1 :]
            if self.syntax.judge(r, cand) and self.syntax.clean(r, cand):
                return cut
        return None

    def _cut_back(self, r: int, texts: list[str], i: int, min_tokens: int) -> str | None:
        """The longest token prefix (of at least ``min_tokens``) of fill i that makes row r valid,
        found in at most MAX_CUTS (plus one per CUTS_PER_PARSE tokens of the fill) + SHORT_CUTS
        parses; None if none was.

        Longest first, whole lines before the rest when the fill ended a line (it still does).
        A failed parse's first new error, where it lies wholly inside the cut, rules out every
        longer prefix (they hold it too). If MAX_CUTS parses find nothing, the SHORT_CUTS shortest
        prefixes are tried (a long broken fill often has only its first word or line to keep).
        """
        syntax = self.syntax
        toks = self.tokenizer.encode(texts[i])
        prefixes = [self.tokenizer.decode(toks[:k]) for k in range(len(toks) - 1, min_tokens - 1, -1)]
        sizes = {c: len(c.encode("utf-8", "surrogatepass")) for c in prefixes}
        whole_lines = texts[i].endswith("\n")
        limit = len(texts[i].encode("utf-8", "surrogatepass"))  # what is left to try is shorter than this

        def with_cut(cut: str) -> list[str]:
            return texts[:i] + [cut] + texts[i + 1 :]

        def accept(cut: str) -> str | None:  # error_at judged it already: judge reads its cache
            return cut if syntax.judge(r, with_cut(cut)) else None

        for _ in range(MAX_CUTS + len(toks) // CUTS_PER_PARSE):
            left = [c for c in prefixes if sizes[c] < limit]
            cut = next((c for c in left if c.endswith("\n")), None) if whole_lines else None
            cut = cut if cut is not None else next(iter(left), None)
            if cut is None:
                return None
            error = syntax.error_at(r, with_cut(cut), i)
            if error is None:
                return accept(cut)
            prefixes.remove(cut)
            if 0 <= error[0] and error[1] < sizes[cut]:
                limit = min(limit, error[1] + 1)
        for cut in sorted((c for c in prefixes if sizes[c] < limit), key=sizes.get)[:SHORT_CUTS][::-1]:
            if syntax.error_at(r, with_cut(cut), i) is None:
                return accept(cut)
        return None

    def _cut_and_break(self, r: int, texts: list[str], i: int, min_tokens: int) -> str | None:
        """Fill i cut to a token prefix (of at least ``min_tokens``) that ends with a line break: the
        first of at most MAX_CUTS, longest first, that makes row r valid; None if none does. For a
        fill that stops short of its line's end (its window ran out mid-line: ``return a, a, a``)
        where the text after the hole starts a line: every prefix without the break joins it."""
        if texts[i].endswith("\n"):
            return None
        toks = self.tokenizer.encode(texts[i])
        cuts = dict.fromkeys(self.tokenizer.decode(toks[:k]).rstrip(" \t") + "\n" for k in range(len(toks), min_tokens - 1, -1))
        return next((c for c in list(cuts)[:MAX_CUTS] if c.strip() and self.syntax.judge(r, texts[:i] + [c] + texts[i + 1 :])), None)

    def _cut_and_close(self, r: int, texts: list[str], i: int) -> str | None:
        """Fill i cut at its end or a line's end, longest first, down to nothing, with the closers
        of the brackets it leaves open (the constraint's ``close``, steering.Lexer.close): the first
        of at most MAX_CUTS such that makes row r valid; failing those (or where the first leaves
        an error of the document's), each cut with its closers and then one of its language's
        separators (``},``, ``);``: LanguageSpec.separators; a separator alone last, and only where
        it leaves no error at all), the first that leaves no error at all, else the first valid;
        None if none does (or hole i is not steered). Where no prefix
        parses as it is, a loop in a dict ends ``'a': 1,\\n    }`` rather than broken."""
        syntax = self.syntax
        if not syntax.steered(r, i):
            return None
        text = texts[i]
        ends = [m + 1 for m, c in enumerate(text) if c == "\n"]
        cuts = dict.fromkeys([text] + [text[:m] for m in reversed(ends)] + [""])
        closes = {cut: syntax.close(r, i, cut) for cut in cuts}

        def valid(c: str) -> bool:
            return bool(syntax.judge(r, texts[:i] + [c] + texts[i + 1 :]))

        def clean(c: str) -> bool:  # (valid already: judge's cache answers)
            return bool(syntax.clean(r, texts[:i] + [c] + texts[i + 1 :]))

        found = next((c for c in [c for c in closes.values() if c is not None][:MAX_CUTS] if valid(c)), None)
        seps = syntax.separators(r)
        if (found is not None and clean(found)) or not seps:
            return found
        # Then each with what ends a list's item or a statement after its closers (a table's row
        # ``{7, 0x40}`` followed by the next: ``{7, 0x40},``), the cuts that close nothing too, and
        # last the separator alone (a hole where only a statement's ``;`` was cut): the first that
        # leaves no error at all, else the first valid but a separator alone (a ``,`` that parses
        # as C's comma operator where the document stays broken is no fill).
        ended = [_with_separator(c, sep) for cut, closed in closes.items() for c in [closed or cut] if c.strip() or not c for sep in seps]
        ok = [c for c in ended[:MAX_CUTS] if valid(c)]
        return next((c for c in ok if clean(c)), found if found is not None else next((c for c in ok if c not in seps), None))


def _with_separator(text: str, sep: str) -> str:
    """``text`` with ``sep`` after its last character that is not a line break."""
    body = text.rstrip("\n")
    return body + sep + text[len(body) :]
