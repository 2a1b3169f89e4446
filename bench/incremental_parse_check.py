"""Does tree-sitter's incremental reparse give the tree a parse from scratch gives, on documents
as an editor's requests make them? Real files of each language (bench/sources), a span cut out at
a random place (a hole), then its text typed back a byte at a time; each keystroke's document
parsed incrementally from an earlier tree edited by the span where the two differ, and compared
with a fresh parse node by node (type, byte and point span, missing, error, has-error).

``--base chained``: from the previous keystroke's incremental tree (as an editor keeps its tree);
``--base cut``: from the fresh parse of the cut document. Prints the mismatches and the mean
milliseconds of either parse. No model runs.

    .venv/bin/python bench/incremental_parse_check.py --seed 1 --base chained
"""

from __future__ import annotations

import argparse
import glob
import random
import time

from infill.syntax.languages import grammar
from infill.text.textpos import byte_to_point

EXTENSIONS = {"python": ".py", "javascript": ".js", "typescript": ".ts", "tsx": ".tsx", "go": ".go", "rust": ".rs",
              "java": ".java", "c": ".c", "cpp": ".cc"}


def nodes(node, out: list) -> list:
    out.append((node.type, node.start_byte, node.end_byte, node.is_missing, node.is_error, node.has_error,
                node.start_point, node.end_point))
    for child in node.children:
        nodes(child, out)
    return out


def common_head(a: bytes, b: bytes) -> int:
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if a[:mid] == b[:mid] else (lo, mid - 1)
    return lo


def reparse(g, old: bytes, old_tree, new: bytes):
    """``new``'s tree parsed incrementally from ``old_tree`` edited by the one span where they differ."""
    p = common_head(old, new)
    s = common_head(old[p:][::-1], new[p:][::-1])
    tree = old_tree.copy()
    tree.edit(start_byte=p, old_end_byte=len(old) - s, new_end_byte=len(new) - s, start_point=byte_to_point(old, p),
              old_end_point=byte_to_point(old, len(old) - s), new_end_point=byte_to_point(new, len(new) - s))
    return g.parser().parse(new, old_tree=tree)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--base", choices=["chained", "cut"], default="chained")
    parser.add_argument("--sources", default="bench/sources")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    bad = total = 0
    fresh_s = incremental_s = 0.0
    for language, ext in EXTENSIONS.items():
        g = grammar(language)
        files = sorted(glob.glob(f"{args.sources}/{language}/**/*{ext}", recursive=True))
        for path in rng.sample(files, min(12, len(files))):
            data = open(path, "rb").read()[:150000]
            if not data:
                continue
            for _ in range(3):
                a = rng.randrange(len(data))
                b = min(len(data), a + rng.choice([1, 5, 20, 80, 400]))
                cut = data[:a] + data[b:]
                prev, prev_tree = cut, g.parser().parse(cut)
                for k in range(a, min(b, a + 12)):
                    new = data[: k + 1] + data[b:]
                    t0 = time.perf_counter()
                    inc = reparse(g, prev, prev_tree, new)
                    incremental_s += time.perf_counter() - t0
                    t0 = time.perf_counter()
                    fresh = g.parser().parse(new)
                    fresh_s += time.perf_counter() - t0
                    total += 1
                    if nodes(inc.root_node, []) != nodes(fresh.root_node, []):
                        bad += 1
                        print("mismatch", language, path, a, b, k)
                    if args.base == "chained":
                        prev, prev_tree = new, inc
    print(f"base {args.base}, seed {args.seed}: {bad} mismatches of {total}; "
          f"fresh {fresh_s / total * 1e3:.2f} ms, incremental {incremental_s / total * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
