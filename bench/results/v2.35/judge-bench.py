"""Time judging each keystroke's document of `infill bench lsp`'s seed SEED (whole file): one Document and
three fills (the recorded fill, empty, `x = 1`), the minimum of 5 runs; usage: python judge-bench.py SEED FILLS.json
(FILLS.json: a keystrokes-direct.py output). No model."""
import sys, time, json
from infill.bench import keystrokes as ks
from infill.syntax.languages import grammar
from infill.syntax.constraint import RequestCheck
from infill.syntax.document import Document
from infill.lsp import documents
from infill.protocol import Hole
from pathlib import Path
seed = int(sys.argv[1])
tok = ks.counting_tokenizer(Path("/work/main/infill/model/default_model"))
d = ks.make_documents(1, 0, tok, keystrokes=60, context_tokens=0, seed=seed)[0]
fills = {r["i"]: (r["fill"] or "") for r in json.load(open(sys.argv[2]))}
g = grammar("python")
text, at = d.text, d.cursor
tot = []
for i, key in enumerate(d.keys):
    text = text[:at] + key + text[at:]; at += len(key)
    best = 1e9
    for rep in range(5):
        g._trees.clear()
        t = time.perf_counter()
        doc = Document(g, text, [(at, at)])
        doc.valid([fills[i].encode()]); doc.valid([b""]); doc.valid([b"x = 1"])
        best = min(best, time.perf_counter() - t)
    tot.append(best * 1000)
import statistics
print("median ms", round(statistics.median(tot), 2), "sum", round(sum(tot), 1))
