"""``infill refactor RECIPE PATH...``: batch edits over many files (wired by infill/cli.py).

Finds a recipe's sites (infill/refactor/recipes.py: ``holes``, ``docstrings``, ``annotate``, ``bodies``,
``query FILE.scm``) in the given files and directories, turns each site into a hole, fills the
holes of many files per engine call (``--batch`` sites; a file's sites go in requests of
``--group`` sites, or all together for ``holes``), checks each result with tree-sitter, and shows
or applies the edits.

Files: directories are walked without following directory symlinks; inside a git work tree the
files are those ``git ls-files --cached --others --exclude-standard`` lists (so .gitignore is
honoured), elsewhere every file except in hidden, ``__pycache__`` and ``node_modules``
directories. ``--include`` / ``--exclude`` globs (fnmatch) are matched against the path relative
to the directory given, the file name and each directory name. Walked files are those whose
language has the recipe; files named on the command line are always read.

Output: a unified diff per file on stdout (dry run, the default); ``--write`` applies the edits;
``--interactive`` asks edit by edit (y = apply, n = skip, a = this and all the rest, q = none of
the rest) and applies; ``--json`` prints one JSON object per site (JSON Lines), and one per
skipped file. A progress bar over sites and a summary table go to stderr, with the throughput.

Nothing lost: each file is replaced atomically (infill/text/files.py) as soon as its batch is done,
only if it is unchanged on disk since it was read; a fill that does not parse (the engine's
check, then each site alone, then all of a file's edits together) or is empty is not applied
(``--no-check`` applies whatever the model wrote); ``--backup`` keeps FILE.orig (FILE.orig.N if
taken), ``--backup-dir DIR`` keeps a copy under DIR.

Bad input (missing, unreadable, binary, non-UTF-8 files, symlink loops, files over
``--max-file-bytes``, bad ``<FILL>`` markers) is skipped with a reason in the summary.

Exit codes: 0 every site filled and applied (or shown); 1 something was skipped, rejected or
not written; 2 a usage error (unknown recipe, a query with errors, bad options); 130 Ctrl-C
(files already written stay written, each one complete).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from infill.args import PROG, add_engine_option, add_sampling_arguments, int_in, load_engine, sampling_options
from infill.errors import InputError
from infill.text.files import TMP_SUFFIX, changed_on_disk, read_text_file, replace_atomic, unified_diff
from infill.text.holes import MAX_HOLE_TOKENS, apply_fills, line_col, match_newlines, newline_of
from infill.syntax.languages import grammar as lookup_grammar, spec_for
from infill.protocol import Hole
from infill.refactor.recipes import BUILTIN, Recipe, Site, recipe as make_recipe

EXIT_OK, EXIT_SKIPPED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
DEFAULT_MAX_FILE_BYTES = 1_000_000
_SKIP_DIRS = {"__pycache__", "node_modules"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    _positive = int_in(1)

    p.description = __doc__.split("\n\n", 1)[1]
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("recipe", metavar="RECIPE", help=f"{', '.join(BUILTIN)}, or query (then the first PATH is the .scm file)")
    p.add_argument("paths", nargs="+", metavar="PATH", help="files and directories")
    add_engine_option(p)
    out = p.add_argument_group("output")
    out.add_argument("--write", "-w", action="store_true", help="apply the edits (atomically) instead of printing a diff")
    out.add_argument("--interactive", "-i", action="store_true", help="ask edit by edit (y/n/a/q), then apply")
    out.add_argument("--json", action="store_true", help="one JSON object per site (JSON Lines) instead of a diff")
    out.add_argument("--backup", action="store_true", help="keep each original as FILE.orig before writing")
    out.add_argument("--backup-dir", metavar="DIR", type=Path, default=None, help="keep each original under DIR")
    sel = p.add_argument_group("files and sites")
    sel.add_argument("--include", metavar="GLOB", action="append", default=[], help="only walked files matching GLOB")
    sel.add_argument("--exclude", metavar="GLOB", action="append", default=[], help="no walked files matching GLOB")
    sel.add_argument("--no-ignore", dest="ignore", action="store_false", help="do not honour .gitignore")
    sel.add_argument("--max-file-bytes", type=_positive, default=DEFAULT_MAX_FILE_BYTES,
                     help=f"skip larger files (default: {DEFAULT_MAX_FILE_BYTES})")
    sel.add_argument("--limit", type=_positive, default=None, help="at most this many sites")
    sel.add_argument("--language", default=None,
                     help="the language of a query recipe (default: python), or of the files for holes (default: by extension)")
    g = p.add_argument_group("filling")
    g.add_argument("--max-tokens", type=int_in(1, MAX_HOLE_TOKENS), metavar="N", default=None,
                   help="hole budget (default: the recipe's)")
    g.add_argument("--group", type=_positive, default=4, help="sites of one file filled jointly per request (default: 4)")
    g.add_argument("--batch", type=_positive, default=256, help="sites per engine call (default: 256)")
    g.add_argument("--no-check", dest="check", action="store_false",
                   help="no syntax check: apply every non-empty fill (implies --no-constrain)")
    add_sampling_arguments(g)


# ---------------------------------------------------------------------------------- files


@dataclass
class Job:
    """One file: its text as read, its sites, and what became of each."""

    path: str
    real: Path
    stat: os.stat_result
    text: str
    language: str | None
    sites: list[Site]
    fills: list = field(default_factory=list)  # protocol.Fill per site
    status: list[str] = field(default_factory=list)  # per site: ok, rejected, declined, written, not-written
    reasons: list[str] = field(default_factory=list)

    def new_text(self, statuses=("ok", "written")) -> str:
        keep = [i for i, s in enumerate(self.status) if s in statuses]
        holes = [Hole(self.sites[i].start, self.sites[i].end) for i in keep]
        return apply_fills(self.text, holes, [self.sites[i].edit(self.fills[i].text) for i in keep])


@dataclass
class Report:
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    not_written: list[tuple[str, str]] = field(default_factory=list)
    files: int = 0
    sites: int = 0
    filled: int = 0
    rejected: int = 0
    declined: int = 0
    written_files: int = 0


def _matches(rel: str, globs: list[str]) -> bool:
    parts = rel.split("/")
    return any(fnmatch.fnmatch(rel, g) or any(fnmatch.fnmatch(p, g) for p in parts) for g in globs)


def _git_files(directory: str) -> list[str] | None:
    """Files under ``directory`` that git does not ignore (relative), or None outside a work tree
    or when ``directory`` itself is ignored (it was named, so it is walked)."""
    try:
        if subprocess.run(["git", "-C", directory, "check-ignore", "-q", "."], capture_output=True, timeout=60).returncode == 0:
            return None
        out = subprocess.run(
            ["git", "-C", directory, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            capture_output=True, timeout=120, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return sorted({f for f in out.decode("utf-8", "surrogateescape").split("\0") if f})


def _walk(directory: str, use_ignore: bool) -> list[str]:
    listed = _git_files(directory) if use_ignore else None
    if listed is not None:
        return listed
    out = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIP_DIRS)
        rel_root = os.path.relpath(root, directory)
        out.extend(f if rel_root == "." else f"{rel_root}/{f}" for f in sorted(files))
    return out


def find_files(args, rec: Recipe, report: Report) -> list[tuple[str, bool]]:
    """(path, named on the command line) of every file to read, deduplicated."""
    out: list[tuple[str, bool]] = []
    for arg in args.paths:
        if os.path.isdir(arg):
            for rel in _walk(arg, args.ignore):
                path = os.path.normpath(os.path.join(arg, rel))
                if rel.endswith(TMP_SUFFIX) or not rec.accepts(spec_for(rel)):
                    continue
                if (args.include and not _matches(rel, args.include)) or _matches(rel, args.exclude):
                    continue
                if os.path.isdir(path) or not os.path.lexists(path):  # a submodule, a deleted file
                    continue
                out.append((path, False))
        elif os.path.lexists(arg):
            out.append((arg, True))
        else:
            report.skipped.append((arg, "no such file or directory"))
    seen, unique = set(), []
    for path, named in out:
        try:
            key = Path(path).resolve(strict=True)
        except (OSError, RuntimeError):
            key = path
        if key not in seen:
            seen.add(key)
            unique.append((path, named))
    return unique


def read_jobs(args, rec: Recipe, report: Report) -> list[Job]:
    jobs: list[Job] = []
    budget = args.limit
    for path, named in find_files(args, rec, report):
        if budget is not None and budget <= 0:
            break
        spec = spec_for(args.language if args.language and rec.name == "holes" else path)
        if not rec.accepts(spec):
            what = spec.name if spec else "this kind of file"
            report.skipped.append((path, f"the {rec.name} recipe has no query for {what}"))
            continue
        try:
            text, real, st = read_text_file(path, args.max_file_bytes)
        except InputError as e:
            report.skipped.append((path, _reason(e, path)))
            continue
        g = lookup_grammar(spec.name) if spec else None
        if spec is not None and g is None and rec.name != "holes":
            report.skipped.append((path, f"the {spec.name} grammar is not usable"))
            continue
        try:
            sites = rec.sites(text, g, path, args.max_tokens)
        except InputError as e:
            if rec.name == "query":  # the user's query itself is wrong: a usage error
                raise
            report.skipped.append((path, _reason(e, path)))
            continue
        report.files += 1
        if budget is not None:
            sites = sites[:budget]
            budget -= len(sites)
        if sites:
            nl = newline_of(text)
            sites = [replace(s, before=match_newlines(s.before, nl), after=match_newlines(s.after, nl)) for s in sites]
            jobs.append(Job(path, real, st, text, spec.name if spec else None, sites))
    return jobs


def _reason(e: Exception, path: str) -> str:
    msg = str(e)
    return msg[len(path) + 2 :] if msg.startswith(f"{path}: ") else msg


# ---------------------------------------------------------------------------------- filling


def scaffold(text: str, sites: list[Site]) -> tuple[str, list[Hole]]:
    """``text`` with each site's span replaced by its before/after text and a hole between."""
    pieces, holes, at, n = [], [], 0, 0
    for s in sites:
        pieces += [text[at : s.start], s.before, s.after]
        n += s.start - at + len(s.before)
        holes.append(Hole(n, n, s.max_tokens))
        n += len(s.after)
        at = s.end
    pieces.append(text[at:])
    return "".join(pieces), holes


def fill_jobs(engine, jobs: list[Job], options, group: int, joint: bool) -> None:
    """Fill every site of ``jobs`` in one engine call (the engine chunks it further)."""
    from infill.protocol import FillRequest

    requests, owners = [], []
    for job in jobs:
        job.fills = [None] * len(job.sites)
        size = len(job.sites) if joint else group
        for at in range(0, len(job.sites), size):
            text, holes = scaffold(job.text, job.sites[at : at + size])
            requests.append(FillRequest(text=text, holes=holes, language=job.language, options=options, path=job.path))
            owners.append((job, at))
    for (job, at), result in zip(owners, engine.fill_batch(requests)):
        job.fills[at : at + len(result.fills)] = result.fills


def judge(job: Job, check: bool) -> None:
    """Mark each site ok or rejected (empty, or it does not parse)."""
    from infill.syntax.constraint import is_valid
    from infill.protocol import Fill

    nl = newline_of(job.text)
    job.fills = [Fill(text=match_newlines(f.text, nl), score=f.score, valid=f.valid) for f in job.fills]
    job.status, job.reasons = [], []
    for s, f in zip(job.sites, job.fills):
        ok, why = True, ""
        if not f.text.strip():
            ok, why = False, "empty fill"
        elif check and f.valid is False:  # invalid with its request's other fills; alone?
            ok = is_valid(job.language, job.text, [(s.start, s.end)], [s.edit(f.text)]) is not False
            why = "" if ok else "does not parse"
        job.status.append("ok" if ok else "rejected")
        job.reasons.append(why)
    kept = [i for i, st in enumerate(job.status) if st == "ok"]
    if check and kept:
        spans = [(job.sites[i].start, job.sites[i].end) for i in kept]
        if is_valid(job.language, job.text, spans, [job.sites[i].edit(job.fills[i].text) for i in kept]) is False:
            for i in kept:
                job.status[i], job.reasons[i] = "rejected", "the file's edits together do not parse"


# ---------------------------------------------------------------------------------- output


class Quit(Exception):
    pass


def ask(prompt: str) -> str:
    """One answer from the terminal: y, n, a or q (EOF = q)."""
    while True:
        print(prompt, end="", file=sys.stderr, flush=True)
        line = sys.stdin.readline()
        if not line:
            return "q"
        answer = line.strip().lower()[:1]
        if answer in ("y", "n", "a", "q"):
            return answer


def review(job: Job, state: dict) -> None:
    """--interactive: ask about each ok site; state['all'] / state['quit'] carry a/q across files."""
    for i, st in enumerate(job.status):
        if st != "ok":
            continue
        if state.get("quit"):
            job.status[i] = "declined"
            continue
        if state.get("all"):
            continue
        s = job.sites[i]
        one = apply_fills(job.text, [Hole(s.start, s.end)], [s.edit(job.fills[i].text)])
        line, _ = line_col(job.text, s.start)
        sys.stderr.write(unified_diff(job.text, one, job.path))
        answer = ask(f"apply this edit ({job.path}:{line} {s.name})? [y,n,a,q] ")
        if answer == "a":
            state["all"] = True
        elif answer in ("n", "q"):
            job.status[i] = "declined"
            state["quit"] = answer == "q"


def backup_path(args, job: Job) -> Path | None:
    if args.backup_dir is not None:
        p = Path(job.path)
        try:
            rel = p.resolve().relative_to(Path.cwd())
        except ValueError:
            rel = Path(*p.resolve().parts[1:])
        return args.backup_dir / rel
    if args.backup:
        target = job.real.with_name(job.real.name + ".orig")
        n = 1
        while target.exists():
            target = job.real.with_name(f"{job.real.name}.orig.{n}")
            n += 1
        return target
    return None


def write_job(args, job: Job, report: Report) -> None:
    new = job.new_text()
    if new == job.text:
        return
    ok = [i for i, st in enumerate(job.status) if st == "ok"]

    def fail(reason: str) -> None:
        report.not_written.append((job.path, reason))
        for i in ok:
            job.status[i], job.reasons[i] = "not-written", reason

    why = changed_on_disk(job.real, job.stat, job.text)
    if why:
        return fail(why)
    try:
        backup = backup_path(args, job)
        if backup is not None:
            backup.parent.mkdir(parents=True, exist_ok=True)
            replace_atomic(backup, job.text, job.stat)
        replace_atomic(job.real, new, job.stat)
    except InputError as e:
        return fail(_reason(e, str(job.real)))
    except OSError as e:
        return fail(f"cannot write ({e.strerror or e})")
    for i in ok:
        job.status[i] = "written"
    report.written_files += 1


def json_records(job: Job, recipe_name: str) -> list[dict]:
    out = []
    for s, f, st, why in zip(job.sites, job.fills, job.status, job.reasons):
        line, col = line_col(job.text, s.start)
        out.append({
            "path": job.path, "recipe": recipe_name, "name": s.name, "line": line, "column": col,
            "start": s.start, "end": s.end, "old": job.text[s.start : s.end], "new": s.edit(f.text),
            "fill": f.text, "score": f.score, "valid": f.valid,
            "status": "proposed" if st == "ok" else st, "reason": why or None,
        })
    return out


# ---------------------------------------------------------------------------------- main


def main(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    if args.json and args.interactive:
        raise InputError("--json and --interactive do not go together")
    if args.interactive and not sys.stdin.isatty():
        raise InputError("--interactive needs a terminal on stdin")
    query_file = None
    if args.recipe == "query":
        query_file, args.paths = args.paths[0], args.paths[1:]
        if not args.paths:
            raise InputError("infill refactor query FILE.scm PATH...: no PATH")
    language = "python"
    if args.language:
        spec = spec_for(args.language)
        if spec is None:
            raise InputError(f"--language {args.language}: unknown language")
        language = args.language = spec.name
    rec = make_recipe(args.recipe, query_file, language)
    if args.recipe == "query":
        g = lookup_grammar(language)
        if g is None:
            raise InputError(f"the {language} grammar is not usable")
        rec.compile(g)  # a query with errors is a usage error, before any file is read
    if not args.check:
        args.constrained = False
    write = args.write or args.interactive

    report = Report()
    jobs = read_jobs(args, rec, report)
    report.sites = sum(len(j.sites) for j in jobs)
    fill_s = load_s = 0.0
    engine = None
    state: dict = {}
    try:
        if jobs:
            t_load = time.perf_counter()
            engine = load_engine(args, priority="batch")
            load_s = time.perf_counter() - t_load
            options = sampling_options(args)
            fill_s = run_batches(args, rec, engine, options, jobs, report, write, state)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; {report.written_files} files written (each one complete), the others unchanged", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        if args.json:
            for path, reason in report.skipped:
                print(json.dumps({"path": path, "status": "skipped", "reason": reason}, ensure_ascii=False))
        sys.stdout.flush()
    if not args.quiet:
        summary(report, write, time.perf_counter() - t0, fill_s, load_s, engine)
    bad = report.skipped or report.rejected or report.not_written
    return EXIT_SKIPPED if bad else EXIT_OK


def run_batches(args, rec: Recipe, engine, options, jobs: list[Job], report: Report, write: bool, state: dict) -> float:
    """Fill, judge and show or write the jobs, ``--batch`` sites at a time; the fill seconds."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    console = Console(file=sys.stderr)
    show = not (args.quiet or args.interactive) and console.is_terminal
    fill_s = 0.0
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("sites"),
                  TimeElapsedColumn(), TimeRemainingColumn(), console=console, disable=not show, transient=True) as bar:
        task = bar.add_task(f"{rec.name}", total=report.sites)
        at = 0
        while at < len(jobs):
            batch, n = [], 0
            while at < len(jobs) and (not batch or n + len(jobs[at].sites) <= args.batch):
                batch.append(jobs[at])
                n += len(jobs[at].sites)
                at += 1
            t = time.perf_counter()
            fill_jobs(engine, batch, options, args.group, rec.joint)
            fill_s += time.perf_counter() - t
            for job in batch:
                judge(job, args.check)
                if args.interactive:
                    review(job, state)
                if write:
                    write_job(args, job, report)
                report.filled += sum(st in ("ok", "written") for st in job.status)
                report.rejected += job.status.count("rejected")
                report.declined += job.status.count("declined")
                if args.json:
                    for record in json_records(job, rec.name):
                        print(json.dumps(record, ensure_ascii=False))
                elif not write:
                    sys.stdout.write(unified_diff(job.text, job.new_text(), job.path))
            sys.stdout.flush()
            bar.advance(task, n)
    return fill_s


def summary(report: Report, write: bool, wall: float, fill_s: float, load_s: float, engine) -> None:
    from rich.console import Console
    from rich.table import Table


    console = Console(file=sys.stderr, highlight=False)
    table = Table(title=None, show_edge=False)
    cols = ["files", "sites", "written" if write else "filled", "rejected", "skipped files", "not written", "time"]
    for c in cols:
        table.add_column(c, justify="right")
    table.add_row(str(report.files), str(report.sites), str(report.filled), str(report.rejected), str(len(report.skipped)),
                  str(len(report.not_written)), f"{wall:.1f} s")
    console.print(table)
    lines = [f"skipped {path}: {reason}" for path, reason in report.skipped]
    lines += [f"not written {path}: {reason}" for path, reason in report.not_written]
    if report.declined:
        lines.append(f"{report.declined} edits declined")
    if engine is not None and report.sites:
        rate = report.sites / fill_s if fill_s > 0 else float("inf")
        lines.append(f"{report.sites} sites in {wall:.2f} s: {rate:.1f} sites/s filling "
                     f"({fill_s:.2f} s; model load {load_s:.2f} s) on {engine.device}")
    for line in lines:
        print(f"{PROG}: {line}", file=sys.stderr)
