"""Which validity holes (Python, 24 a seed) have a judged region whose compile error the hole's own hides
(the region with the hole's line taken out fails away from it); usage: python census-hidden-compile-error.py FIRST END OUT.json (no model)."""
import sys, json
from infill.bench import validity as V
from infill.syntax.languages import grammar
from infill.syntax.document import Document
g = grammar("python")
hits, total = [], 0
for seed in range(int(sys.argv[1]), int(sys.argv[2])):
    files, _ = V.load_sources("bench/sources", "python", 200, seed)
    for c in V.cut_holes(files, 24, seed, ["line", "rest", "inside", "string", "block"], "python"):
        total += 1
        d = Document(g, c.text, [(c.start, c.start)])
        if d.strict is not None and d.strict.enabled and d.strict._lines_out()[1] is not None:
            hits.append(dict(seed=seed, path=c.path, start=c.start, end=c.end, kind=c.kind, ref=c.reference[:60], hidden=d.strict._lines_out()[1].message, nested=bool(d.head)))
            print(hits[-1], flush=True)
print("total", total, "with a hidden error", len(hits))
json.dump(hits, open(sys.argv[3], "w"))
