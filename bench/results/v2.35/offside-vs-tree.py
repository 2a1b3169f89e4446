"""Where the tree names a method, does the offside reading name the same? Random positions in bench/sources's
Python files (load_sources seed 5, 40 a file); usage: python offside-vs-tree.py RNG_SEED (no model)."""
import random, sys
from infill.bench import validity as V
from infill.syntax.languages import grammar
from infill.lang.python import blocks
g = grammar("python")
files, _ = V.load_sources("bench/sources", "python", 400, 5)
rng = random.Random(int(sys.argv[1]))
n = agree = tree_only = text_only = differ = 0
ex = []
for path, text in files:
    data = text.encode(); root = g.parse(data).root_node
    if not data: continue
    for _ in range(40):
        lo = rng.randrange(len(data))
        if (data[lo] & 0xC0) == 0x80: continue
        a = blocks.method_region(root, data, [(lo, lo)]); b = blocks.offside_method_region(root, data, [(lo, lo)])
        n += 1
        if a == b or (a and b and a[0] == b[0] and data[a[0]:a[1]].rstrip() == data[b[0]:b[1]].rstrip()): agree += 1
        elif a and not b: tree_only += 1; ex.append(("tree", path, lo, a, b))
        elif b and not a: text_only += 1; ex.append(("text", path, lo, a, b))
        else: differ += 1; ex.append(("differ", path, lo, a, b))
print(len(files), "files", n, "positions: agree", agree, "tree only", tree_only, "text only", text_only, "differ", differ)
import collections
for kind in ("tree", "text", "differ"):
    for e in [x for x in ex if x[0] == kind][:4]:
        k, path, lo, a, b = e
        data = dict(files)[path].encode()
        print(k, path, lo, a, b, repr(data[max(0, lo-80):lo]), "|", repr(data[lo:lo+40]))
