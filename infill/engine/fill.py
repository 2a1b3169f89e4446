"""The engine: FillRequest in, FillResult out. Owns the model, tokenizer, device and batching.

It cuts each request's text into context segments around the holes, trims them to the model's
context budget (prefix-heavy), encodes the context once, lays out candidate rows (window
lengths x seeds) and denoises all rows of all requests together, then keeps the best candidate
of each request. The LSP server, CLI, websocket server and benchmarks are thin shells around it.

It does not parse files, find holes in text, or know about editors; see cli.py and lsp/ for that.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import gc
import itertools
import logging
import math
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

import msgspec
import torch

from infill.syntax import constraint as syntax_constraints
from infill.model.context_cache import SegmentCache
from infill.errors import ModelLoadError, RequestError
from infill.model import registry
from infill.model.budget import budget_split, trim
from infill.model.device import resolve_device, resolve_dtype
from infill.model.seam import DiffusionModel, Tokenizer
from infill.protocol import Draft, Fill, FillRequest, FillResult, Partial, SamplingOptions, Timings
from infill.engine.drafts import PromptLookup, RecentFills
from infill.engine.finish import (Finisher, as_result, drop_indent, join_scaffold, merge_retry, result_rank, stay_quiet,
                                  strict_request)
from infill.decode.sampler import CancelFlag, Constraint, NoConstraint, Schedule, Windows, committed_scores, denoise_steps
from infill.syntax.hooks import Shape, hooks_for
from infill.syntax.languages import spec_for
from infill.text import healing, snippets

log = logging.getLogger(__name__)

DEFAULT_MODEL_DIR = Path(__file__).resolve().parents[1] / "model" / "default_model"
MAX_HOLE_TOKENS = 512
EXPAND_START = 4  # live slots a variable-length hole starts with (DreamOn's min_gen_len); it grows by expand tokens
RECENT_FILLS = 8  # the latest fills' tokens of a document that its drafts are looked up in (Engine.recent_fills)
RECENT_DOCUMENTS = 16  # the documents filled last whose recent fills are kept
TOKEN_SETS = 64  # the latest token sets an engine keeps (Engine.token_set)
END_BYTES = 48  # the text after a hole read for the tokens it starts with (Engine.end_set): longer than a token
LINE_BREAK = "line break"  # a ban (_Prepared.bans) of every token that holds a line break
ENDING = "ending"  # a ban of one slot's every way to end the fill or its line: the end token, a token that holds a line break


AHEAD_TOKENS = 64  # Engine.encode_ahead looks this many typed tokens ahead: a prefix start that moves sooner is encoded
AHEAD_CHUNK = 16  # ... and encodes its context this many tokens a model call: a keystroke that comes during one waits for
# it (64 took about 400 ms on two AVX2 cores, the dense product; 16 run as a keystroke's tokens do)
CHARS_PER_TOKEN = 4  # about, in code: how far ahead a cut by characters is looked (Engine.prepare's grow)
MAX_SNIPPETS = 32  # a request's last context snippets that are read at all


@dataclass(frozen=True)
class EngineConfig:
    model_dir: Path = DEFAULT_MODEL_DIR  # an HF-layout directory (config.json, model.safetensors, tokenizer.json)
    device: str = "auto"  # auto | cpu | cuda[:N]
    context_tokens: int | None = None  # context budget; None = what the model was trained on
    prefix_share: float | None = None  # of the budget, what the prefix gets when both sides are long; None: the
    # model's (Engine.prefix_share: all of it for a model that reads only what precedes its holes, else 0.75)
    tokens_per_step: int = 2  # default schedule: window slots / tokens_per_step steps
    candidates: int = 2  # default candidates per request (window lengths x seeds)
    max_batch_slots: int = 4096  # rows x window slots denoised together, at most
    context_cache_tokens: int = 32768  # encoded context kept for reuse across fills: our model's segment states
    # (0 = none), a causal model's prefix states (infill/model/hf/causal.py; its latest row is always kept)
    threads: int | None = None  # torch CPU threads; None = torch's default
    precision: str = "auto"  # auto | fp32 | bf16 (auto: bf16 where the hardware multiplies it natively)
    cache_mode: str = "exact"  # exact | approximate: context reuse across steps for a model whose context sees the
    # windows (infill/model/hf/model.py); a model with an exact segment cache (ours) is exact either way
    rerank_candidates: int = 8  # candidates per request when it sets none, for a model that scores text (a causal
    # model): the greedy fill and draws, ranked by the text after the hole (Engine.pick); 8 passed 12 more HumanEval
    # single-line tasks of a fresh 200 than 4 and 3 fewer, 12 no more than 8 (BENCHMARKS.md, v2.10)
    rerank_temperature: float = 0.7  # the draws' temperature (a greedy request's; a sampling request keeps its own)
    rerank_lines: int = 4  # the lines of code after the hole that rank them (suffix_head)
    drop_behind: float | None = 20.0  # a causal model's draw that already scores this much (nats) under a finished
    # candidate of its request with code stops there and is no candidate (left_behind; None: every row runs to its
    # end). Paired on fresh HumanEval samples: BENCHMARKS.md, v2.31
    lookahead: int = 3  # a causal model's speculative steps: tokens guessed by prompt lookup (infill/engine/drafts.py)
    # and checked in one model call; the fill is the same, fewer calls write it (0: one slot per call). With the
    # committed slot, 4 rows: the CPU's 4-bit and int8 kernels run rows in blocks of 4, and a 5th row costs a
    # second block (keystroke fills 2-11% faster than with 4 in five typing runs, the same fills: BENCHMARKS.md, v2.22)
    echo_branches: int = 3  # a ranked line's fill that only echoes the next line gets this many more greedy fills,
    # each turning off the echo one token further on (Engine.echo_branches)
    suffix_lines: int | None = None  # a causal model reads this many lines after the last hole's line before the
    # prefix, as a snippet named for the file (Engine.snippet_tokens): the code below the hole; 0: none; None: as many
    # as the model was adapted to read (capabilities.suffix_lines: its window adapter's, else none)
    related_tokens: int = 256  # at most this many tokens of a request's context snippets (other files), taken from
    # the prefix's budget and never more than half the budget (Engine.snippet_tokens; 0: snippets are ignored)


@dataclass
class _Prepared:
    """A request cut into tokenized context segments and hole windows."""

    request: FillRequest
    segments: list[list[int]]  # len(holes) + 1 token lists, trimmed to the budget
    windows: list[int] = field(default_factory=list)  # max slots per hole
    tokenize_ms: float = 0.0
    indents: list[str] = field(default_factory=list)  # indentation moved from the prefix into each hole
    shape: Shape = field(default_factory=Shape)  # its hole's, as stand-in fills tell (an opener goes into the fill)
    leads: list[list[int]] = field(default_factory=list)  # per hole, the tokens its fill starts with, committed before denoising
    heals: list[bytes] = field(default_factory=list)  # per hole, the bytes of the context's last tokens before it (healing.heal_count), taken
    # into the fill (its first token must start with them; they are dropped from the fill's text)
    bans: list[tuple[int, int | str] | None] = field(default_factory=list)  # per hole, (slot, token): that slot of its
    # window may not take that token (an echo branch, Engine.echo_branches); (slot, LINE_BREAK): from that slot on, no
    # slot may take a token that breaks the line (a mend branch, Engine.mend_branch); (slot, ENDING): that slot may
    # neither end the fill nor break its line (a retry of a fill that wrote nothing, Engine.unlike)


@contextlib.contextmanager
def gc_paused():
    """Python's cyclic garbage collector paused for a fill, and restored after as it was.

    A constrained fill allocates many short-lived small objects (lexer states, token texts) that
    reference counting frees; the collections they would trigger find nothing to free and cost a
    constrained single-line fill about 2% of its time (HumanEval single-line, 2-core CPU)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def validate(request: FillRequest) -> None:
    """Raise RequestError unless the holes are in range, ordered and disjoint."""
    if not request.holes:
        raise RequestError("the request has no holes")
    n = len(request.text)
    prev_end = 0
    for i, h in enumerate(request.holes):
        if not (0 <= h.start <= h.end <= n):
            raise RequestError(f"hole {i} [{h.start}, {h.end}) is outside the text (length {n})")
        if h.start < prev_end:
            raise RequestError(f"hole {i} overlaps or precedes the hole before it")
        if not 1 <= h.max_tokens <= MAX_HOLE_TOKENS:
            raise RequestError(f"hole {i}: max_tokens must be between 1 and {MAX_HOLE_TOKENS}")
        if not 0 <= h.min_tokens <= h.max_tokens:
            raise RequestError(f"hole {i}: min_tokens must be between 0 and max_tokens")
        prev_end = h.end


def segment_texts(request: FillRequest) -> list[str]:
    """The text before, between and after the holes (len(holes) + 1 pieces)."""
    out, at = [], 0
    for h in request.holes:
        out.append(request.text[at : h.start])
        at = h.end
    out.append(request.text[at:])
    return out


def sticky_start(n: int, keep: int, quantum: int) -> int:
    """Where to start keeping at most ``keep`` of ``n`` items: at a multiple of ``quantum``, so
    the start moves only once every ``quantum`` appended items."""
    return min(n, max(0, -(-(n - keep) // quantum) * quantum))


def line_start_holes(request: FillRequest) -> tuple[FillRequest, list[str]]:
    """Start each hole that sits after a line's indentation at the line's start instead.

    The model sees the indentation as part of the fill, tokenized as in running text ("    " +
    " return", not "        " + "return"); a prefix that ends in bare indentation otherwise reads
    as an unusual token boundary and draws whitespace. Returns the moved request and, per hole,
    the indentation to take off the fill again (drop_indent).
    """
    holes, indents = [], []
    for h in request.holes:
        line_start = request.text.rfind("\n", 0, h.start) + 1
        indent = request.text[line_start : h.start]
        if indent and not indent.strip(" \t") and (not holes or holes[-1].end <= line_start):
            holes.append(msgspec.structs.replace(h, start=line_start))
            indents.append(indent)
        else:
            holes.append(h)
            indents.append("")
    if not any(indents):
        return request, indents
    return msgspec.structs.replace(request, holes=holes), indents


def candidate_plan(options: SamplingOptions, default: int, left_to_right: bool = False,
                   variable: bool = False) -> list[tuple[float, int | None]]:
    """(window scale, seed) for each candidate row: window lengths first, then seeds. Left to right
    (a causal model) a shorter window only cuts the same fill: every row has the whole window, the
    first greedy (seed None) unless the request samples, the others draws. A variable-length model
    finds its own length in the whole window: one row when greedy, else one per seed."""
    n = options.candidates or default
    if left_to_right:
        return [(1.0, None if options.temperature <= 0 else options.seed)] + [(1.0, options.seed + i) for i in range(1, n)]
    if variable:
        return [(1.0, options.seed + i) for i in range(n if options.temperature > 0 else 1)]
    scales = [1.0, 0.5, 0.75, 0.25]
    if options.temperature <= 0:  # greedy: seeds make no difference, vary only the length
        return [(scales[i % len(scales)], options.seed) for i in range(min(n, len(scales)))]
    n_scales = min(2, n)
    return [(scales[i % n_scales], options.seed + i // n_scales) for i in range(n)]


def left_behind(scores: list[float], writing: list[bool], rows: list[int], seeds: list[int | None], gap: float,
                counts: set[int]) -> list[int]:
    """The draw rows (``seeds``: not None) still ``writing`` whose committed tokens already score
    (``scores``) more than ``gap`` under a finished row of the same request (``rows``: each row's
    request) that ``counts`` (one that wrote code: a blank fill ranks under every fill with code,
    whatever their scores, Finisher.rank_of). Under a frontier schedule committed tokens can only
    lower a fill's score (sampler.committed_scores), so such a row would end at least that far under
    a fill that ranks with it before the score: a runaway draw that repeats or wanders to its
    window's end. A request's greedy row always runs to its end, and so does every row while none
    of its request's counts."""
    best: dict[int, float] = {}
    for r, ri in enumerate(rows):
        if not writing[r] and r in counts:
            best[ri] = max(best.get(ri, -math.inf), scores[r])
    return [r for r, ri in enumerate(rows)
            if writing[r] and seeds[r] is not None and ri in best and scores[r] < best[ri] - gap]


@dataclass
class Behind:
    """What Engine.drop_behind keeps over one round's steps: the rows it stopped (no candidates),
    and whether each finished row's fills hold code."""

    dropped: set[int] = field(default_factory=set)
    code: dict[int, bool] = field(default_factory=dict)


def suffix_head(after: str, lines: int, chars: int = 1024) -> str:
    """The start of the text after a hole, up to its ``lines``-th line that holds code (at most
    ``chars`` characters): what candidates are ranked by (Engine.pick)."""
    out, code = [], 0
    for line in after[:chars].splitlines(keepends=True):
        out.append(line)
        code += bool(line.strip())
        if code >= lines:
            break
    return "".join(out)


def needs_retry(p: _Prepared, result: FillResult, cancel: CancelFlag | None) -> bool:
    """Is ``result`` a constrained fill judged invalid, with time for another round (not
    cancelled, no deadline: a deadline's fill returns what it has)? Not one that adds no error but
    leaves a closer after its hole stray (syntax.constraint.strays): the mend round
    (:meth:`Engine.mend_branch`) is the one for it."""
    o = p.request.options
    return (o.constrained and o.retry and not o.deadline_ms and not result.below_floor and not (cancel is not None and cancel.is_set())
            and any(f.valid is False for f in result.fills)
            and not syntax_constraints.strays(p.request, [ind + f.text for ind, f in zip(p.indents, result.fills)]))


@dataclass
class _Layout:
    """Candidate rows of a chunk: which request each row fills, and where everything sits."""

    rows: list[int]  # request index of each row
    ctx_pos: torch.Tensor  # [R, Lc] absolute positions of the context tokens
    win_pos: torch.Tensor  # [R, W] absolute positions of the window slots
    hole: torch.Tensor  # [R, W] hole number of each slot, -1 for padding
    no_pad: torch.Tensor  # [R, W] slots that may not be pad (a hole's min_tokens)
    seeds: list[int | None]  # per row; None: greedy among sampled rows
    schedules: list[Schedule]  # per request
    spare: torch.Tensor | None = None  # [R, W] slots a variable-length hole starts without (pad, unseen)


class Engine:
    def __init__(self, model: DiffusionModel, tokenizer: Tokenizer, config: EngineConfig = EngineConfig(), model_id: str = "model"):
        self.model = model
        self.tokenizer = tokenizer
        self.config = config
        self.model_id = model_id
        self.device = model.device
        self.dtype = model.dtype
        self.context_cache = SegmentCache(config.context_cache_tokens)
        if hasattr(model, "set_context_cache"):  # a model that keeps its own context states (a causal model)
            model.set_context_cache(config.context_cache_tokens)
        self.recent_fills = RecentFills(RECENT_FILLS, RECENT_DOCUMENTS)  # draft sources per document (PromptLookup's recent)
        self._token_sets: dict[tuple[bytes, bool], torch.Tensor] = {}
        self._vocab_bytes: list[tuple[bytes, int]] | None = None  # (bytes, id), sorted
        if tokenizer.mask_id != model.mask_id or tokenizer.pad_id != model.pad_id:
            raise ModelLoadError("tokenizer.json and config.json disagree on the mask/pad token ids")
        if tokenizer.vocab_size > model.vocab_size:
            raise ModelLoadError("tokenizer.json has more tokens than the model's vocabulary")

    @classmethod
    def load(cls, config: EngineConfig = EngineConfig()) -> "Engine":
        directory = Path(config.model_dir)
        if not directory.is_dir():
            raise ModelLoadError(f"model directory {directory} does not exist")
        if config.threads:
            torch.set_num_threads(config.threads)
        device = resolve_device(config.device)
        dtype = resolve_dtype(config.precision, device)
        model, tokenizer = registry.load(directory, device, dtype)
        if hasattr(model, "set_cache_mode"):
            model.set_cache_mode(config.cache_mode)
        log.info("loaded %s (%.1fM parameters) on %s in %s", model.name, model.n_params / 1e6, device, dtype)
        return cls(model, tokenizer, config, model_id=model.name)

    # -- preparing requests ---------------------------------------------------------------

    def budget(self) -> int:
        return self.config.context_tokens or self.model.max_context

    def prefix_share(self) -> float:
        """Of the budget, what the prefix gets when both sides are long: ``EngineConfig.prefix_share``,
        else all of it for a left-to-right model (it encodes only what precedes its last hole's
        slots: the text after that hole would take tokens it never reads), else 0.75."""
        if self.config.prefix_share is not None:
            return self.config.prefix_share
        return 1.0 if self.model.capabilities.left_to_right else 0.75

    def prepare(self, request: FillRequest, shape: Shape | None = None, grow: int = 0) -> _Prepared:
        """Cut, tokenize and trim a request; ``shape``: its hole's (its language's hooks' shape,
        infill/syntax/hooks.py) where the caller has one already (else stand-in fills find it).
        ``grow``: its prefix's start where it will be once about that many more tokens are typed
        at its end (:meth:`encode_ahead`; CHARS_PER_TOKEN characters a token for the cut by characters)."""
        validate(request)
        t0 = time.perf_counter()
        request, indents = line_start_holes(request)
        hooks = hooks_for(request.language)
        form = shape if shape is not None else hooks.first_round(hooks.shape_of(request))
        head = self.snippet_tokens(request)
        budget = self.budget() - len(head)
        texts = segment_texts(request)
        texts[-1] = form.opener + texts[-1]
        # Cut far-away text by characters first (at a line start) so a huge file costs nothing.
        # Cut points move in coarse steps, so that while the user types at the end of the
        # prefix its first tokens stay the same and its encoding can be reused (context_cache).
        limit = budget * 12
        if len(texts[0]) + grow * CHARS_PER_TOKEN > limit:
            start = min(sticky_start(len(texts[0]) + grow * CHARS_PER_TOKEN, limit, quantum=limit // 4), len(texts[0]))
            cut = texts[0][start:]
            texts[0] = cut[cut.find("\n") + 1 :] if "\n" in cut else cut
        if len(texts) > 1 and len(texts[-1]) > limit:
            cut = texts[-1][:limit]
            texts[-1] = cut[: cut.rfind("\n") + 1] if "\n" in cut else cut
        tokens = self.tokenizer.encode_batch(texts)
        keep = budget_split([len(t) for t in tokens], budget, self.prefix_share())
        n = len(tokens[0])
        if n + grow > keep[0][1]:  # the prefix keeps its end: start at a sticky point
            keep[0] = (0, max(0, n - sticky_start(n + grow, keep[0][1], quantum=max(1, budget // 8))))
        segments = [trim(t, k) for t, k in zip(tokens, keep)]
        segments[0] = head + segments[0]
        windows = [h.max_tokens for h in request.holes]
        # A known indentation of a fill's first line is committed up front (as the language's hooks
        # know it: Python's last hole's, and each scaffold line's: a small model's likeliest first
        # tokens are often not it).
        widths = hooks.lead_widths(form, len(windows))
        leads = [self.indent_tokens(w) if w is not None else [] for w in widths]
        leads = [lead if len(lead) < window else [] for lead, window in zip(leads, windows)]
        heals = [b""] * len(windows)
        if self.model.capabilities.left_to_right:  # a hole whose indentation is committed (a lead) is not healed:
            for h in range(len(windows)):  # the language's steering reads its fill from that indentation on
                after = request.text[request.holes[h].end : request.holes[h].end + 1]
                k = self.heal(segments[h], after) if not leads[h] else 0
                if k:
                    heals[h] = b"".join(self.tokenizer.token_bytes(t) for t in segments[h][-k:])
                    segments[h], windows[h] = segments[h][:-k], windows[h] + k
        return _Prepared(request, segments, windows, (time.perf_counter() - t0) * 1000, indents, form, leads, heals,
                         [None] * len(windows))

    def encode_ahead(self, request: FillRequest, grow: int = AHEAD_TOKENS, stop: CancelFlag | None = None) -> int:
        """Encode now, into the model's kept context states, the context that a fill of ``request``
        will have once its prefix's start first moves (``prepare``'s sticky start: a moved start
        means the whole context is encoded again, seconds on a CPU), where that happens within
        ``grow`` more tokens typed at its hole, up to its last line break (the line being typed
        will change). Then the fill that finds the start moved encodes only what was typed since.
        The first move, not the start ``grow`` tokens on: the cut by characters and the cut by
        tokens move at different points, and a start two moves on helps no fill until the second.
        ``AHEAD_CHUNK`` tokens a model call, checking ``stop`` before each; the tokens kept so far
        stay. Nothing for a model that keeps no context states (``capabilities.prefix_cache``) or a
        request of several holes. Returns how many of the context's tokens are kept now (those kept
        already cost nothing)."""
        if not self.model.capabilities.prefix_cache or len(request.holes) != 1:
            return 0
        context = functools.cache(lambda g: self.prepare(request, grow=g).segments[0])
        if context(grow) == context(0):
            return 0  # the start stays: the fills to come find this context kept as it is
        stopped = lambda: stop is not None and stop.is_set()  # noqa: E731
        # the start only moves on as the prefix grows: bisect for its first move (cut short by a stop)
        ahead = context(bisect.bisect_left(range(grow + 1), True, key=lambda g: stopped() or context(g) != context(0)))
        end = max((k + 1 for k, t in enumerate(ahead) if b"\n" in self.tokenizer.token_bytes(t)), default=0)
        done = 0
        while done < end and not stopped():
            done = min(done + AHEAD_CHUNK, end)
            self.model.prefetch(ahead[:done])
        return done

    def suffix_lines(self) -> int:
        """How many lines after a hole's line a causal model reads before its prefix (EngineConfig.suffix_lines, else
        as many as the model was adapted to read)."""
        if self.config.suffix_lines is not None:
            return self.config.suffix_lines
        return self.model.capabilities.suffix_lines

    def snippet_tokens(self, request: FillRequest) -> list[int]:
        """The tokens of the request's context snippets (other files' lines, and where
        ``suffix_lines`` asks, a causal model's lines after the last hole's line) that stand before
        its text (infill/text/snippets.py: each under a comment naming its file, the last, the best,
        nearest the text, kept first, each cut to its first lines that fit what is left of
        ``related_tokens`` and of half the budget, none where not even one line fits)."""
        room = min(self.config.related_tokens, self.budget() // 2)
        pieces = [(s.path, s.text) for s in request.context[-MAX_SNIPPETS:]]
        lines = self.suffix_lines()
        if lines and self.model.capabilities.left_to_right:
            below = snippets.further_down(request.text[request.holes[-1].end :], lines)
            if below.strip():
                pieces.append((snippets.further_down_name(request.path), below))
        if not pieces:
            return []
        spec = spec_for(request.language)
        comment = spec.line_comment[0] if spec is not None and spec.line_comment else None
        return snippets.lay_out(self.tokenizer.encode, pieces, comment, room)

    def heal(self, segment: list[int], after: str = "") -> int:
        """How many of ``segment``'s last tokens a left-to-right fill after it should write again
        (token healing, infill/text/healing.py: whitespace, or a word or an operator cut at the
        hole that ``after``, the character after the hole, does not go on; a word taken back whole
        as far as some token starts with its bytes), or 0. The fill's first slot is bound to the
        tokens that start with their bytes; the syntax constraint reads that slot's token without
        them (SyntaxConstraint.heals)."""
        return healing.heal_tokens(segment, self.tokenizer.token_bytes, after, self.vocab_bytes())

    def token_set(self, head: bytes, anywhere: bool = False) -> torch.Tensor:
        """[V] bool: the tokens whose bytes start with ``head`` (``anywhere``: that hold it). The
        latest TOKEN_SETS are kept (a healed word's head changes with every keystroke); a prefix's
        tokens are one run of the vocabulary sorted by bytes."""
        key = (head, anywhere)
        ok = self._token_sets.pop(key, None)
        if ok is None:
            vocab = self.vocab_bytes()
            if anywhere:
                ids = [i for b, i in vocab if head in b]
            else:
                ids = []
                for b, i in itertools.islice(vocab, bisect.bisect_left(vocab, (head,)), None):
                    if not b.startswith(head):
                        break
                    ids.append(i)
            ok = torch.zeros(self.model.vocab_size, dtype=torch.bool)
            ok[ids] = True
            ok = ok.to(self.device)
            while len(self._token_sets) >= TOKEN_SETS:
                del self._token_sets[next(iter(self._token_sets))]
        self._token_sets[key] = ok
        return ok

    def vocab_bytes(self) -> list[tuple[bytes, int]]:
        """Every token's (bytes, id), sorted by bytes."""
        if self._vocab_bytes is None:
            self._vocab_bytes = healing.vocabulary(self.tokenizer)
        return self._vocab_bytes

    def end_set(self, after: bytes) -> torch.Tensor:
        """[V] bool: the tokens that ``after`` starts with (their bytes are a non-empty head of it)."""
        vocab, ids = self.vocab_bytes(), []
        for n in range(1, min(len(after), END_BYTES) + 1):
            at = bisect.bisect_left(vocab, (after[:n],))
            while at < len(vocab) and vocab[at][0] == after[:n]:
                ids.append(vocab[at][1])
                at += 1
        ok = torch.zeros(self.model.vocab_size, dtype=torch.bool)
        ok[ids] = True
        return ok.to(self.device)

    def slot_set(self, head: bytes, ban: int | str | None) -> torch.Tensor:
        """[V] bool: the tokens a slot bound to healed bytes ``head`` ("": none) and ``ban`` may take:
        those that start with ``head``, less ``ban`` (a token; LINE_BREAK: every token holding one;
        ENDING: those and the end token)."""
        ok = self.token_set(head) if head else torch.ones(self.model.vocab_size, dtype=torch.bool, device=self.device)
        if ban in (LINE_BREAK, ENDING):
            ok = ok & ~self.token_set(b"\n", anywhere=True)
            if ban == ENDING:
                ok[self.model.eos_id] = False
            return ok
        if ban is not None:
            ok = ok.clone()
            ok[ban] = False
        return ok

    def indent_tokens(self, width: int) -> list[int]:
        """The tokens that indent a line by ``width`` spaces before its first word, as running
        text has them (the last space goes with the word: "   " + " for")."""
        toks = self.tokenizer.encode(" " * width + "x")[:-1]
        return toks if all(not self.tokenizer.decode([t]).strip(" ") for t in toks) else []

    # -- filling ----------------------------------------------------------------------------

    def fill(
        self,
        request: FillRequest,
        cancel: CancelFlag | None = None,
        on_draft: Callable[[Draft], None] | None = None,
        constraint: Constraint | None = None,
        drafts: int = 1,
    ) -> FillResult:
        return self.fill_batch([request], cancel=cancel, on_draft=on_draft, constraint=constraint, drafts=drafts)[0]

    def forget(self, contexts: bool = True) -> None:
        """Drop what fills leave for later ones: the recent fills that drafts are looked up in, and
        with ``contexts`` every context state kept for reuse (the segment cache's, and a model's own:
        a causal model's), so that the next fill encodes its context from nothing, as a document's
        first fill does. Neither decides a fill's text (but for rounding); both its time."""
        self.recent_fills.clear()
        if contexts:
            self.context_cache.clear()
            forget = getattr(self.model, "forget_contexts", None)
            if forget is not None:
                forget()

    @gc_paused()
    @torch.inference_mode()
    def fill_batch(
        self,
        requests: list[FillRequest],
        cancel: CancelFlag | None = None,
        on_draft: Callable[[Draft], None] | None = None,
        constraint: Constraint | None = None,
        drafts: int = 1,
    ) -> list[FillResult]:
        """Fill many requests, denoising them together in chunks of at most max_batch_slots.

        ``on_draft`` gets the drafts of ``requests[0]`` alone (:meth:`draft`), every ``drafts``
        denoising steps of its first round, in the worker's thread; none of the other requests'
        (as the engine client's ``fill_batch``, infill/serve/client.py).

        A constrained request whose best candidate is still invalid gets one more round, left to
        right (finish.strict_request), with its language hooks' strict shape (at least closing the
        brackets the text after the hole leaves open; Python's: where a block header would fit,
        filled with a header's head; a left-to-right model's may not start as the first round's
        fill did, :meth:`unlike`); its result is the retry's where that is valid. A hole that
        its language's hooks fill as several (``scaffold``: Python's nested block headers, one hole
        per header's head) is filled so, in one round as strict as a retry, and joined again.
        A request that stopped under its ``min_score`` (FillResult.below_floor) gets no other round.
        """
        prepared = [self.prepare(r) for r in requests]
        # A hole that its language fills as several holes (a scaffold: infill/syntax/hooks.py).
        work = {}
        if constraint is None:
            for i, p in enumerate(prepared):
                split = hooks_for(p.request.language).scaffold(p.request, p.shape)
                if split is not None:
                    work[i] = split
        scaffolded = {i: prepared[i] for i in work}
        # Its heads need every token steered: it is filled as a retry would be, in one round.
        for i, (request, shape) in work.items():
            strict = hooks_for(request.language).strict(shape)
            prepared[i] = self.prepare(strict_request(request, strict), strict)
        results: list[FillResult | None] = [None] * len(requests)
        drafting = (on_draft, max(1, drafts)) if on_draft is not None else None
        self._fill_prepared(prepared, list(range(len(prepared))), results, cancel, drafting, constraint)
        again = [i for i, r in enumerate(results) if constraint is None and i not in work and needs_retry(prepared[i], r, cancel)]
        if again:
            retried: list[FillResult | None] = [None] * len(requests)
            shapes = {i: hooks_for(requests[i].language).strict(prepared[i].shape) for i in again}
            strict = {i: self.unlike(self.prepare(strict_request(requests[i], shapes[i]), shapes[i]), results[i]) for i in again}
            self._fill_prepared(strict, again, retried, cancel, None, None)
            for i in again:
                results[i] = merge_retry(results[i], retried[i])
        if constraint is None:
            self.echo_round(prepared, results, [i for i in range(len(requests)) if i not in work and not results[i].below_floor],
                            cancel)
        for i, p in scaffolded.items():
            results[i] = join_scaffold(p.request, p.indents[0], work[i][0], results[i])
        if constraint is None:  # after every round: a cursor completion that cannot be made valid says nothing
            results = [stay_quiet(r, res) for r, res in zip(requests, results)]
        return results  # type: ignore[return-value]

    def _fill_prepared(self, prepared, members_of, results, cancel, drafting, constraint) -> None:
        """Fill prepared requests ``members_of`` (indices into ``prepared`` and ``results``) in chunks;
        ``drafting`` (on_draft, every n steps) or None: the drafts of request 0, whose chunk alone gets it."""
        groups: dict[tuple, list[int]] = {}  # requests that can share one schedule
        for i in members_of:
            o = prepared[i].request.options
            groups.setdefault((o.steps, o.threshold, o.policy, o.temperature, o.top_p, o.min_score), []).append(i)
        for members in groups.values():
            chunk: list[int] = []
            slots = 0
            for i in members:
                p = prepared[i]
                need = sum(p.windows) * len(self.candidate_plan(p.request))
                if chunk and slots + need > self.config.max_batch_slots:
                    self._fill_chunk([prepared[j] for j in chunk], chunk, results, cancel,
                                     drafting if chunk[0] == 0 else None, constraint)
                    chunk, slots = [], 0
                chunk.append(i)
                slots += need
            if chunk:
                self._fill_chunk([prepared[j] for j in chunk], chunk, results, cancel,
                                 drafting if chunk[0] == 0 else None, constraint)

    def _fill_chunk(self, prepared, indices, results, cancel, drafting, constraint) -> None:
        """Fill one chunk of prepared requests; ``drafting`` (on_draft, every n steps): its first
        request's drafts (:meth:`draft`)."""
        t_start = time.perf_counter()
        pad_id, mask_id = self.model.pad_id, self.model.mask_id
        dev = self.device
        # 1. Encode each request's context once (reusing segments encoded by earlier fills).
        t0 = time.perf_counter()
        cache = self.context_cache.encode(self.model, [p.segments for p in prepared])
        Lc = cache.length
        context_ms = (time.perf_counter() - t0) * 1000

        # 2. Lay out candidate rows: each request x (window scale, seed).
        lay = self.layout(prepared, Lc)
        rows, R = lay.rows, len(lay.rows)
        cpos_t, hole_t = lay.ctx_pos, lay.hole
        rows_t = torch.tensor(rows, dtype=torch.long, device=dev)
        # Syntax constraint (steer, repair, judge) unless the caller brought its own.
        syntax = None
        if constraint is None:
            syntax = syntax_constraints.for_chunk([p.request for p in prepared], rows, hole_t, self.tokenizer, pad_id, mask_id,
                                                  [p.shape for p in prepared], [p.heals for p in prepared],
                                                  frontier=lay.schedules[0].frontier)
        bound = self.model.bind_context(cache, rows_t, cpos_t.to(dev))
        state = self.initial_state(prepared, lay)
        # Requests in a chunk share their sampling options; each row keeps its request's steps.
        schedule = lay.schedules[0]
        row_steps = torch.tensor([lay.schedules[ri].steps for ri in rows], dtype=torch.long)
        gens = self.generators(lay, schedule)
        deadlines = [p.request.options.deadline_ms for p in prepared if p.request.options.deadline_ms]
        deadline = time.monotonic() + min(deadlines) / 1000 if deadlines else None

        # 3. Denoise all rows together.
        t0 = time.perf_counter()
        finisher, ends = Finisher(self.tokenizer, syntax), {}
        finished_at = torch.zeros(R, dtype=torch.long)
        drafter = self.drafter(prepared, rows, schedule)
        floor = prepared[0].request.options.min_score if schedule.frontier else None  # (a chunk shares it)
        holes, sunk, behind = max(len(p.heals) for p in prepared), None, Behind()
        for step in denoise_steps(self.model, bound, state, schedule, gens, constraint or syntax or NoConstraint(), cancel,
                                  deadline, row_steps, drafter):
            if schedule.frontier:
                self.end_said(state, step.committed, [prepared[ri] for ri in rows], finisher, ends)
                if not step.done:
                    self.drop_behind(state, rows, prepared, lay.seeds, ends, behind)
            finished_at = torch.where((finished_at == 0) & ~state.masked.any(1).cpu(), step.step, finished_at)
            if drafting is not None and step.step % drafting[1] == 0:
                drafting[0](self.draft(prepared[0], step, state.hole[0], step.step, ends))
            if floor is not None and not step.done:
                scores = self.sunk(state, floor, holes)
                if scores is not None:
                    sunk = (scores, step.step)
                    break
        denoise_ms = (time.perf_counter() - t0) * 1000
        if sunk is not None:
            self.keep_drafts(state, [prepared[ri].request.path for ri in rows])
            self.below_floor(prepared, indices, results, rows, state, sunk, Timings(
                tokenize_ms=0.0, context_ms=context_ms, denoise_ms=denoise_ms, steps=sunk[1],
                constrain_ms=syntax.seconds * 1000 if syntax is not None else 0.0), t_start)
            return

        # 4. Decode every row; finish it and keep each request's best candidate (infill/engine/finish.py).
        ids = state.ids.cpu()
        logprob = state.logprob.float().cpu()
        hole = state.hole.cpu()
        for r in range(R):
            if r in behind.dropped:
                continue
            fills, score, filled = self.decode_row(ids[r], logprob[r], hole[r], prepared[rows[r]].heals, prepared[rows[r]].request.path)
            fills = self.keep_ends(fills, r, ends)
            ran_out = [bool((ids[r][hole[r] == h] != pad_id).all()) for h in range(len(fills))]
            finisher.take(r, rows[r], prepared[rows[r]].request, fills, score, filled, ran_out, prepared[rows[r]].indents)
        t0 = time.perf_counter()
        picked = [self.pick(finisher, ri, p) for ri, p in enumerate(prepared)]
        rank_ms = (time.perf_counter() - t0) * 1000
        total_ms = (time.perf_counter() - t_start) * 1000
        for ri, p in enumerate(prepared):
            fills, filled = picked[ri]
            timings = Timings(
                tokenize_ms=p.tokenize_ms,
                context_ms=context_ms,
                denoise_ms=denoise_ms,
                total_ms=total_ms + p.tokenize_ms,
                steps=int(max(finished_at[r] for r in range(R) if rows[r] == ri)),
                tokens_filled=filled,
                context_tokens=sum(len(s) for s in p.segments),
                candidates=rows.count(ri),
                constrain_ms=syntax.seconds * 1000 if syntax is not None else 0.0,
                rank_ms=rank_ms,
            )
            fills = as_result(fills, p.indents, p.shape.opener)
            results[indices[ri]] = FillResult(fills=fills, timings=timings, model=self.model_id)

    def keep_drafts(self, state: Windows, paths: list[str | None]) -> None:
        """Each row's tokens committed so far in each hole join its document's ``recent_fills``
        (``paths[r]``: row r's request's path), as a finished fill's do (:meth:`decode_row`): the
        next keystroke's fill, often the same one stopped at the same place, drafts them instead of
        writing them a step at a time."""
        ids, hole = state.ids.cpu(), state.hole.cpu()
        for r in range(ids.shape[0]):
            for h in range(int(hole[r].max()) + 1):
                tok = self.hole_tokens(ids[r], hole[r], h)
                if tok:
                    self.recent_fills.add(paths[r], tok)

    def drop_behind(self, state: Windows, rows: list[int], prepared: list[_Prepared], seeds: list[int | None],
                    ends: dict[tuple[int, int], int], behind: Behind) -> None:
        """Stop the rows that :func:`left_behind` names (``rows``: each row's request in ``prepared``;
        ``seeds``: None for a request's greedy row; ``ends``: where end_said ended fills) and add them to
        ``behind.dropped``: their slots left are padded, and they are no candidates (the caller never
        finishes them). Nothing to do (and no device read) without a draw: a cursor's greedy fill."""
        if self.config.drop_behind is None or all(s is None for s in seeds):
            return
        writing = state.masked.any(1).cpu().tolist()
        if all(writing) or not any(writing):
            return
        for r, w in enumerate(writing):
            if not w and r not in behind.code and r not in behind.dropped:
                p = prepared[rows[r]]
                texts = [self.decode_hole(state.ids[r], state.hole[r], h, p.heals[h]) for h in range(len(p.heals))]
                behind.code[r] = all(t[: ends.get((r, h), len(t))].strip() for h, t in enumerate(texts))
        holes = max(len(p.heals) for p in prepared)
        scores = committed_scores(state, self.model.pad_id, holes).sum(1).cpu().tolist()
        counts = {r for r, code in behind.code.items() if code}
        for r in left_behind(scores, writing, rows, seeds, self.config.drop_behind, counts):
            state.ids[r] = torch.where(state.masked[r], self.model.pad_id, state.ids[r])
            state.masked[r] = False
            behind.dropped.add(r)

    def sunk(self, state: Windows, floor: float, holes: int) -> torch.Tensor | None:
        """The rows' committed_scores [R, holes] where every row has a hole whose fill will score
        under ``floor`` (a frontier schedule's committed tokens can only lower it), else None."""
        scores = committed_scores(state, self.model.pad_id, holes).cpu()
        return scores if bool((scores < floor).any(1).all()) else None

    def below_floor(self, prepared, indices, results, rows, state: Windows, sunk, timings: Timings, t_start: float) -> None:
        """Each request's result where its chunk stopped under the floor (``sunk``: the rows'
        committed_scores and the step): :meth:`floor_result` of its rows."""
        scores, _ = sunk
        for ri, p in enumerate(prepared):
            mine = [r for r in range(len(rows)) if rows[r] == ri]
            results[indices[ri]] = self.floor_result(p, state, mine, scores[mine], timings, t_start)

    def floor_result(self, p: _Prepared, state: Windows, mine: list[int], scores: torch.Tensor, timings: Timings,
                     t_start: float) -> FillResult:
        """``p``'s result where its rows ``mine`` of ``state`` stopped under the floor (``scores``:
        their committed_scores): empty fills, scored by the candidate whose committed tokens score
        highest, valid None (nothing was judged), FillResult.below_floor, and what that candidate
        had written (:meth:`partial`)."""
        best = max(range(scores.shape[0]), key=lambda r: float(scores[r, : len(p.heals)].sum()))
        fills = [Fill(text="", score=float(scores[best, h])) for h in range(len(p.heals))]
        partial = [self.partial(state, mine[best], h, p.heals[h]) for h in range(len(p.heals))]
        total_ms = (time.perf_counter() - t_start) * 1000
        t = msgspec.structs.replace(timings, tokenize_ms=p.tokenize_ms, total_ms=total_ms + p.tokenize_ms,
                                    context_tokens=sum(len(s) for s in p.segments), candidates=scores.shape[0])
        return FillResult(fills=fills, timings=t, model=self.model_id, below_floor=True, partial=partial)

    def partial(self, state: Windows, r: int, h: int, heal: bytes) -> Partial:
        """Hole h of row r's committed tokens (a frontier schedule's: its first slots), as text and
        log-probabilities (:class:`infill.protocol.Partial`, which committed_scores sums)."""
        slots = (state.hole[r] == h).nonzero().flatten().tolist()
        ids, masked, lp = state.ids[r].tolist(), state.masked[r].tolist(), state.logprob[r].float().tolist()
        data, cuts, logprobs = b"", [], []
        for k in slots:
            if masked[k] or ids[k] == self.model.pad_id:
                break
            data += self.tokenizer.token_bytes(ids[k])
            cuts.append(len(data))
            logprobs.append(lp[k])
        skip = len(heal) if data.startswith(heal) else 0
        data = data[skip:]
        ends = [len(data[: max(c - skip, 0)].decode("utf-8", "ignore")) for c in cuts]
        return Partial(text=data.decode("utf-8", "ignore"), ends=ends, logprobs=logprobs)

    def layout(self, prepared: list[_Prepared], ctx_len: int) -> "_Layout":
        """Candidate rows in document order: context positions, window slots and their holes."""
        rows, ctx_pos, win_pos, win_hole, win_nopad, seeds, schedules = [], [], [], [], [], [], []
        variable, win_spare = self.model.capabilities.expand_id is not None, []
        for ri, p in enumerate(prepared):
            plan = self.candidate_plan(p.request)
            for scale, seed in plan:
                lengths = [max(1, math.ceil(w * scale), len(lead) + 1) for w, lead in zip(p.windows, p.leads)]
                cpos, wpos, whole, nopad, spare, at = [], [], [], [], [], 0
                for h, seg in enumerate(p.segments):
                    cpos.extend(range(at, at + len(seg)))
                    at += len(seg)
                    if h < len(lengths):
                        wpos.extend(range(at, at + lengths[h]))
                        whole.extend([h] * lengths[h])
                        need = min(p.request.holes[h].min_tokens, lengths[h])
                        nopad.extend([i < need for i in range(lengths[h])])
                        start = max(EXPAND_START, need, len(p.leads[h]) + 1) if variable else lengths[h]
                        spare.extend([i >= start for i in range(lengths[h])])
                        at += lengths[h]
                rows.append(ri)
                ctx_pos.append(cpos)
                win_pos.append(wpos)
                win_hole.append(whole)
                win_nopad.append(nopad)
                win_spare.append(spare)
                seeds.append(seed)
            schedules.append(self.schedule(p.request.options, max(sum(p.windows), 1), rows=len(plan)))
        R, W = len(rows), max(len(w) for w in win_pos)
        lay = _Layout(rows, torch.zeros((R, ctx_len), dtype=torch.long), torch.zeros((R, W), dtype=torch.long),
                      torch.full((R, W), -1, dtype=torch.long), torch.zeros((R, W), dtype=torch.bool), seeds, schedules)
        for r in range(R):
            lay.ctx_pos[r, : len(ctx_pos[r])] = torch.tensor(ctx_pos[r], dtype=torch.long)
            lay.win_pos[r, : len(win_pos[r])] = torch.tensor(win_pos[r], dtype=torch.long)
            lay.hole[r, : len(win_hole[r])] = torch.tensor(win_hole[r], dtype=torch.long)
            lay.no_pad[r, : len(win_nopad[r])] = torch.tensor(win_nopad[r], dtype=torch.bool)
        if variable:
            lay.spare = torch.zeros((R, W), dtype=torch.bool)
            for r in range(R):
                lay.spare[r, : len(win_spare[r])] = torch.tensor(win_spare[r], dtype=torch.bool)
        return lay

    def drafter(self, prepared: list[_Prepared], rows: list[int], schedule: Schedule) -> PromptLookup | None:
        """The guesses of a speculative (lookahead) schedule's steps, for rows filling ``prepared[rows[r]]``."""
        if not (schedule.frontier and schedule.lookahead):
            return None
        return PromptLookup([p.segments for p in prepared], rows, [self.recent_fills.of(p.request.path) for p in prepared])

    def initial_state(self, prepared: list[_Prepared], lay: "_Layout") -> Windows:
        """The rows' windows before the first step: all masked, each hole's lead tokens committed,
        each healed hole's first slot bound to the tokens that start with the healed bytes."""
        dev, valid = self.device, lay.hole >= 0
        live = valid if lay.spare is None else valid & ~lay.spare
        state = Windows(ids=torch.where(live, self.model.mask_id, self.model.pad_id).to(dev), pos=lay.win_pos.to(dev),
                        hole=lay.hole.to(dev), masked=live.to(dev), logprob=torch.zeros(lay.hole.shape, device=dev),
                        no_pad=lay.no_pad.to(dev))
        self.commit_leads(state, prepared, lay.rows)
        bound: dict[tuple[int, int], tuple[bytes, int | str | None]] = {}  # (row, slot): (healed bytes, ban)
        for r, ri in enumerate(lay.rows):
            slots = [(lay.hole[r] == h).nonzero().flatten() for h in range(len(prepared[ri].heals))]
            for h, b in enumerate(prepared[ri].heals):
                if b:
                    bound[(r, int(slots[h][0]))] = (b, None)
            for h, ban in enumerate(prepared[ri].bans):
                if ban is not None:  # a line break is banned from its slot to the window's end
                    for k in slots[h][ban[0] :] if ban[1] == LINE_BREAK else slots[h][ban[0] : ban[0] + 1]:
                        at = (r, int(k))
                        bound[at] = (bound.get(at, (b"", None))[0], ban[1])
        if bound:
            kinds = sorted(set(bound.values()), key=str)
            only = torch.full(lay.hole.shape, -1, dtype=torch.long)
            for (r, k), kind in bound.items():
                only[r, k] = kinds.index(kind)
            state.only, state.only_sets = only.to(dev), torch.stack([self.slot_set(*kind) for kind in kinds])
        if self.model.capabilities.left_to_right:
            self.bind_ends(state, prepared, lay)
        return state

    def bind_ends(self, state: Windows, prepared: list[_Prepared], lay: "_Layout") -> None:
        """Bind each hole's slots to the tokens that the text after it starts with (Windows.end_sets):
        a causal model's pad is its end of text, never its word on where a fill ends, so a fill's end
        is scored as the text after the hole going on there. A hole at the end of the text keeps the pad."""
        afters: dict[bytes, int] = {}  # the text after a hole: its row of end_sets
        per_request: dict[int, list[int]] = {}  # each request's holes' rows (-1: none), once for its candidate rows
        ends = torch.full(lay.hole.shape, -1, dtype=torch.long)
        for r, ri in enumerate(lay.rows):
            if ri not in per_request:
                request, rows = prepared[ri].request, []
                for h, hole in enumerate(request.holes):
                    stop = request.holes[h + 1].start if h + 1 < len(request.holes) else len(request.text)
                    after = request.text[hole.end : min(stop, hole.end + END_BYTES)].encode("utf-8")
                    rows.append(afters.setdefault(after, len(afters)) if after else -1)
                per_request[ri] = rows
            for h, row in enumerate(per_request[ri]):
                ends[r][lay.hole[r] == h] = row
        if afters:
            state.ends, state.end_sets = ends.to(self.device), torch.stack([self.end_set(a) for a in afters])

    def commit_leads(self, state: Windows, prepared: list[_Prepared], rows: list[int]) -> None:
        """Commit each row's lead tokens (a known indentation) at the start of its holes' windows."""
        for r, ri in enumerate(rows):
            for h, lead in enumerate(prepared[ri].leads):
                if lead:
                    slots = (state.hole[r] == h).nonzero().flatten()[: len(lead)]
                    state.ids[r, slots] = torch.tensor(lead, dtype=state.ids.dtype, device=state.ids.device)
                    state.masked[r, slots] = False

    def end_said(self, state: Windows, committed: torch.Tensor, prepared: list[_Prepared], finisher: Finisher,
                 ends: dict[tuple[int, int], int]) -> None:
        """End each hole whose left-to-right fill just ended a line and said all it will
        (Finisher.said_all): pad the rest of its window and note in ``ends`` [(row, hole)] how much
        of its text to keep (and tell the syntax constraint, whose repair judges that text alone).
        A causal model seldom ends a fill by itself. A step that committed several slots
        (speculative steps) is judged slot by slot, in order: what came after the line end that
        ends a fill is padded too."""
        slot = torch.arange(state.ids.shape[1], device=state.ids.device)
        for r, k in committed.nonzero().tolist():
            h = int(state.hole[r, k])
            if (r, h) in ends or "\n" not in self.tokenizer.decode([int(state.ids[r, k])]):
                continue
            upto = torch.where(slot <= k, state.ids[r], self.model.mask_id)
            text = self.decode_hole(upto, state.hole[r], h, prepared[r].heals[h])
            keep = finisher.said_all(r, prepared[r].request, h, text[: text.rfind("\n") + 1]) if "\n" in text else None
            if keep is not None:
                rest = (state.masked[r] | (slot > k)) & (state.hole[r] == h)
                state.ids[r, rest] = self.model.pad_id
                state.masked[r, rest] = False
                ends[(r, h)] = keep
                if finisher.syntax is not None:
                    finisher.syntax.keep(r, h, keep)

    @staticmethod
    def keep_ends(fills: list[Fill], r: int, ends: dict[tuple[int, int], int]) -> list[Fill]:
        """Row r's fills cut where end_said ended them."""
        return [msgspec.structs.replace(f, text=f.text[: ends[(r, h)]]) if (r, h) in ends else f for h, f in enumerate(fills)]

    def decode_row(self, ids: torch.Tensor, logprob: torch.Tensor, hole: torch.Tensor, heals: list[bytes],
                   path: str | None) -> tuple[list[Fill], float, int]:
        """One row's fills (each cut at its first pad, its healed bytes dropped; each scored by the
        joint log-probability of its tokens and the pad that ended it, Fill.score), the row's mean
        log-probability (how its candidates rank, whatever their length), its token count. Each
        fill's tokens join its document's (``path``'s) ``recent_fills``, where that document's next
        fills' drafts look (a keystroke's fill often writes what the last one wrote)."""
        pad = self.model.pad_id
        fills, total, count, filled = [], 0.0, 0, 0
        for h, heal in enumerate(heals):
            slots = (hole == h).nonzero().flatten()
            tok = ids[slots]
            pads = (tok == pad).nonzero().flatten()
            n = int(pads[0]) if len(pads) else len(tok)
            lp = logprob[slots[: min(n + 1, len(tok))]]  # the tokens and the pad that ended them
            total += float(lp.sum())
            count += len(lp)
            filled += n
            if n:
                self.recent_fills.add(path, tok[:n].tolist())
            fills.append(Fill(text=self.text_of(tok[:n].tolist(), heal), score=float(lp.sum())))
        return fills, total / max(count, 1), filled

    def draft(self, p: _Prepared, step, hole: torch.Tensor, number: int, ends: dict[tuple[int, int], int]) -> Draft:
        """Request ``p``'s draft after denoising step ``number``: each hole's text so far in the
        step's row 0 (its first candidate; ``hole``: that row's slot holes), masks dropped, cut where
        :meth:`end_said` ended it (``ends``; a speculative step may have committed past that end),
        as text for the request's own hole (without the indentation moved into it,
        :func:`drop_indent`), and the slots still masked in that row."""
        indents = p.indents or [""] * len(p.heals)
        texts = [self.decode_hole(step.ids[0], hole, h, b) for h, b in enumerate(p.heals)]
        texts = [drop_indent(t[: ends[(0, h)]] if (0, h) in ends else t, indents[h]) for h, t in enumerate(texts)]
        return Draft(step=number, texts=texts, masked=int(step.masked[0].sum()))

    def decode_hole(self, ids: torch.Tensor, hole: torch.Tensor, h: int, heal: bytes = b"") -> str:
        """Text of hole h in one row so far (:meth:`hole_tokens`)."""
        return self.text_of(self.hole_tokens(ids, hole, h), heal)

    def hole_tokens(self, ids: torch.Tensor, hole: torch.Tensor, h: int) -> list[int]:
        """Hole h's committed tokens in one row so far: up to the first pad, masks dropped."""
        tok = ids[hole == h].tolist()
        if self.model.pad_id in tok:
            tok = tok[: tok.index(self.model.pad_id)]
        return [t for t in tok if t != self.model.mask_id]

    def text_of(self, tokens: list[int], heal: bytes = b"") -> str:
        """The text of a fill's tokens, without the healed bytes it starts with."""
        if not heal:
            return self.tokenizer.decode(tokens)
        data = b"".join(self.tokenizer.token_bytes(t) for t in tokens if t not in (self.model.pad_id, self.model.mask_id))
        return data.removeprefix(heal).decode("utf-8", "replace")

    @property
    def default_candidates(self) -> int:
        """Candidate rows per request when it sets none: for a model that scores text, the greedy
        fill and draws to rank (rerank_candidates); else the configured number."""
        return self.config.rerank_candidates if self.model.capabilities.scores_text else self.config.candidates

    def candidate_plan(self, request: FillRequest) -> list[tuple[float, int | None]]:
        """A request's candidate rows (:func:`candidate_plan`). A model that scores text ranks the
        draws of one-hole requests only (Engine.pick): a request with several holes that sets no
        number gets its greedy fill alone (draws chosen by their mean score are no better, and
        each costs a row)."""
        default = self.default_candidates
        if self.model.capabilities.scores_text and len(request.holes) > 1:
            default = 1
        caps = self.model.capabilities
        return candidate_plan(request.options, default, caps.left_to_right, caps.expand_id is not None)

    def unlike(self, p: _Prepared, first: FillResult) -> _Prepared:
        """A retry ``p`` of a left-to-right model's one hole that may not start as the first round's
        invalid fill ``first`` did (its first token after the retry's lead is banned; where it wrote
        nothing, its first slot may neither end it nor break its line): every step
        of such a model is steered already, so a retry that may start alike goes the same way
        (a class's body filled with a ``def`` header that no line may follow; a stub's ``...`` cut
        after its first ``.`` left empty). ``p`` elsewhere."""
        if not self.model.capabilities.left_to_right or len(p.request.holes) != 1 or first.fills[0].valid is not False:
            return p
        if not first.fills[0].text.strip():
            return replace(p, bans=[(len(p.leads[0]), ENDING)])
        word = self.first_word(p, first.fills[0].text)
        return replace(p, leads=[word[0]], bans=[word[1]]) if word is not None else p

    def first_word(self, p: _Prepared, fill: str) -> tuple[list[int], tuple[int, int]] | None:
        """Where ``fill`` (a fill of p's one hole, as its result has it) writes its first token of
        code after p's lead: (the tokens before it: p's lead, then the healed bytes and indentation
        as ``fill`` wrote them; (slot, token) of it). A ban there makes a fill start otherwise; one
        on a token of whitespace would only make it write the same indentation in other tokens.
        None where ``fill`` has no such token inside the window."""
        toks = self.tokenizer.encode(p.heals[0].decode("utf-8", "replace") + p.indents[0] + fill)
        lead = p.leads[0]
        if toks[: len(lead)] != lead:
            return None
        k = max(len(lead), self.code_start(toks))
        if k >= min(len(toks), p.windows[0] - 1):
            return None
        return toks[:k], (k, toks[k])

    def echo_round(self, prepared: list[_Prepared], results: list[FillResult], members: list[int], cancel) -> None:
        """Branch the ranked fills that only echo the line after the hole (echo_branches) or leave
        the document broken where the line could go on to mend it (mend_branch), and keep, of the
        first fill and the branches', the best as Engine.pick ranks them."""
        branches = {i: self.echo_branches(prepared[i], results[i]) + self.mend_branch(prepared[i], results[i]) for i in members}
        branches = {i: b for i, b in branches.items() if b}
        if not branches or (cancel is not None and cancel.is_set()):
            return
        flat = [b for i in branches for b in branches[i]]
        got: list[FillResult | None] = [None] * len(flat)
        self._fill_prepared(flat, list(range(len(flat))), got, cancel, None, None)
        at = 0
        for i, b in branches.items():
            mine, at = got[at : at + len(b)], at + len(b)
            results[i] = self.best_of(prepared[i], [results[i], *mine])

    def echo_branches(self, p: _Prepared, result: FillResult) -> list[_Prepared]:
        """Where a ranked request's one hole fills whole lines (nothing else on its line) and its fill
        is blank or the start of the next line of code after it cut short (a causal model that cannot
        see the text after the hole wants to write that line; the echo was cut, finish.cut_repeats),
        greedy fills of it that may not write that line: branch j commits the line's first j tokens
        after its indentation (and the healed bytes) and bans the next one. None elsewhere."""
        req, n = p.request, self.config.echo_branches
        if not n or not self.ranks_one_hole(req) or result.fills[0].valid is False:
            return []
        hole, text = req.holes[0], req.text
        if text[text.rfind("\n", 0, hole.start) + 1 : hole.start].strip():
            return []  # code before the hole on its line
        after = text[hole.end :]
        lines = after.split("\n")
        if hole.end > 0 and text[hole.end - 1] != "\n":
            if lines[0].strip():
                return []  # code after the hole on its line
            lines = lines[1:]
        line = next((x for x in lines if x.strip()), None)
        fill = result.fills[0].text
        if line is None or not (not fill.strip() or (line.strip().startswith(fill.strip()) and not fill.endswith("\n"))):
            return []
        echo = self.tokenizer.encode(p.heals[0].decode("utf-8", "replace") + line + "\n")  # as the fill would write it
        k0 = self.code_start(echo)
        lead = p.leads[0]
        out = []
        for j in range(n):
            at = k0 + j
            if at >= len(echo) - 1 or at + 1 >= p.windows[0]:
                break
            leads = echo[:at]
            if lead and leads[: len(lead)] != lead:
                break  # the hole's own indentation is not the line's
            out.append(self.branch(p, leads, (at, echo[at])))
        return out

    def mend_branch(self, p: _Prepared, result: FillResult) -> list[_Prepared]:
        """Where a ranked request's one hole got a fill that adds no error but leaves its document broken where
        the text after the hole closes brackets nothing before it opens (syntax.constraint.mendable:
        a hole cut where a block's opening line stood leaves that block's closer stray, and the fill
        ended its line without opening it: ``}`` + nothing, where `` else {`` stood), or an invalid
        fill where the text after the hole is such a body (syntax.constraint.headless: a header that
        ends before its ``{``, a statement where a ``match`` stood), greedy fills
        that mend (Shape.mends: they may not break their first line or end before it opens what
        the text after it closes, and where the model would, it writes the opener; the finisher
        cuts them back to where they mend the document, Finisher._cut_to_mend): one that commits
        the fill's first line, and one that writes a first line of its own, not started with the
        fill's first word (:meth:`first_word`: a fill that began a comment or a statement that no
        opener can follow); and where the line must open several brackets (a callback's
        ``(() => {``), one per way the document's own lines that open them end (syntax.constraint.block_tails),
        that end put after the model's fill (:meth:`tail_branch`). An invalid fill on a line of its own inside a block whose closer the
        text after it has, where no body lost its opening line, gets one that starts by closing that
        block and must open the next (a line that did both was cut: ``} catch (E e) {``, where a
        ``try`` is owed its ``catch``; syntax.constraint.reopens).
        None elsewhere."""
        req = p.request
        if p.shape.opener or not req.options.constrained or not self.ranks_one_hole(req):
            return []
        fill, spans = result.fills[0], [(h.start, h.end) for h in req.holes]
        mends = replace(p.shape, mends=True)
        if fill.valid is False and not syntax_constraints.headless(req):
            closer = syntax_constraints.reopens(req)
            leads = self.lead_with(p, closer) if closer else None
            return [self.branch(p, leads, None, mends)] if leads is not None else []
        if fill.valid is None or (fill.valid and not syntax_constraints.mendable(req.language, req.text, spans, [p.indents[0] + fill.text])):
            return []
        # the fill's first line; where it is blank, its first line of code (a fill that broke its
        # line first wrote the hole's line below it: `\n  constructor`)
        first, *rest = fill.text.split("\n")
        line = first if first.strip() else next((x.strip() for x in rest if x.strip()), "")
        # and lines begun as the document's own lines that open such a block begin (`if`, `func`),
        # and lines whose end is written as theirs end, the model writing what comes before it
        heads = [w for w in syntax_constraints.block_heads(req.language, req.text, [(h.start, h.end) for h in req.holes], p.indents[0])
                 if not line.strip().startswith(w)]
        started = [self.branch(p, leads, None, mends) for leads in (self.lead_with(p, w) for w in heads) if leads is not None]
        started += [self.tail_branch(p, tail) for tail in syntax_constraints.block_tails(req, p.indents[0])]
        if not line.strip():
            return [self.branch(p, list(p.leads[0]), None, mends), *started]
        # and a line of its own, not started as the fill's (which may be a comment, an assignment)
        word = self.first_word(p, line)
        fresh = [self.branch(p, *word, mends)] if word is not None else []
        leads = self.lead_with(p, line)
        return [self.branch(p, leads, None, mends)] * (leads is not None) + fresh + started

    def tail_branch(self, p: _Prepared, tail: str) -> _Prepared:
        """The greedy fill of p's one hole followed by ``tail`` (Shape.opener: the syntax checks
        judge the fill with it after it, and it goes into the fill; the finisher cuts a fill that
        wrote its own back to the longest that parses so). A model that reads the text after the
        hole reads the tail first, that segment kept to the length it had (its end trimmed) so the
        context stays in budget; a left-to-right model, which reads nothing after its window,
        writes the head alone as it would."""
        last = p.segments[-1]
        if last:
            last = self.tokenizer.encode(tail + self.tokenizer.decode(last))[: len(last)]
        q = replace(p, segments=[*p.segments[:-1], last])
        return self.branch(q, list(p.leads[0]), None, replace(p.shape, opener=tail))

    def lead_with(self, p: _Prepared, text: str) -> list[int] | None:
        """The tokens of p's one hole's window that write ``text`` first (after the healed bytes and
        the hole's indentation), where they keep p's lead and leave the window a slot; else None."""
        leads = self.tokenizer.encode(p.heals[0].decode("utf-8", "replace") + p.indents[0] + text)
        lead = p.leads[0]
        return leads if leads[: len(lead)] == lead and len(leads) + 1 < p.windows[0] else None

    def code_start(self, tokens: list[int]) -> int:
        """How many of ``tokens`` lead them with whitespace alone (a line break, indentation)."""
        k = 0
        while k < len(tokens) and not self.tokenizer.decode([tokens[k]]).strip():
            k += 1
        return k

    def ranks_one_hole(self, request: FillRequest) -> bool:
        """Is ``request`` one hole whose candidates Engine.pick ranks by the text after it?"""
        return len(request.holes) == 1 and self.model.capabilities.scores_text and len(self.candidate_plan(request)) > 1

    @staticmethod
    def branch(p: _Prepared, leads: list[int], ban: tuple[int, int | str] | None, shape: Shape | None = None) -> _Prepared:
        """The greedy fill of p's one hole that starts with ``leads`` (committed) under ``ban`` (and ``shape``)."""
        req = p.request
        req = msgspec.structs.replace(req, options=msgspec.structs.replace(req.options, candidates=1))
        return _Prepared(req, p.segments, p.windows, 0.0, p.indents, shape or p.shape, [leads], p.heals, [ban])

    def rank_in(self, p: _Prepared, fills: list[Fill]) -> tuple[bool, bool, bool]:
        """finish.result_rank of a result's ``fills`` for p's request (as_result's indentation undone)."""
        return result_rank(p.request, [msgspec.structs.replace(f, text=p.indents[0] + f.text) for f in fills])

    def best_of(self, p: _Prepared, results: list[FillResult]) -> FillResult:
        """Of one-hole ``results`` of the same request, the best: first by finish.result_rank, then by
        the joint log-probability of the fill and the lines after the hole (as Engine.pick)."""
        ranks = [self.rank_in(p, r.fills) for r in results]
        top = max(ranks)
        pool = {}
        for r, rank in zip(results, ranks):  # the fills as the request's holes have them: as_result's indentation and opener undone
            if rank == top:
                text = r.fills[0].text
                text = p.indents[0] + (text[: len(text) - len(p.shape.opener)] if p.shape.opener and text.endswith(p.shape.opener) else text)
                pool.setdefault(text, r)
        texts = list(pool)
        best = pool[texts[self.rank(p, texts)]] if len(texts) > 1 else pool[texts[0]]
        t = results[0].timings
        timings = msgspec.structs.replace(t, rounds=t.rounds + len(results) - 1, total_ms=sum(r.timings.total_ms for r in results),
                                          candidates=sum(r.timings.candidates for r in results))
        return msgspec.structs.replace(best, timings=timings)

    def rank(self, p: _Prepared, texts: list[str]) -> int:
        """Which of the one-hole fill ``texts`` (as p's request has them) makes the document likeliest."""
        hole = p.request.holes[0]
        after = p.shape.opener + suffix_head(p.request.text[hole.end :], self.config.rerank_lines)
        head = p.heals[0].decode("utf-8", "replace")
        scores = self.model.continuation_logprob(p.segments[0], self.tokenizer.encode_batch([head + t + after for t in texts]))
        return max(range(len(texts)), key=scores.__getitem__)

    @staticmethod
    def generators(lay: "_Layout", schedule: Schedule) -> list[torch.Generator | None] | None:
        """One random generator per row where the schedule samples (None for a greedy row)."""
        if schedule.temperature <= 0:
            return None
        return [None if s is None else torch.Generator().manual_seed(s) for s in lay.seeds]

    def pick(self, finisher: Finisher, ri: int, p: _Prepared) -> tuple[list[Fill], int]:
        """Request ``ri``'s fills and token count: the finisher's best candidate; or, where the model
        scores text and the request has one hole, of the candidates that rank first before their
        score (Finisher.rank_of), the one that makes the document likeliest: the joint log-probability
        of the fill and the first lines of the text after the hole (suffix_head), which a causal
        model's fill never read. (The fill's own score stays what the model gave it.)"""
        leaders = finisher.leaders(ri)
        if not self.model.capabilities.scores_text or len(p.request.holes) != 1 or len(leaders) < 2:
            return finisher.best(ri)
        texts = list(leaders)
        return leaders[texts[self.rank(p, texts)]]

    def default_steps(self, slots: int) -> int:
        """The denoising steps for ``slots`` masked slots when a request sets none (the step rule):
        a causal model's one slot a step, else ``tokens_per_step`` slots a step."""
        if self.model.capabilities.left_to_right:
            return max(1, slots)
        return max(1, math.ceil(slots / self.config.tokens_per_step))

    def schedule(self, options: SamplingOptions, slots: int, rows: int = 1) -> Schedule:
        """The schedule of a request's ``rows`` candidate rows with ``slots`` window slots each."""
        if self.model.capabilities.left_to_right:  # a causal model: one slot per step, in order; a greedy
            temperature = options.temperature  # request's draws (rows after its greedy first) at rerank_temperature
            if temperature <= 0 and rows > 1:
                temperature = self.config.rerank_temperature
            steps = min(options.steps or slots, slots)  # fewer: the fill ends when they are spent (a busy batch's lighten)
            return Schedule(steps=max(1, steps), policy="left-to-right", temperature=temperature, top_p=options.top_p,
                            frontier=True, lookahead=self.config.lookahead)
        steps = options.steps or self.default_steps(slots)
        return Schedule(
            steps=max(1, steps),
            threshold=options.threshold,
            policy=options.policy,
            temperature=options.temperature,
            top_p=options.top_p,
        )
