"""How often the layout's "due" rule (infill/syntax/document.py ``_due``) is wrong on real code.

Rest-of-line holes are cut at random points of random lines of the validity sources (what
``bench/fetch_validity_sources.sh`` fetches into ``bench/sources``); where the rule says the fill
must close brackets open before the hole, the text the cut took (the real rest of the line) is
read with the hole's steering lexer: it must close them too. A miss is printed with its place.
The lexer reads the real text from the hole's context, so a hole cut inside a string literal the
context does not see as one (a Rust string) can read as a miss that is not one.

    .venv/bin/python bench/layout_due_precision.py --seed 2 --holes 600
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from infill.syntax.document import Document, hole_context
from infill.syntax.languages import grammar
from infill.syntax.steering import Lexer

LANGUAGES = ("python", "javascript", "typescript", "tsx", "go", "rust", "java", "c", "cpp")
MAX_CHARS = 200_000  # larger files are skipped (their parse dominates the run)


def sources(root: Path, language: str) -> list[Path]:
    spec = grammar(language).spec
    return sorted(p for p in (root / language).rglob("*") if p.is_file() and p.suffix[1:] in spec.extensions)


def measure(root: Path, language: str, holes: int, rng: random.Random, shown: int = 6) -> tuple[int, int, int]:
    """(holes cut, holes where the rule fired, misses) for ``language``; prints up to ``shown`` misses."""
    g = grammar(language)
    files = sources(root, language)
    cut = fired = missed = tries = 0
    while files and cut < holes and tries < holes * 20:
        tries += 1
        path = rng.choice(files)
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if len(text) > MAX_CHARS:
            continue
        lines = text.split("\n")
        row = rng.randrange(len(lines))
        line = lines[row]
        if not line.strip():
            continue
        col = rng.randrange(len(line) - len(line.lstrip()), len(line) + 1)
        start = sum(len(x) + 1 for x in lines[:row]) + col
        end = start + len(line) - col
        ctx = hole_context(Document(g, text[:start] + text[end:], [(start, start)]), 0)
        cut += 1
        if ctx.in_text or not ctx.due:
            continue
        fired += 1
        lexer = Lexer(g.spec, ctx)
        if lexer.feed(lexer.start, text[start:end], final=True)[0].popped < ctx.due:
            missed += 1
            if missed <= shown:
                print(f"  miss: {path.relative_to(root)}:{row + 1} col {col}: due {ctx.due}, the line goes on "
                      f"{text[start:end]!r}, then {lines[row + 1 : row + 3]!r}")
    return cut, fired, missed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("languages", nargs="*", default=list(LANGUAGES))
    parser.add_argument("--sources", type=Path, default=Path("bench/sources"))
    parser.add_argument("--holes", type=int, default=600, help="holes per language")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    total = [0, 0, 0]
    for language in args.languages:
        cut, fired, missed = measure(args.sources, language, args.holes, rng)
        print(f"{language}: {cut} holes, the rule fired at {fired}, wrong at {missed}")
        total = [a + b for a, b in zip(total, (cut, fired, missed))]
    print(f"all: {total[0]} holes, fired at {total[1]}, wrong at {total[2]}")


if __name__ == "__main__":
    main()
