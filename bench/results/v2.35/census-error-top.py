"""Which validity holes (Python, 24 a seed) sit where the top-level node around them is an ERROR and the tree
names no method; usage: python census-error-top.py FIRST_SEED END_SEED OUT.json (no model)."""
import sys, json
from infill.bench import validity as V
from infill.syntax.languages import grammar
from infill.syntax.document import Document
from infill.lang.python import blocks
g = grammar("python")
hits = []
total = 0
for seed in range(int(sys.argv[1]), int(sys.argv[2])):
    files, _ = V.load_sources("bench/sources", "python", 200, seed)
    for c in V.cut_holes(files, 24, seed, ["line", "rest", "inside", "string", "block"], "python"):
        total += 1
        data = c.text.encode(); lo = len(c.text[:c.start].encode())
        root = g.parse(data).root_node
        if blocks.method_region(root, data, [(lo, lo)]) is None and blocks._in_error(root, [(lo, lo)]):
            r = blocks.offside_method_region(root, data, [(lo, lo)])
            doc = Document(g, c.text, [(c.start, c.start)])
            hits.append(dict(seed=seed, path=c.path, start=c.start, end=c.end, kind=c.kind, region=r, nested=bool(doc.head), size=doc.end - doc.start, ref=c.reference[:60]))
            print(hits[-1], flush=True)
print("total", total, "ERROR-top without a tree method", len(hits), "nested now", sum(h["nested"] for h in hits))
json.dump(hits, open(sys.argv[3], "w"))
