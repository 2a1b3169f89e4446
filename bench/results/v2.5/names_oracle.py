"""Where the names a hole's hidden text uses can come from (no model runs).

For the holes of `infill bench validity --holes 20 --kinds line,rest,inside,string,block --seed 29`
(nine languages, bench/sources): the identifiers (3+ characters) of each hidden text, those of them
not in the text before the hole ("new"), and how many of those the context windows of the
package's other files hold (what `--related` reads: infill/text/related.py), against the 24 lines
after the hole's line and the whole text after the hole.

    python bench/results/v2.5/names_oracle.py
"""

from __future__ import annotations

import collections

from infill.bench import validity as V
from infill.text import related as R

LANGUAGES = ("python", "javascript", "typescript", "tsx", "go", "rust", "java", "c", "cpp")
SEED, HOLES, KINDS = 29, 20, ["line", "rest", "inside", "string", "block"]


def main() -> None:
    n = collections.Counter()
    for language in LANGUAGES:
        root = V.source_dir(V.DEFAULT_SOURCES, language)
        files, _ = V.load_sources(root, language, 200, SEED)
        cuts = V.cut_holes(files, HOLES, SEED, KINDS, language)
        for cut, snippets in zip(cuts, V.package_context(root, language, cuts)):
            hidden, before = R.names(cut.reference), R.names(cut.text[: cut.start])
            new = hidden - before
            after = cut.text[cut.start :]
            below = "".join(after.splitlines(keepends=True)[:24])
            n["holes"] += 1
            n["hidden names"] += len(hidden)
            n["new names"] += len(new)
            n["holes with new names"] += bool(new)
            n["new names in the related windows"] += len(new & R.names("".join(s.text for s in snippets)))
            n["holes with one there"] += bool(new & R.names("".join(s.text for s in snippets)))
            n["new names in the 24 lines after"] += len(new & R.names(below))
            n["holes with one in the 24 lines after"] += bool(new & R.names(below))
            n["new names anywhere after"] += len(new & R.names(after))
    for key, value in n.items():
        print(f"{key:40} {value}")


if __name__ == "__main__":
    main()
