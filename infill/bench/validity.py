"""Syntax-validity benchmark: holes cut from real code the model never saw, filled with and without constraints.

The default model is trained on Python only, so code in the other languages is out of its
training corpus by construction. ``bench/fetch_validity_sources.sh`` puts such code under
``bench/sources/<language>`` for every language of ``grammars/languages.toml`` (pinned npm
packages, Debian packages and PyPI sdists; for Python, packages the corpus does not hold; each
language's ``SOURCES.txt`` names them and their licences); ``--sources`` may point at any directory.

Holes: the source files (by the language's extensions, minified and ``testdata`` files skipped)
are shuffled with ``seed`` and the first ``max_files`` that parse with no ERROR or MISSING node
are kept; their code lines (not blank, not comment-only, with a letter or digit, at most 200
characters) are pooled, so files weigh by their size, and ``holes`` of them are drawn with the
same seed. Each drawn line becomes one hole, of the kinds asked for in turn (by default the
first two, as in the quality benchmark's single-line tasks):

- ``line``: the whole statement line after its indentation (the newline stays);
- ``rest``: the rest of the line after a cursor drawn inside it;
- ``inside`` (on request, ``--kinds``): what a pair of brackets on the line holds (a call's
  arguments, a subscript, a list), its closer and the rest of the line kept, as an editor that
  closes brackets as they are typed has them at a cursor after the opener (drawn from the lines
  that hold such a pair);
- ``string`` (on request): the text of a string literal on the line, its quotes kept (drawn from
  the lines that hold one with text and no interpolation);
- ``block`` (on request): 2 to 6 whole consecutive lines of a block (a function body, a class
  body, a file's top level), cut from the start of the drawn line (its indentation goes with the
  hole) to the end of a later line (its newline stays): whole sibling statements, the first
  starting the drawn line and the last, which ends its line, drawn among those that keep the
  hole within 6 lines (drawn from the lines that start such a run; comments never end one).

The request is the file with the hole's text removed and an insertion hole of ``max_tokens``
at the cut. Every hole is filled twice, constrained and unconstrained (the same batches, run
one after the other, so a busy machine slows both alike), and each fill is judged with the
engine's own check (``infill.constraints.is_valid``):

- ``valid``: the original file with the fill in place of the removed text has no ERROR or
  MISSING node that the original did not have (the originals have none), judged in the whole
  file (and by the language's compiler check where it has one) - the headline. The engine judges
  only the region around a hole, which can differ: a decorator left above a removed method ends
  that region with an error, while in the file it decorates the next method (v2.30);
- ``valid_cut``: the same check against the cut document, which is what the engine judges
  (errors the cut causes away from the hole count as its baseline), and ``engine_valid``, what
  the engine reported (constrained fills only);
- ``clean_cut``: the cut document with the fill has no error at all in its judged region
  (``verdict``, one parse with ``valid_cut``): what the cut broke, the fill mended. A fill that adds no error but leaves the
  cut document broken (``engine_valid_left_broken`` counts the engine's) seldom parses in the
  original, which has none.

Also: exact match with the removed text (as is and whitespace-stripped) and the engine's
latency. Per-hole records go to ``results.jsonl``, the rest to ``summary.json``.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import logging
import random
import time
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import msgspec
from rich.console import Console
from rich.table import Table

from infill.bench.quality import DEFAULT_OUT_ROOT, REPO_ROOT, FillEngine, _fill_one, _progress, machine_info, write_results
from infill.syntax.constraint import is_valid, verdict
from infill.errors import InfillError, InputError
from infill.syntax.languages import grammar as lookup_grammar, spec_for
from infill.protocol import FillRequest, FillResult, Hole, Policy, SamplingOptions, Snippet
from infill.text import related
from infill.syntax.document import closing_quote, error_spans
from infill.text.textpos import byte_to_str, str_to_byte

log = logging.getLogger(__name__)

DEFAULT_SOURCES = REPO_ROOT / "bench" / "sources"
DEFAULT_LANGUAGES = ("javascript", "go")
KINDS = ("line", "rest", "inside", "string", "block")
DEFAULT_KINDS = ("line", "rest")
MODES = ("constrained", "unconstrained")
# Each timed batch starts from the same state in either mode (nothing the other mode's fill of the
# same holes left: recent fills that drafts are looked up in, kept context states): "cold", from
# nothing, as a document's first fill; "warm", after the same batch filled once, untimed (its
# contexts' states kept, its fills forgotten), as an editor's document that was filled before.
CONTEXTS = ("cold", "warm")
MAX_LINE_CHARS = 200
MAX_FILE_BYTES = 200_000
_COMMENT_STARTS = ("//", "/*", "*", "#")


@dataclass(frozen=True)
class Cut:
    """One hole: ``original[start:end]`` removed from file ``path``."""

    path: str  # relative to the sources directory
    original: str
    start: int  # str offsets into original
    end: int
    kind: str  # one of KINDS
    line: int  # 1-based

    @property
    def reference(self) -> str:
        return self.original[self.start:self.end]

    @property
    def text(self) -> str:
        """The document the engine sees: the original without the hole's text."""
        return self.original[:self.start] + self.original[self.end:]

    def request(self, language: str, max_tokens: int, options: SamplingOptions,
                context: Sequence[Snippet] = ()) -> FillRequest:
        return FillRequest(text=self.text, holes=[Hole(self.start, self.start, max_tokens)], language=language,
                           options=options, path=self.path, context=list(context))


# --- sources and holes ------------------------------------------------------------------------


def language_name(language: str) -> str:
    spec = spec_for(language)
    if spec is None:
        raise InputError(f"unknown language {language!r}")
    if lookup_grammar(spec.name) is None:
        raise InputError(f"the tree-sitter grammar for {spec.name} is not installed ({spec.pin})")
    return spec.name


def source_dir(sources: Path | str, language: str) -> Path:
    """``sources/<language>`` when it exists (the fetch script's layout), else ``sources`` itself."""
    root = Path(sources)
    sub = root / language_name(language)
    return sub if sub.is_dir() else root


def source_files(root: Path | str, language: str) -> list[Path]:
    """The language's files under ``root`` (sorted), minified, oversized and testdata files left out."""
    root = Path(root)
    if not root.is_dir():
        raise InputError(f"no sources at {root} (run bench/fetch_validity_sources.sh or set --sources)")
    exts = {"." + e.lower() for e in spec_for(language).extensions}
    out = []
    for p in sorted(root.rglob("*")):
        name = p.name.lower()
        if p.suffix.lower() not in exts or not p.is_file() or "testdata" in p.relative_to(root).parts:
            continue
        if ".min." in name or "-min." in name or p.stat().st_size > MAX_FILE_BYTES:
            continue
        out.append(p)
    return out


def package_context(root: Path, language: str, cuts: Sequence[Cut]) -> list[list[Snippet]]:
    """Each cut's context snippets (``--related``): the windows most like the code before its hole
    among the other files of its package (the first folder of its path), as an editor's other
    open files of the project would give them (infill/text/related.py)."""
    by_package: dict[str, list[Path]] = {}
    for f in source_files(root, language):
        by_package.setdefault(f.relative_to(root).parts[0], []).append(f)
    texts: dict[Path, str | None] = {}

    def text_of(f: Path) -> str | None:
        if f not in texts:
            try:
                texts[f] = f.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                texts[f] = None
        return texts[f]

    out = []
    for c in cuts:
        package = c.path.split("/", 1)[0]
        documents = [(f.relative_to(root).as_posix(), t) for f in by_package.get(package, [])
                     if f.relative_to(root).as_posix() != c.path and (t := text_of(f)) is not None]
        out.append([Snippet(path, text) for path, text in related.choose(c.text, c.start, documents)])
    return out


def parses_clean(language: str, text: str) -> bool:
    """Whether ``text`` parses with no ERROR or MISSING node at all."""
    g = lookup_grammar(language)
    return not error_spans(g.parse(text.encode("utf-8", "surrogatepass")).root_node)


def load_sources(root: Path | str, language: str, max_files: int, seed: int) -> tuple[list[tuple[str, str]], dict]:
    """Up to ``max_files`` (relative path, text) pairs that parse cleanly, in a seeded order, and counts."""
    language = language_name(language)
    root = Path(root)
    files = source_files(root, language)
    order = list(range(len(files)))
    random.Random(seed).shuffle(order)
    kept, scanned, unreadable, broken = [], 0, 0, 0
    for i in order:
        if len(kept) >= max_files:
            break
        scanned += 1
        try:
            text = files[i].read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            unreadable += 1
            continue
        if any(len(line) > 1000 for line in text.splitlines()):  # minified or generated
            unreadable += 1
            continue
        if not parses_clean(language, text):
            broken += 1
            continue
        kept.append((files[i].relative_to(root).as_posix(), text))
    kept.sort()
    stats = {"found": len(files), "scanned": scanned, "skipped": unreadable, "with_errors": broken, "used": len(kept)}
    if not kept:
        raise InputError(f"no {language} file under {root} parses cleanly")
    return kept, stats


def _code_lines(text: str) -> list[tuple[int, int, int]]:
    """(line number, content start, content end) of the lines worth a hole."""
    out, at = [], 0
    for n, line in enumerate(text.split("\n"), 1):
        body = line.rstrip("\r")
        content = body.strip()
        start = at + len(body) - len(body.lstrip())
        end = at + len(body.rstrip())
        at += len(line) + 1
        if not content or len(content) > MAX_LINE_CHARS or content.startswith(_COMMENT_STARTS):
            continue
        if not any(c.isalnum() for c in content):
            continue
        out.append((n, start, end))
    return out


BLOCK_LINES = (2, 6)  # the lines a block hole spans, at least and at most


def _line_end(data: bytes, row_start: int) -> int:
    """The byte offset where the content of the line starting at ``row_start`` ends (trailing blanks dropped)."""
    end = data.find(b"\n", row_start)
    end = len(data) if end < 0 else end
    while end > row_start and data[end - 1] in b" \t\r":
        end -= 1
    return end


# Tree-sitter grammars name their statements and declarations with these endings (Python's
# expression_statement, Go's short_var_declaration, C's function_definition, Rust's function_item).
STATEMENT_SUFFIXES = ("statement", "declaration", "definition", "item")


def _block_spans(root, data: bytes, lo: int) -> list[tuple[int, int]]:
    """Byte spans of the runs of whole sibling statements that start the line whose content
    starts at ``lo`` and end a later line, 2 to 6 lines in all, from the line's start to the last
    statement's end.

    A statement is a named node whose type ends as in ``STATEMENT_SUFFIXES``; the run's first is
    the outermost that starts at ``lo``; its last ends its line; what lies between (comments,
    separators, statements) goes with it."""
    node, first = root.descendant_for_byte_range(lo, lo + 1), None
    while node is not None and node.start_byte == lo:
        if node.is_named and node.type.endswith(STATEMENT_SUFFIXES):
            first = node
        node = node.parent
    if first is None or first.parent is None:
        return []
    row_start = data.rfind(b"\n", 0, lo) + 1
    first_row, spans = first.start_point[0], []
    lines_lo, lines_hi = BLOCK_LINES
    node = first
    while node is not None and node.end_point[0] - first_row + 1 <= lines_hi:
        if (node.end_point[0] - first_row + 1 >= lines_lo and node.is_named and node.type.endswith(STATEMENT_SUFFIXES)
                and node.end_byte == _line_end(data, data.rfind(b"\n", 0, node.end_byte) + 1)):
            spans.append((row_start, node.end_byte))
        node = node.next_sibling
    return spans


def _contents(grammar, kind: str, text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The str spans of what each pair of brackets (``inside``) or string literal (``string``)
    within ``text[start:end]`` (one line) holds, where it holds something: nodes whose first and
    last children are an opener and its closer, or a string's quotes around its text alone; for
    ``block``, the runs of whole lines that ``_block_spans`` finds from the line's start."""
    data = text.encode("utf-8", "surrogatepass")
    lo, hi = str_to_byte(text, start), str_to_byte(text, end)
    root = grammar.parse(data).root_node
    if kind == "block":
        return [(byte_to_str(data, a), byte_to_str(data, b)) for a, b in _block_spans(root, data, lo)]
    if kind == "string":
        nodes = [n for n in grammar.captures("strings", root, lo, hi).get("string", []) if lo <= n.start_byte and n.end_byte <= hi]
        spans = [(n.children[0].end_byte, n.children[-1].start_byte) for n in nodes if n.child_count >= 2]
        spans = [(a, b) for (a, b), n in zip(spans, nodes) if a < b and closing_quote(grammar, n, a, b)]
        return sorted((byte_to_str(data, a), byte_to_str(data, b)) for a, b in spans)
    pairs = grammar.spec.brackets
    out, todo = [], [root.descendant_for_byte_range(lo, hi)]
    while todo:
        node = todo.pop()
        kids = node.children
        todo.extend(k for k in kids if k.start_byte < hi and k.end_byte > lo)
        if (len(kids) >= 3 and lo <= node.start_byte and node.end_byte <= hi and kids[0].type in pairs
                and kids[-1].type == pairs[kids[0].type] and kids[-1].start_byte > kids[0].end_byte):
            out.append((byte_to_str(data, kids[0].end_byte), byte_to_str(data, kids[-1].start_byte)))
    return sorted(out)


def cut_holes(files: Sequence[tuple[str, str]], n: int, seed: int, kinds: Sequence[str] = DEFAULT_KINDS,
              language: str | None = None) -> list[Cut]:
    """``n`` holes drawn (with ``seed``) from the pooled code lines of ``files``, in file order.
    ``language`` (the files'): needed for ``inside``, ``string`` and ``block`` holes, which the files' trees find."""
    if not kinds or any(k not in KINDS for k in kinds):
        raise InputError(f"hole kinds must be among {', '.join(KINDS)}")
    grammar = lookup_grammar(language) if language else None
    enclosed = {"inside", "string", "block"} & set(kinds)  # kinds whose holes the files' trees find
    if enclosed and grammar is None:
        raise InputError(f"{' and '.join(sorted(enclosed))} holes need the files' language and its grammar")
    pool = [(f, ln, s, e) for f, (_, text) in enumerate(files) for ln, s, e in _code_lines(text)]
    rng = random.Random(seed)
    picks = rng.sample(range(len(pool)), min(n, len(pool)))
    # An inside, string or block hole whose line holds no such span takes the next line of these that does.
    spare = iter(random.Random(seed + 1).sample(range(len(pool)), len(pool)) if enclosed else ())
    used = set(picks)
    cuts = []
    for j, p in enumerate(picks):
        kind = kinds[j % len(kinds)]
        inside = _contents(grammar, kind, files[pool[p][0]][1], *pool[p][2:]) if kind in enclosed else []
        while kind in enclosed and not inside and (p := next(spare, None)) is not None:
            if p not in used:
                inside = _contents(grammar, kind, files[pool[p][0]][1], *pool[p][2:])
        if kind in enclosed and not inside:
            raise InputError(f"no line of the sources holds a span for {kind} holes")
        used.add(p)
        f, ln, s, e = pool[p]
        path, text = files[f]
        if inside:
            s, e = rng.choice(inside)
        elif kind == "rest" and e - s >= 2:
            s = rng.randrange(s + 1, e)
        elif kind == "rest":
            kind = "line"
        cuts.append(Cut(path, text, s, e, kind, ln))
    cuts.sort(key=lambda c: (c.path, c.start))
    return cuts


# --- judging --------------------------------------------------------------------------------------


def lcs_length(a: str, b: str) -> int:
    """The length of the longest common subsequence of ``a`` and ``b`` (bit-parallel, Hyyrö 2004:
    one pass over ``b`` with ``a``'s positions as the bits of an integer)."""
    masks: dict[str, int] = {}
    for i, c in enumerate(a):
        masks[c] = masks.get(c, 0) | 1 << i
    full = (1 << len(a)) - 1
    v = full
    for c in b:
        u = v & masks.get(c, 0)
        v = ((v + u) | (v - u)) & full
    return len(a) - v.bit_count()


def edit_similarity(fill: str, reference: str) -> float:
    """1 - indel distance / total length, i.e. 2 x LCS / (len(fill) + len(reference)), in [0, 1]:
    how close a fill is to the code it replaces, as code completion benchmarks score fills
    (rapidfuzz's ``fuzz.ratio`` / 100); 1.0 for two empty strings."""
    total = len(fill) + len(reference)
    return 2 * lcs_length(fill, reference) / total if total else 1.0


def previous_line(original: str, start: int) -> str:
    """The copy-the-previous-line baseline's fill for a hole at ``start``: the nearest non-blank
    line above the hole's line, from the hole's column on (what an editor's "duplicate line" gives)."""
    line_start = original.rfind("\n", 0, start) + 1
    col, end = start - line_start, line_start - 1
    while end > 0:
        begin = original.rfind("\n", 0, end) + 1
        line = original[begin:end]
        if line.strip():
            return line[col:]
        end = begin - 1
    return ""


def baseline_similarity(original: str, start: int, reference: str) -> float:
    """The edit similarity of the copy-the-previous-line baseline (:func:`previous_line`)."""
    return round(edit_similarity(previous_line(original, start).strip(), reference.strip()), 4)


def recorded_cuts(dirs: Sequence[Path | str], sources: Path | str = DEFAULT_SOURCES) -> Iterator[tuple[str, dict, Cut]]:
    """Each constrained record (no error) of the results directories ``dirs`` (``DIR/<language>/
    results.jsonl``) with its hole cut again from ``sources``: (directory, record, cut), in order."""
    for d in dirs:
        for f in sorted(Path(d).glob("*/results.jsonl")):
            for line in f.read_text(encoding="utf-8").splitlines():
                r = json.loads(line)
                if r.get("mode") != "constrained" or r.get("error"):
                    continue
                original = (source_dir(sources, r["language"]) / r["path"]).read_text(encoding="utf-8")
                yield str(d), r, Cut(r["path"], original, r["start"], r["end"], r["kind"], r["line"])


def judge(language: str, cut: Cut, fill: str) -> dict:
    """The engine's validity check on ``fill``, against the original file (whole) and against the
    cut document (in the region the engine judges)."""
    valid_cut, clean_cut = verdict(language, cut.text, [(cut.start, cut.start)], [fill]) or (None, None)
    return {
        "valid": is_valid(language, cut.original, [(cut.start, cut.end)], [fill], whole=True),
        "valid_cut": valid_cut,
        "clean_cut": clean_cut,
    }


# --- running --------------------------------------------------------------------------------------


def _fill_chunk(engine: FillEngine, chunk: list[FillRequest], mode: str) -> list[FillResult | InfillError]:
    """``engine.fill_batch(chunk)``; a refused batch is retried one request at a time."""
    try:
        results: list = list(engine.fill_batch(chunk))
    except InfillError as exc:
        log.warning("a %s batch failed (%s); retrying one by one", mode, exc)
        results = [_fill_one(engine, r) for r in chunk]
    if len(results) != len(chunk):
        raise RuntimeError(f"fill_batch returned {len(results)} results for {len(chunk)} requests")
    return results


def _start_batch(engine, chunk: list[FillRequest], mode: str, contexts: str) -> None:
    """Before a timed batch: forget what earlier fills left; for "warm" contexts, fill the batch
    once, untimed, and forget its fills (their contexts' states stay)."""
    engine.forget()
    if contexts == "warm":
        _fill_chunk(engine, chunk, mode)
        engine.forget(contexts=False)


def _record(language: str, i: int, cut: Cut, mode: str, result: FillResult | InfillError) -> dict:
    ok = isinstance(result, FillResult)
    fill = result.fills[0].text if ok else ""
    record = {
        "hole": i, "language": language, "mode": mode, "path": cut.path, "line": cut.line, "kind": cut.kind,
        "start": cut.start, "end": cut.end, "reference": cut.reference, "fill": fill,
        "error": None if ok else str(result),
    }
    if ok:
        record |= judge(language, cut, fill)
    else:
        record |= {"valid": None, "valid_cut": None, "clean_cut": None}
    record |= {
        "engine_valid": result.fills[0].valid if ok else None,
        "exact": ok and fill == cut.reference,
        "exact_stripped": ok and fill.strip() == cut.reference.strip(),
        "edit_similarity": round(edit_similarity(fill.strip(), cut.reference.strip()), 4) if ok else None,
        "baseline_similarity": baseline_similarity(cut.original, cut.start, cut.reference),
        "fill_chars": len(fill),
        "reference_chars": len(cut.reference),
        "latency_ms": round(result.timings.total_ms, 3) if ok else None,
        "constrain_ms": round(result.timings.constrain_ms, 3) if ok else None,
        "tokens_filled": result.timings.tokens_filled if ok else None,
        "rounds": result.timings.rounds if ok else None,  # more than 1: a retry or branches ran (their cost is in latency)
        "score": result.fills[0].score if ok else None,
    }
    return record


def _mean(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def _mode_metrics(records: list[dict], seconds: float) -> dict:
    ok = [r for r in records if r["error"] is None]
    return {
        "validity": _mean([r["valid"] for r in ok]) if ok else None,
        "validity_cut": _mean([r["valid_cut"] for r in ok]) if ok else None,
        "engine_validity": _mean([r["engine_valid"] for r in ok if r["engine_valid"] is not None]),
        # The engine's valid fills (they add no error) that leave the cut document with errors:
        # what the cut broke stays broken (the original has no error, so these seldom parse there).
        "engine_valid_left_broken": sum(bool(r["engine_valid"]) and r.get("clean_cut") is False for r in ok),
        "exact_match": _mean([r["exact"] for r in records]),
        "exact_match_stripped": _mean([r["exact_stripped"] for r in records]),
        "edit_similarity": _mean([r["edit_similarity"] for r in ok]),
        "baseline_similarity": _mean([r["baseline_similarity"] for r in records]),  # copy the previous line
        "mean_latency_ms": _mean([r["latency_ms"] for r in ok]),
        "mean_constrain_ms": _mean([r["constrain_ms"] for r in ok]),
        "mean_fill_chars": _mean([r["fill_chars"] for r in ok]),
        "empty_fills": sum(r["fill_chars"] == 0 for r in ok),
        "engine_errors": len(records) - len(ok),
        "wall_s": round(seconds, 3),
        "by_kind": {k: {"holes": len(rs), "validity": _mean([r["valid"] for r in rs]),
                        "exact_match": _mean([r["exact"] for r in rs]),
                        "edit_similarity": _mean([r["edit_similarity"] for r in rs])}
                    for k in KINDS if (rs := [r for r in ok if r["kind"] == k])},
    }


def _source_sets(root: Path, files: Sequence[tuple[str, str]]) -> list[str]:
    """What the sources are: the lines of ``SOURCES.txt`` (written by the fetch script), else the top folders."""
    listing = root / "SOURCES.txt"
    if listing.is_file():
        return [x.strip() for x in listing.read_text(encoding="utf-8").splitlines() if x.strip()]
    return sorted({p.split("/", 1)[0] for p, _ in files if "/" in p})


def _digest(files: Sequence[tuple[str, str]]) -> str:
    h = hashlib.sha256()
    for path, text in files:
        h.update(path.encode() + b"\0" + text.encode("utf-8", "surrogatepass") + b"\0")
    return h.hexdigest()[:16]


def run_validity(engine: FillEngine, *, language: str, sources: Path | str | None = None, holes: int = 200,
                 max_tokens: int = 32, seed: int = 0, options: SamplingOptions = SamplingOptions(),
                 out_dir: Path | str | None = None, max_files: int = 200, batch_size: int = 8,
                 kinds: Sequence[str] = DEFAULT_KINDS, progress: bool = True, related_files: bool = False,
                 modes: Sequence[str] = MODES, contexts: str = "cold") -> dict:
    """Cut ``holes`` holes from ``language`` files under ``sources``, fill each constrained and
    unconstrained, judge, and write ``results.jsonl`` and ``summary.json`` to ``out_dir``.

    ``sources`` is a directory; its ``<language>`` subdirectory is used when there is one.
    Returns the summary (also written), with ``out_dir`` set to where the files went.
    """
    language = language_name(language)
    if holes < 1 or batch_size < 1 or max_files < 1:
        raise InputError("holes, batch size and max files must be at least 1")
    if contexts not in CONTEXTS:
        raise InputError(f"contexts: choose among {', '.join(CONTEXTS)}")
    root = source_dir(sources or DEFAULT_SOURCES, language)
    files, file_stats = load_sources(root, language, max_files, seed)
    cuts = cut_holes(files, holes, seed, kinds, language)
    modes = {m: msgspec.structs.replace(options, constrained=m == "constrained") for m in MODES if m in modes}
    if not modes:
        raise InputError(f"modes: choose among {', '.join(MODES)}")
    snippets = package_context(root, language, cuts) if related_files else [[] for _ in cuts]
    requests = {m: [c.request(language, max_tokens, o, x) for c, x in zip(cuts, snippets)] for m, o in modes.items()}
    log.info("%s: %d holes from %d files under %s, max_tokens=%d", language, len(cuts), len(files), root, max_tokens)

    # Warm up (untimed) so the first timed batch does not pay for loading kernels and grammars.
    for m in modes:
        _fill_one(engine, requests[m][0])
    batches, seconds = [], {m: 0.0 for m in modes}
    for i in range(0, len(cuts), batch_size):
        for m in modes:
            batches.append((m, requests[m][i:i + batch_size]))
    results: dict[str, list] = {m: [] for m in modes}
    # Time each batch by itself: constrained and unconstrained alternate batch by batch, each from
    # the same state (CONTEXTS; an engine that cannot forget keeps what the mode before left).
    same_start = getattr(engine, "forget", None) is not None
    with _progress(progress) as bar:
        job = bar.add_task(f"filling {language}", total=len(modes) * len(cuts))
        for mode, chunk in batches:
            if same_start:
                _start_batch(engine, chunk, mode, contexts)
            t0 = time.monotonic()
            results[mode].extend(_fill_chunk(engine, chunk, mode))
            seconds[mode] += time.monotonic() - t0
            bar.advance(job, len(chunk))

    records = [_record(language, i, cut, m, results[m][i]) for i, cut in enumerate(cuts) for m in modes]
    model_id = getattr(engine, "model_id", None) or next(
        (r.model for rs in results.values() for r in rs if isinstance(r, FillResult)), "unknown")
    summary = {
        "benchmark": "validity",
        "language": language,
        "n_holes": len(cuts),
        "model": model_id,
        "sources": {
            "dir": str(root),
            "sets": _source_sets(root, files),
            "files": file_stats,
            "lines_in_files": sum(t.count("\n") + 1 for _, t in files),
            "sha256": _digest(files),
        },
        "settings": {
            "holes": holes, "seed": seed, "max_tokens": max_tokens, "max_files": max_files, "batch_size": batch_size,
            "kinds": list(kinds), "options": msgspec.to_builtins(options), "modes": list(modes),
            "related_files": related_files, "contexts": contexts if same_start else "as left",
        },
        # With --related: how many holes got other files' lines as context, and how many characters on average.
        "related": {"holes_with_context": sum(bool(x) for x in snippets),
                    "mean_chars": _mean([sum(len(s.text) for s in x) for x in snippets if x])},
        # How often the empty fill would pass: the floor that a validity rate should be read against.
        "empty_fill_validity": _mean([judge(language, c, "")["valid"] for c in cuts]),
        "metrics": {m: _mode_metrics([r for r in records if r["mode"] == m], seconds[m]) for m in modes},
        "machine": machine_info(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    c, u = summary["metrics"].get("constrained"), summary["metrics"].get("unconstrained")
    if c and u and c["mean_latency_ms"] and u["mean_latency_ms"]:
        summary["metrics"]["latency_ratio"] = round(c["mean_latency_ms"] / u["mean_latency_ms"], 3)
    out = Path(out_dir) if out_dir else DEFAULT_OUT_ROOT / f"validity-{language}-{time.strftime('%Y%m%d-%H%M%S')}"
    write_results(out, records, summary)
    summary["out_dir"] = str(out)
    return summary


# --- command line (wired by infill/cli.py as `infill bench validity`) ----------------------------


def _kinds(text: str) -> list[str]:
    names = [x.strip() for x in text.split(",") if x.strip()]
    if not names or any(n not in KINDS for n in names):
        raise argparse.ArgumentTypeError(f"expected a comma-separated subset of {','.join(KINDS)}, got {text!r}")
    return names


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the validity benchmark's arguments to ``parser`` (the model options are the CLI's)."""
    parser.add_argument("languages", nargs="*", default=list(DEFAULT_LANGUAGES), metavar="LANGUAGE",
                        help=f"languages to cut holes in (default: {' '.join(DEFAULT_LANGUAGES)})")
    parser.add_argument("--sources", type=Path, default=None,
                        help=f"source directory; its <language> subdirectory is used if present (default: {DEFAULT_SOURCES}, "
                             "filled by bench/fetch_validity_sources.sh)")
    parser.add_argument("--holes", type=int, default=200, help="holes per language (default 200)")
    parser.add_argument("--max-tokens", type=int, default=32, help="fill window of each hole (default 32)")
    parser.add_argument("--kinds", type=_kinds, default=list(DEFAULT_KINDS),
                        help=f"hole kinds, in turn, among {','.join(KINDS)} (default: {','.join(DEFAULT_KINDS)})")
    parser.add_argument("--max-files", type=int, default=200, help="clean files per language to draw holes from")
    parser.add_argument("--seed", type=int, default=0, help="seed of the file order and the hole cuts")
    parser.add_argument("--batch-size", type=int, default=8, help="requests per engine.fill_batch call")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"output directory (default: {DEFAULT_OUT_ROOT}/validity-<language>-<time>; "
                             "with several languages, OUT/<language>)")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--threshold", type=float, default=None)
    parser.add_argument("--policy", choices=list(typing.get_args(Policy)), default="confidence")
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--sample-seed", type=int, default=0, help="the sampler's seed")
    parser.add_argument("--candidates", type=int, default=0)
    parser.add_argument("--modes", type=lambda t: [x.strip() for x in t.split(",") if x.strip()], default=list(MODES),
                        help=f"fill modes to run, among {','.join(MODES)} (default: both; the latency ratio needs both)")
    parser.add_argument("--contexts", choices=list(CONTEXTS), default="cold",
                        help="each timed batch starts from nothing (cold: a document's first fill), or after the same "
                             "batch filled once, untimed, its fills forgotten (warm: a document filled before); in "
                             "either mode alike (default cold)")
    parser.add_argument("--related", action="store_true",
                        help="give each hole context from the other files of its package: the windows most like the "
                             "code before it (infill/text/related.py), as an editor's other open files would")


def main(args: argparse.Namespace, engine: FillEngine) -> int:
    """Run the benchmark for each language the parsed ``args`` name and print a table; exit code."""
    options = SamplingOptions(steps=args.steps, threshold=args.threshold, policy=args.policy,
                              temperature=args.temperature, seed=args.sample_seed, candidates=args.candidates)
    languages = [language_name(x) for x in args.languages]
    summaries = []
    for language in languages:
        out = args.out / language if args.out and len(languages) > 1 else args.out
        summaries.append(run_validity(engine, language=language, sources=args.sources, holes=args.holes,
                                      max_tokens=args.max_tokens, seed=args.seed, options=options, out_dir=out,
                                      max_files=args.max_files, batch_size=args.batch_size, kinds=args.kinds,
                                      related_files=args.related, modes=args.modes, contexts=args.contexts))
    print_summary(summaries)
    return 0


def _pct(value) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _ms(value) -> str:
    return "-" if value is None else f"{value:.1f}"


def print_summary(summaries: list[dict] | dict, console: Console | None = None) -> None:
    summaries = [summaries] if isinstance(summaries, dict) else summaries
    console = console or Console()
    model = summaries[0]["model"] if summaries else "?"
    table = Table(title=f"syntax validity of fills · {model}")
    for name, justify in [("language", "left"), ("holes", "right"), ("constrained", "left"), ("valid", "right"),
                          ("valid (cut)", "right"), ("exact", "right"), ("exact (strip)", "right"), ("similar", "right"),
                          ("ms", "right"), ("empty", "right")]:
        table.add_column(name, justify=justify)
    for s in summaries:
        modes = [m for m in MODES if m in s["metrics"]]
        for k, mode in enumerate(modes):
            m = s["metrics"][mode]
            table.add_row(s["language"] if k == 0 else "", str(s["n_holes"]) if k == 0 else "",
                          "yes" if mode == "constrained" else "no", _pct(m["validity"]), _pct(m["validity_cut"]), _pct(m["exact_match"]),
                          _pct(m["exact_match_stripped"]), _pct(m["edit_similarity"]), _ms(m["mean_latency_ms"]),
                          str(m["empty_fills"]),
                          end_section=k == len(modes) - 1)
    console.print(table)
    for s in summaries:
        console.print(f"{s['language']}: an empty fill would be valid in {_pct(s['empty_fill_validity'])} of the holes")
    for s in summaries:
        ratio = s["metrics"].get("latency_ratio")
        console.print(f"{s['language']}: {s['sources']['files']['used']} files from {s['sources']['dir']}"
                      + (f"; constrained/unconstrained latency {ratio:.2f}x" if ratio else "")
                      + f"; results: {s['out_dir']}")
