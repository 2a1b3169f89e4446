"""Is Grammar.parse's incremental reparse from a kept tree the parse from scratch?

For random files of each language's validity sources (bench/sources), cut a random block of
lines (a hole), then type it back a few characters at a time (now and then a backspace), parsing
each text with ``Grammar.parse`` (incremental from the kept tree of the text before, where one
small edit makes it, and kept where it has no error: infill/syntax/languages.py) and with a fresh
parser; compares every node (type, bytes, missing, error), and apart the error nodes and the
top-level nodes, which the syntax checks read; counts the texts without an error (those whose
incremental parse stands). With ``--pure``, each text is parsed incrementally from the tree of the
text before whether it has an error or not (what tree-sitter's incremental parse gives alone). Usage: python bench/results/v2.39/incremental.py SEED FILES_PER_LANGUAGE [--pure]
"""

import random
import sys
from pathlib import Path

from infill.syntax.languages import EDIT_BYTES, grammar, one_edit, specs
from infill.text.textpos import byte_to_point


def nodes(root):
    out, todo = [], [root]
    while todo:
        n = todo.pop()
        out.append((n.type, n.start_byte, n.end_byte, n.is_missing, n.is_error))
        todo.extend(reversed(n.children))
    return out


def incremental(parser, tree, old: bytes, new: bytes):
    """``new`` parsed from ``tree`` (of ``old``) edited, as Grammar.parse does before its check."""
    edit = one_edit(old, new, EDIT_BYTES)
    if edit is None:
        return parser.parse(new)
    start, old_end, new_end = edit
    tree = tree.copy()
    tree.edit(start_byte=start, old_end_byte=old_end, new_end_byte=new_end, start_point=byte_to_point(old, start),
              old_end_point=byte_to_point(old, old_end), new_end_point=byte_to_point(new, new_end))
    return parser.parse(new, old_tree=tree)


def main(seed: int, per: int, pure: bool) -> None:
    rng = random.Random(seed)
    total = {"parses": 0, "without an error (kept incremental)": 0, "nodes differ": 0, "errors or top-level differ": 0}
    for lang, spec in specs().items():
        g = grammar(lang)
        fresh, chain = type(g.parser())(g.language), type(g.parser())(g.language)
        files = sorted(f for f in Path("bench/sources", lang).rglob("*")
                       if f.is_file() and f.suffix[1:] in spec.extensions and f.stat().st_size < 300_000)
        counts = dict.fromkeys(total, 0)
        for _ in range(per):
            f = rng.choice(files)
            lines = f.read_bytes().splitlines(keepends=True)
            if len(lines) < 10:
                continue
            a = rng.randrange(len(lines))
            b = min(len(lines), a + rng.choice([1, 1, 2, 5, 12]))
            pre, typed, post = b"".join(lines[:a]), b"".join(lines[a:b]), b"".join(lines[b:])
            last = (pre + post, g.parse(pre + post))
            k = 0
            while k < len(typed):
                k = min(len(typed), k + rng.choice([1, 1, 1, 2, 3]))
                text = pre + typed[: k - (rng.random() < 0.05)] + post
                tree = incremental(chain, last[1], last[0], text) if pure else g.parse(text)
                last = (text, tree)
                mine, theirs = tree.root_node, fresh.parse(text).root_node
                n1, n2 = nodes(mine), nodes(theirs)
                counts["parses"] += 1
                counts["without an error (kept incremental)"] += not theirs.has_error
                if n1 != n2:
                    counts["nodes differ"] += 1
                    if [n for n in n1 if n[3] or n[4]] != [n for n in n2 if n[3] or n[4]] or \
                            [(c.type, c.start_byte, c.end_byte) for c in mine.children] != [(c.type, c.start_byte, c.end_byte) for c in theirs.children]:
                        counts["errors or top-level differ"] += 1
                    print(f"  differs: {lang} {f} lines {a}-{b} typed {k}: {sorted(set(n1) ^ set(n2))[:4]}")
        print(lang, counts, flush=True)
        total = {k: total[k] + counts[k] for k in total}
    print("all", total)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), "--pure" in sys.argv[3:])
