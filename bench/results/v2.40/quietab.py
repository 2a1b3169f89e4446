"""In-process (`python bench/results/v2.40/quietab.py SEED...`, from the repository root): what the language server's quiet rule (lsp/server.py quiet_through) skips on `infill bench lsp`'s
keystrokes, and what the fill it skips would have done (run anyway, for the count)."""
import sys, time, json, torch
from infill.bench import keystrokes as K
from infill.engine.fill import Engine, EngineConfig
from infill.protocol import FillRequest, Hole, SamplingOptions
from infill.lsp import documents
from infill.lsp.server import quiet_through
torch.set_num_threads(2)
eng = Engine.load(EngineConfig())
tok = K.counting_tokenizer(__import__("pathlib").Path("infill/model/default_model"))
floor = -1.690
opts = SamplingOptions(candidates=1, retry=False, min_score=floor)
out = []
for seed in map(int, sys.argv[1:]):
    doc = K.make_documents(1, 0, tok, keystrokes=63, context_tokens=0, seed=seed)[0]
    quiet = None
    st = dict(seed=seed, keystrokes=0, skipped=0, skipped_would_show=0, shown=0, below=0, ms_all=0.0, ms_skipped=0.0)
    for k in range(len(doc.keys)):
        doc.type_next()
        under = quiet_through(quiet, doc.text, doc.cursor, floor)
        p = documents.prepare(doc.text, [Hole(doc.cursor, doc.cursor, 32)])
        t = time.perf_counter()
        r = eng.fill_batch([FillRequest(text=p.text, holes=p.holes, language="python", options=opts, path=f"d{seed}.py")])[0]
        dt = (time.perf_counter() - t) * 1000
        show = r.fills[0].valid is not False and not r.below_floor and r.fills[0].score >= floor and bool(r.fills[0].text.strip())
        if k >= 3:
            st["keystrokes"] += 1; st["ms_all"] += dt; st["shown"] += show; st["below"] += r.below_floor
            if under is not None:
                st["skipped"] += 1; st["ms_skipped"] += dt; st["skipped_would_show"] += show
                if show:
                    print("MISS", seed, k, repr(doc.text[doc.cursor-30:doc.cursor]), repr(r.fills[0].text), r.fills[0].score, under, flush=True)
        if under is None:  # the server ran this fill: its quiet state follows it
            quiet = (doc.text, doc.cursor, r.partial[0], floor) if r.below_floor and r.partial else None
    print(json.dumps(st), flush=True)
    out.append(st)
tot = {k: sum(s[k] for s in out) for k in out[0] if k != "seed"}
print("TOTAL", json.dumps(tot))
