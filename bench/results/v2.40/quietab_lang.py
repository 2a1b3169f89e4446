"""`python bench/results/v2.40/quietab_lang.py SEED LANGUAGE...`: quietab.py over real files of each language of bench/sources (one file per language, seeded), and other stdlib modules."""
import sys, time, json, random, torch
from pathlib import Path
from infill.bench import keystrokes as K
from infill.engine.fill import Engine, EngineConfig
from infill.protocol import FillRequest, Hole, SamplingOptions
from infill.lsp import documents
from infill.lsp.server import quiet_through
torch.set_num_threads(2)
eng = Engine.load(EngineConfig())
tok = K.counting_tokenizer(Path("infill/model/default_model"))
floor = -1.690
opts = SamplingOptions(candidates=1, retry=False, min_score=floor)
seed = int(sys.argv[1])
SUFFIXES = dict(python=(".py",), javascript=(".js",), typescript=(".ts",), tsx=(".tsx",), go=(".go",), rust=(".rs",),
                java=(".java",), c=(".c", ".h"), cpp=(".cc", ".cpp", ".h", ".hpp", ".ipp"))
out = []
for lang in sys.argv[2:]:
    rng = random.Random(f"{seed}-{lang}")
    files = sorted(p for p in Path("bench/sources", lang).rglob("*") if p.is_file() and p.suffix in SUFFIXES[lang])
    doc = None
    while doc is None:
        f = rng.choice(files)
        text = f.read_text(encoding="utf-8", errors="replace")
        if 2000 < len(text) < 200_000:
            doc = K.build_document(f"file:///q/{f.name}", f.name, text, tok, keystrokes=63, context_tokens=0, rng=rng)
    quiet = None
    st = dict(lang=lang, file=str(f.relative_to("bench/sources")), keystrokes=0, skipped=0, skipped_would_show=0, shown=0, below=0, ms_all=0.0, ms_skipped=0.0)
    for k in range(len(doc.keys)):
        doc.type_next()
        under = quiet_through(quiet, doc.text, doc.cursor, floor)
        p = documents.prepare(doc.text, [Hole(doc.cursor, doc.cursor, 32)])
        t = time.perf_counter()
        r = eng.fill_batch([FillRequest(text=p.text, holes=p.holes, language=lang, options=opts, path=f"{lang}-{f.name}")])[0]
        dt = (time.perf_counter() - t) * 1000
        show = r.fills[0].valid is not False and not r.below_floor and r.fills[0].score >= floor and bool(r.fills[0].text.strip())
        if k >= 3:
            st["keystrokes"] += 1; st["ms_all"] += dt; st["shown"] += show; st["below"] += r.below_floor
            if under is not None:
                st["skipped"] += 1; st["ms_skipped"] += dt; st["skipped_would_show"] += show
                if show:
                    print("MISS", lang, k, repr(doc.text[doc.cursor-30:doc.cursor]), repr(r.fills[0].text), r.fills[0].score, under, flush=True)
        if under is None:
            quiet = (doc.text, doc.cursor, r.partial[0], floor) if r.below_floor and r.partial else None
    print(json.dumps(st), flush=True)
    out.append(st)
tot = {k: sum(s[k] for s in out) for k in out[0] if k not in ("lang", "file")}
print("TOTAL", json.dumps(tot))
