"""`infill bench lsp`'s keystroke document (seed SEED, whole file) typed into the Engine directly, without the
language server: each fill's time, its model calls (rows: ms), fill and score; usage:
python keystrokes-direct.py SEED [KEYSTROKES] [prof|-] [OUT.json] (prof: cProfile over 30 keystrokes)."""
import sys, time, json, statistics
import torch
from infill.engine.fill import Engine, EngineConfig
from infill.protocol import FillRequest, Hole, SamplingOptions
from infill.bench import keystrokes as ks
from infill.lsp import documents
seed = int(sys.argv[1]); n = int(sys.argv[2]) if len(sys.argv) > 2 else 60
eng = Engine.load(EngineConfig(threads=2))
m = eng.model
tok = ks.counting_tokenizer(eng.model_dir) if hasattr(eng, "model_dir") else None

floor = -1.6898
docs = ks.make_documents(1, 0, eng.tokenizer if tok is None else tok, keystrokes=n, context_tokens=0, seed=seed)
d = docs[0]
text, at = d.text, d.cursor
calls = []
real = m._run
def timed(*a, **k):
    t = time.perf_counter(); out = real(*a, **k); calls.append((tuple(a[0].shape), (time.perf_counter() - t) * 1000)); return out
m._run = timed
opts = SamplingOptions(candidates=1, min_score=floor)
def fill(text, at):
    prepared = documents.prepare(text, [Hole(at, at, 32)])
    req = FillRequest(text=prepared.text, holes=prepared.holes, language="python", options=opts, path=d.uri)
    calls.clear(); t = time.perf_counter(); r = eng.fill_batch([req])[0]; tot = (time.perf_counter() - t) * 1000
    return r, tot, list(calls)
fill(text, at); fill(text, at)
lat = []
out = []
for i, key in enumerate(d.keys):
    text = text[:at] + key + text[at:]; at += len(key)
    r, tot, cs = fill(text, at)
    lat.append(tot)
    out.append(dict(i=i, ms=tot, model=sum(ms for _, ms in cs), calls=len(cs), fill=r.fills[0].text if r.fills else None, score=r.fills[0].score if r.fills else None, valid=r.fills[0].valid if r.fills else None))
    model = sum(ms for _, ms in cs)
    print(f"{i:2d} {key!r:6} {tot:6.1f} ms model {model:6.1f} in {len(cs)} calls: " + " ".join(f"{s[1]}:{ms:.0f}" for s, ms in cs) + f"  score {r.fills[0].score if r.fills else None}")
print("p50", statistics.median(lat))
if len(sys.argv) > 4: json.dump(out, open(sys.argv[4], "w"))
if len(sys.argv) > 3 and sys.argv[3] == "prof":
    import cProfile, pstats
    text, at = d.text, d.cursor
    pr = cProfile.Profile()
    pr.enable()
    for key in d.keys[:30]:
        text = text[:at] + key + text[at:]; at += len(key)
        fill(text, at)
    pr.disable()
    pstats.Stats(pr).sort_stats("cumulative").print_stats(60)
