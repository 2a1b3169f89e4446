"""How many HumanEval multi-line references a fill that ends with its block can never write whole.

A cursor suggestion ends at a blank line after code or at a line indented less than its first
(`Finisher.said_all`); a reference that holds such a line therefore cannot be filled whole by a fill
that stops there. This counts those references in the full set and in the `--limit`/`--subset-seed`
subsets given (the same subsets as `infill bench quality multi-line`). No model runs.

    .venv/bin/python bench/multiline_block_refs.py --subset 100:0 --subset 100:617 --subset 200:229
"""

from __future__ import annotations

import argparse

from infill.bench.quality import load_tasks


def indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def ends_early(reference: str) -> bool:
    """Whether a block-ending fill stops inside ``reference``: a blank line or a dedent below its first
    code line, before its last code line."""
    lines = reference.split("\n")
    code = [i for i, line in enumerate(lines) if line.strip()]
    if not code:
        return False
    first, last = code[0], code[-1]
    return any(not lines[i].strip() or indent(lines[i]) < indent(lines[first]) for i in range(first + 1, last + 1))


def count(tasks) -> tuple[int, int]:
    return sum(ends_early(t.canonical_solution) for t in tasks), len(tasks)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--subset", action="append", default=[], help="LIMIT:SEED, as bench quality's --limit and --subset-seed")
    args = ap.parse_args()
    n, total = count(load_tasks("multi-line", args.data_dir))
    print(f"full set: {n} of {total} ({n / total:.1%})")
    for spec in args.subset:
        limit, seed = (int(x) for x in spec.split(":"))
        n, total = count(load_tasks("multi-line", args.data_dir, limit, seed))
        print(f"{limit} at subset seed {seed}: {n} of {total}")


if __name__ == "__main__":
    main()
