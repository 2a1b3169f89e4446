"""The ``infill`` command line.

Subcommands:

- ``infill fill PATH... | -``: fill the holes marked ``<FILL>`` / ``<FILL:N>`` (see
  ``infill.holes``; a marker inside a string or comment is still a hole), or the cursor given with
  ``--at LINE:COL``. All holes of all files go to the engine in one batched call.

  Output: a unified diff per file (default); ``--write`` replaces the files instead (atomically,
  and only after every fill succeeded); ``--json`` prints one JSON object per input (JSON Lines).
  For ``-`` (stdin) the default output is the filled text itself, not a diff.
  Line endings (LF or CRLF) and a missing final newline are preserved.
  A file's language comes from ``--language`` or its extension, by the one language table
  (grammars/languages.toml); stdin needs ``--language``. A fill judged not to parse is never
  passed off as good: it is marked (a ``# infill:`` line before its file's diff, a warning on
  stderr, the summary line), and ``--write`` skips its file (exit 1) unless ``--allow-invalid``.
  Valid fills in code that does not parse around them, as it did not before (they add no error and
  mend none), are marked too (``left_broken``), and written. So are valid fills scored under the
  model's floor (its config.json's ``min_score``; ``min_score`` in ``--json``): an editor would not
  show them as suggestions.
- ``infill languages``: the language table (``--json`` for tools: the VS Code extension's copy).
- ``infill refactor``, ``train``, ``adapt``, ``lsp``, ``bench ...``, ``card``: provided by their own modules
  (``add_arguments`` / ``main``), imported only when run.

Errors a user can cause (a missing, binary or non-UTF-8 file, no holes, a bad model directory)
print one line, ``infill: error: ...``, and exit with code 2 leaving every file untouched;
Ctrl-C exits with 130, files untouched. Nothing heavy (torch) is imported until a subcommand
needs it, so ``--help`` and argument errors are fast.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import logging
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from infill import __version__
from infill.errors import InfillError, InputError
from infill.text.files import changed_on_disk, decode_text, fsync_dir, read_text_file, stage, unified_diff
from infill.text.holes import (
    DEFAULT_MAX_TOKENS,
    MAX_HOLE_TOKENS,
    apply_fills,
    find_holes,
    line_col,
    match_newlines,
    newline_of,
    position_to_offset,
)
from infill.protocol import Hole
from infill.syntax.languages import spec_for, specs
from infill.args import PROG, add_model_options, add_sampling_arguments, cursor_position, int_in, load_engine, sampling_options

log = logging.getLogger("infill.cli")

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

# ----------------------------------------------------------------------------------------------
# The parser.


def _logging_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-q", "--quiet", action="store_true", help="no summary on stderr")
    p.add_argument("-v", "--verbose", action="count", default=0, help="log more (-v info, -vv debug)")


def _add_fill(sub) -> None:
    p = sub.add_parser(
        "fill",
        help="fill <FILL> holes in files or stdin",
        description=(
            "Fill the holes marked <FILL> or <FILL:N> (N = max tokens, 1..512) in each file, or the "
            "cursor given with --at. A marker inside a string literal or comment is still a hole. "
            "All files are filled together in one batch. Output: a unified diff per file, or with "
            "--write the files are replaced atomically once every fill has succeeded; --json prints "
            "one JSON object per input. For '-' (stdin) the filled text itself is printed."
        ),
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="files to fill, or - for stdin")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--write", "-w", action="store_true", help="replace the files (atomically) instead of printing a diff")
    out.add_argument("--json", action="store_true", help="print one JSON object per input (JSON Lines)")
    p.add_argument("--allow-invalid", action="store_true",
                   help="with --write, also write files with a fill that does not parse (default: they are skipped)")
    p.add_argument("--at", metavar="LINE:COL", type=cursor_position, default=None,
                   help="fill at this cursor (1-based line and column in characters) instead of at markers")
    p.add_argument("--language", default=None,
                   help="language (name, LSP id or extension; default: from the file extension; needed for stdin). "
                        "`infill languages` lists them")
    p.add_argument("--related", metavar="PATH", action="append", default=[],
                   help="other files, or directories to search for files of the same language, whose lines most like "
                        "the code before a hole are read as context before the file (repeatable)")
    add_model_options(p)
    g = p.add_argument_group("sampling")
    g.add_argument("--max-tokens", type=int_in(1, MAX_HOLE_TOKENS), default=DEFAULT_MAX_TOKENS,
                   help=f"budget of a <FILL> without N and of --at (default: {DEFAULT_MAX_TOKENS})")
    add_sampling_arguments(g)
    _logging_options(p)
    p.set_defaults(handler=run_fill)


def _first_commands(argv: Sequence[str]) -> list[str]:
    """The leading non-option words of argv (the subcommand path)."""
    out = []
    for a in argv:
        if a.startswith("-"):
            break
        out.append(a)
    return out


def _try_import(module: str):
    """Import a module that supplies a subcommand; None if it is not part of this installation."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name and (e.name == module or module.startswith(e.name + ".")):
            return None
        raise


def _add_delegated(p: argparse.ArgumentParser, module: str, wanted: bool, model_options: bool) -> None:
    """Wire a subcommand whose arguments and main live in ``module``.

    The module is imported only when this subcommand is being run (so ``infill --help`` stays
    fast and works without it).
    """
    p.set_defaults(handler=_run_delegated, module=module)
    if not wanted:
        return
    mod = _try_import(module)
    if mod is None:
        p.set_defaults(module_missing=True)
        return
    if model_options:
        add_model_options(p)
    mod.add_arguments(p)
    try:
        _logging_options(p)
    except argparse.ArgumentError:  # the module has its own -q/-v
        pass


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="Code infilling with a masked-diffusion language model.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_fill(sub)
    words = _first_commands(argv)
    train = sub.add_parser("train", help="train a model (see infill train --help)", add_help=True)
    _add_delegated(train, "infill.train.loop", wanted=words[:1] == ["train"], model_options=False)
    train.set_defaults(verbose=1)  # training is long: show its progress unless -q
    adapt = sub.add_parser("adapt", help="train a causal model's window adapter to read the code below the hole (resumable)")
    _add_delegated(adapt, "infill.train.window_adapter", wanted=words[:1] == ["adapt"], model_options=False)
    adapt.set_defaults(verbose=1)
    corpus = sub.add_parser("corpus", help="training corpora")
    corpus_sub = corpus.add_subparsers(dest="corpus_command", metavar="WHAT", required=True)
    fetch = corpus_sub.add_parser("fetch", help="a many-language corpus from PyPI, npm and Debian sources (resumable)")
    _add_delegated(fetch, "infill.train.registry.build", wanted=words[:2] == ["corpus", "fetch"], model_options=False)
    fetch.set_defaults(verbose=1)  # long: show progress unless -q
    pack = corpus_sub.add_parser("pack", help="a corpus within a size limit (xz), for a machine it must travel to")
    _add_delegated(pack, "infill.train.pack", wanted=words[:2] == ["corpus", "pack"], model_options=False)
    bench = sub.add_parser("bench", help="benchmarks")
    bench_sub = bench.add_subparsers(dest="bench_command", metavar="BENCHMARK", required=True)
    quality = bench_sub.add_parser("quality", help="HumanEval-Infilling quality (pass@1, exact match)")
    _add_delegated(quality, "infill.bench.quality", wanted=words[:2] == ["bench", "quality"], model_options=True)
    lsp = sub.add_parser("lsp", help="the language server (stdio, --tcp, --ws)")
    _add_delegated(lsp, "infill.lsp.cli", wanted=words[:1] == ["lsp"], model_options=True)
    speed = bench_sub.add_parser("speed", help="latency and tokens/s (windows x contexts, steps, batching, CPU/CUDA)")
    _add_delegated(speed, "infill.bench.speed", wanted=words[:2] == ["bench", "speed"], model_options=True)
    v = bench_sub.add_parser("validity", help="syntax validity of fills in JavaScript/Go holes cut from unseen code")
    _add_delegated(v, "infill.bench.validity", wanted=words[:2] == ["bench", "validity"], model_options=True)
    over = bench_sub.add_parser("overhead", help="the syntax constraint's cost: the same fills off and on, timed in pairs")
    _add_delegated(over, "infill.bench.overhead", wanted=words[:2] == ["bench", "overhead"], model_options=True)
    lsp_bench = bench_sub.add_parser("lsp", help="keystroke -> inline-completion latency through the real language server")
    _add_delegated(lsp_bench, "infill.bench.keystrokes", wanted=words[:2] == ["bench", "lsp"], model_options=True)
    cal = bench_sub.add_parser("calibrate", help="precision against coverage of the fill score; the threshold to stay quiet")
    _add_delegated(cal, "infill.bench.calibrate", wanted=words[:2] == ["bench", "calibrate"], model_options=False)
    card = sub.add_parser("card", help="write a model's MODEL_CARD.md from its training facts and benchmark results")
    _add_delegated(card, "infill.train.model_card", wanted=words[:1] == ["card"], model_options=False)
    imp = sub.add_parser("import-gguf", help="a pretrained causal Llama network from a GGUF file, as a model directory")
    _add_delegated(imp, "infill.train.import_gguf", wanted=words[:1] == ["import-gguf"], model_options=False)
    langs = sub.add_parser("languages", help="the languages infill knows (grammars/languages.toml)")
    langs.add_argument("--json", action="store_true", help="one JSON object: name -> LSP ids and extensions")
    langs.set_defaults(handler=run_languages)
    refactor = sub.add_parser("refactor", help="batch edits over many files (holes, docstrings, annotate, bodies, query)")
    _add_delegated(refactor, "infill.refactor.run", wanted=words[:1] == ["refactor"], model_options=True)
    serve = sub.add_parser("serve", help="one engine for many editors over a websocket (continuous batching)")
    _add_delegated(serve, "infill.serve.command", wanted=words[:1] == ["serve"], model_options=True)
    bench_serve = bench_sub.add_parser("serve", help="simulated editors typing against one infill serve (latency, throughput)")
    _add_delegated(bench_serve, "infill.bench.serve", wanted=words[:2] == ["bench", "serve"], model_options=True)
    return parser


# ----------------------------------------------------------------------------------------------
# Entry point.


def _setup_logging(verbose: int) -> None:
    if verbose <= 0:
        return
    logger = logging.getLogger("infill")
    logger.setLevel(logging.DEBUG if verbose > 1 else logging.INFO)
    if not any(getattr(h, "_infill_cli", False) for h in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("infill: %(levelname)s: %(name)s: %(message)s"))
        handler._infill_cli = True  # type: ignore[attr-defined]
        logger.addHandler(handler)


def warn(message: str) -> None:
    """Print one warning line on stderr (always, -q or not: it is about the result)."""
    print(f"{PROG}: warning: {message}", file=sys.stderr)


def error(message: str) -> int:
    """Print the one line of a user error; the exit code."""
    message = " ".join(str(message).split("\n"))  # always one line
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, --version, or an argument error (argparse printed it)
        return e.code if isinstance(e.code, int) else (EXIT_OK if e.code is None else EXIT_USAGE)
    _setup_logging(0 if getattr(args, "quiet", False) else getattr(args, "verbose", 0))
    try:
        return args.handler(args)
    except InfillError as e:
        return error(str(e))
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; no file was changed", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `infill fill x.py | head`
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        except OSError:
            pass
        return EXIT_ERROR


def _run_delegated(args: argparse.Namespace) -> int:
    if getattr(args, "module_missing", False):
        raise InputError(f"this command needs {args.module}, which is not part of this installation")
    mod = importlib.import_module(args.module)
    params = inspect.signature(mod.main).parameters
    if len(params) >= 2:  # main(args, engine): the CLI owns the model options
        return mod.main(args, load_engine(args))
    return mod.main(args)


# ----------------------------------------------------------------------------------------------
# infill fill


@dataclass
class Source:
    """One input: its text as read (markers included) and the holes to fill."""

    path: str  # as given; "-" for stdin
    original: str  # the text as read, markers included
    text: str  # the text sent to the engine (markers removed)
    holes: list[Hole]
    language: str | None
    real_path: Path | None = None  # resolved file (symlinks followed); None for stdin
    stat: os.stat_result | None = None
    filled: str = ""
    result: object = None
    left_broken: bool = False  # its fills are valid, its code around them still broken (left_broken)
    extra: dict = field(default_factory=dict)

    @property
    def is_stdin(self) -> bool:
        return self.real_path is None


def language_of(name: str, given: str | None, constrained: bool) -> str | None:
    """The language to fill ``name`` (a path, or ``<stdin>``) in: ``given`` (``--language``) or
    its extension's, by the one language table (grammars/languages.toml). A language infill has no
    grammar for is an InputError unless the fill is unconstrained (then it is filled as plain text,
    and said so): a fill that nothing checks is never passed off as a checked one."""
    spec = spec_for(given) if given else None if name == "<stdin>" else spec_for(name)
    if spec is not None:
        return spec.name
    known = ", ".join(specs())
    if not constrained:
        warn(f"{name}: no grammar for {f'language {given!r}' if given else 'its language'}: filled unchecked")
        return given
    if given:
        raise InputError(f"--language {given}: unknown language (known: {known}; --no-constrain fills any text unchecked)")
    if name == "<stdin>":
        raise InputError(f"stdin needs --language (one of: {known})")
    raise InputError(f"{name}: no grammar for this kind of file (known: {known}); name one with --language, "
                     "or fill it unchecked with --no-constrain")


def read_stdin() -> str:
    stream = getattr(sys.stdin, "buffer", None)
    if stream is not None:
        return decode_text(stream.read(), "<stdin>")
    return sys.stdin.read()  # a replaced text stream (tests): already decoded


def gather(args: argparse.Namespace) -> list[Source]:
    """Read every input and find its holes; InputError on the first bad one."""
    if "-" in args.paths and len(args.paths) > 1:
        raise InputError("'-' (stdin) cannot be mixed with file paths")
    if args.write and "-" in args.paths:
        raise InputError("--write needs files, not '-' (stdin)")
    if args.at is not None and len(args.paths) > 1:
        raise InputError("--at needs exactly one input")
    sources: list[Source] = []
    seen: set[Path] = set()
    for path in args.paths:
        if path == "-":
            original, real, st = read_stdin(), None, None
        else:
            original, real, st = read_text_file(path)
            if real in seen:
                log.info("%s: given twice; filled once", path)
                continue
            seen.add(real)
        name = "<stdin>" if path == "-" else path
        language = language_of(name, args.language, args.constrained)
        if args.at is not None:
            try:
                offset = position_to_offset(original, *args.at)
            except InputError as e:
                raise InputError(f"{name}: {e}") from None
            text, holes = original, [Hole(start=offset, end=offset, max_tokens=args.max_tokens)]
        else:
            try:
                text, holes = find_holes(original, args.max_tokens)
            except InputError as e:
                raise InputError(f"{name}: {e}") from None
            if not holes:
                raise InputError(f"{name}: no <FILL> markers (nothing to fill; use --at LINE:COL for a cursor)")
        sources.append(Source(path=path, original=original, text=text, holes=holes, language=language, real_path=real, stat=st))
    return sources


def language_table() -> dict[str, dict]:
    """Every language of grammars/languages.toml: its LSP ids and file extensions (the table the
    VS Code extension keeps a copy of, vscode-extension/languages.json, checked by a test)."""
    return {name: {"lsp_ids": list(s.lsp_ids), "extensions": list(s.extensions)} for name, s in specs().items()}


def run_languages(args: argparse.Namespace) -> int:
    table = language_table()
    if args.json:
        print(json.dumps(table, indent=2))
        return EXIT_OK
    for name, row in table.items():
        print(f"{name:12} ids: {', '.join(row['lsp_ids']):40} files: {', '.join('.' + e for e in row['extensions'])}")
    return EXIT_OK


def related_context(paths: list[str], source: Source) -> list:
    """The snippets of the ``--related`` files that a source's first hole reads (infill/text/related.py)."""
    from infill.protocol import Snippet
    from infill.text import related
    from infill.text.files import read_related

    spec = spec_for(source.language) if paths else None
    if spec is None:
        return []
    documents = read_related(paths, spec.extensions, {source.real_path} if source.real_path else set())
    # Named as the model would see them in a repository: relative to the filled file's folder where under it.
    home = source.real_path.parent if source.real_path else Path.cwd()
    named = []
    for path, text in documents:
        real = Path(path).resolve()
        named.append((real.relative_to(home).as_posix() if real.is_relative_to(home) else real.name, text))
    return [Snippet(path, text) for path, text in related.choose(source.text, source.holes[0].start, named)]


def run_fill(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    sources = gather(args)  # all input errors before the (slow) model load
    from infill.protocol import FillRequest

    options = sampling_options(args)
    requests = [
        FillRequest(text=s.text, holes=s.holes, language=s.language, options=options, path=None if s.is_stdin else s.path,
                    context=related_context(args.related, s))
        for s in sources
    ]
    t_load = time.perf_counter()
    engine = load_engine(args)
    t_fill = time.perf_counter()
    results = engine.fill_batch(requests)  # every hole of every file, one batched call
    fill_s = time.perf_counter() - t_fill
    for s, r in zip(sources, results):
        nl = newline_of(s.text)
        s.result = r
        s.filled = apply_fills(s.text, s.holes, [match_newlines(f.text, nl) for f in r.fills])

    invalid = {s.path: [line_col(s.text, h.start) for h, f in zip(s.holes, s.result.fills) if f.valid is False] for s in sources}
    floor = model_floor(args)
    quiet = {s.path: [(*line_col(s.text, h.start), f.score) for h, f in zip(s.holes, s.result.fills)
                      if floor is not None and f.valid is not False and f.text.strip() and f.score < floor] for s in sources}
    skipped = [s for s in sources if invalid[s.path] and args.write and not args.allow_invalid]
    for s in sources:
        s.left_broken = left_broken(s)
    broken = [s for s in sources if s.left_broken]
    for s in sources:
        for line, col in invalid[s.path]:
            mark = f"{s.path}:{line}:{col}: this fill does not parse"
            if args.write:
                warn(mark + ("; written anyway (--allow-invalid)" if args.allow_invalid else f"; {s.path} not written"))
            elif args.json or s.is_stdin:
                warn(mark)
        if s in broken and (args.write or args.json or s.is_stdin):
            warn(f"{s.path}: {LEFT_BROKEN}")
    if args.write:
        write_all([s for s in sources if s not in skipped])
    elif args.json:
        device = str(getattr(engine, "device", ""))
        for s in sources:
            print(json.dumps(json_record(s, device, floor), ensure_ascii=False), flush=False)
    else:
        for s in sources:
            if s.is_stdin:
                sys.stdout.write(s.filled)
            else:  # comment lines before a file's diff: patch and git apply skip them
                sys.stdout.write("".join(f"# infill: {s.path}:{line}:{col}: this fill does not parse\n" for line, col in invalid[s.path]))
                sys.stdout.write("".join(f"# infill: {s.path}:{line}:{col}: {UNDER_FLOOR.format(score=score, floor=floor)}\n"
                                         for line, col, score in quiet[s.path]))
                sys.stdout.write(f"# infill: {s.path}: {LEFT_BROKEN}\n" if s in broken else "")
                sys.stdout.write(unified_diff(s.original, s.filled, s.path))
    sys.stdout.flush()

    if not args.quiet:
        n_holes = sum(len(s.holes) for s in sources)
        tokens = sum(r.timings.tokens_filled for r in results)
        wall = time.perf_counter() - t0
        what = f"{len(sources)} file{'s' if len(sources) != 1 else ''}"
        if sources[0].is_stdin:
            what = "stdin"
        done = "wrote" if args.write else "filled"
        bad = sum(len(v) for v in invalid.values())
        low = sum(len(v) for v in quiet.values())
        print(
            f"{PROG}: {done} {n_holes} hole{'s' if n_holes != 1 else ''} in {what}: {tokens} tokens generated, "
            f"{wall:.2f} s (model load {t_fill - t_load:.2f} s, fill {fill_s:.2f} s) with {results[0].model} on {engine.device}"
            + (f"; {bad} fill{'s' if bad != 1 else ''} do{'es' if bad == 1 else ''} not parse" if bad else "")
            + (f"; {low} fill{'s' if low != 1 else ''} scored under the model's floor ({floor:.3f}): an editor would not show {'them' if low != 1 else 'it'}" if low else "")
            + (f"; {len(broken)} file{'s' if len(broken) != 1 else ''} still broken around {'their' if len(broken) != 1 else 'its'} fills" if broken else "")
            + (f"; {len(skipped)} file{'s' if len(skipped) != 1 else ''} not written" if skipped else ""),
            file=sys.stderr,
        )
    return EXIT_ERROR if skipped else EXIT_OK


UNDER_FLOOR = "scored {score:.3f}, under the model's floor ({floor:.3f}): an editor would not show this suggestion"
LEFT_BROKEN = "the code around the fills does not parse, as it did not before them (they add no error, and mend none)"


def left_broken(s: Source) -> bool:
    """Are ``s``'s fills all judged valid (they add no error), while its code around them (the
    region the engine judges) still has errors, which were there before them? A cut that took a
    block's opening line, say, that no fill wrote again. False where not judged."""
    from infill.syntax.constraint import is_clean

    fills = s.result.fills
    if not s.holes or not all(f.valid is True for f in fills):
        return False
    return is_clean(s.language, s.text, [(h.start, h.end) for h in s.holes], [f.text for f in fills]) is False


def model_floor(args: argparse.Namespace) -> float | None:
    """The model's floor (its config.json's ``min_score``), under which the language server shows no
    suggestion; None with ``--engine`` (the served model's own is not known here) or where it has none."""
    from infill.model.declared import bundled_model_dir, declared_min_score

    if getattr(args, "engine", None):
        return None
    return declared_min_score(Path(args.model) if getattr(args, "model", None) else bundled_model_dir())


def json_record(s: Source, device: str, floor: float | None = None) -> dict:
    import msgspec

    r = s.result
    holes = []
    for h in s.holes:
        line, col = line_col(s.text, h.start)
        holes.append({"start": h.start, "end": h.end, "max_tokens": h.max_tokens, "line": line, "column": col})
    return {
        "path": s.path,
        "language": s.language,
        "model": r.model,
        "device": device,
        "holes": holes,
        "fills": [msgspec.to_builtins(f) for f in r.fills],
        "timings": msgspec.to_builtins(r.timings),
        "changed": s.filled != s.original,
        "left_broken": s.left_broken,
        "min_score": floor,  # the model's floor: an editor shows no fill scored under it
    }


# ----------------------------------------------------------------------------------------------
# Atomic writes.


def write_all(sources: list[Source]) -> None:
    """Replace every file that changed, all or nothing as far as the OS allows.

    Each new text goes to a temporary file beside its target (same permissions), fsynced; only
    when all are staged are they renamed over the targets, one ``os.replace`` each. An error or
    Ctrl-C while staging removes the temporary files and leaves every target untouched.
    """
    staged: list[tuple[Path, Path]] = []
    try:
        for s in sources:
            if s.filled == s.original:
                continue
            assert s.real_path is not None and s.stat is not None
            why = changed_on_disk(s.real_path, s.stat)
            if why:
                raise InputError(f"{s.path}: {why}; nothing written")
            staged.append((stage(s.real_path, s.filled, s.stat), s.real_path))
        for tmp, target in staged:
            os.replace(tmp, target)
            fsync_dir(target.parent)
    except BaseException:
        for tmp, _ in staged:
            try:
                tmp.unlink()
            except FileNotFoundError:
                pass
        raise


if __name__ == "__main__":
    sys.exit(main())
