"""Multi-token healing census: holes cut as `infill bench validity` cuts them (fresh seed), the
ones where the new rule takes back more than one token filled with both rules.
python heal_census.py SEED HOLES KINDS OUT.jsonl [languages...]"""
import json, sys, time
import torch
from infill.engine.fill import Engine
from infill.bench.validity import load_sources, cut_holes, source_dir, judge, edit_similarity, DEFAULT_SOURCES
from infill.protocol import SamplingOptions
torch.set_num_threads(2)
seed, n, kinds, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3].split(","), sys.argv[4]
langs = sys.argv[5:] or "python javascript typescript tsx go rust java c cpp".split()
eng = Engine.load()
new_heal = Engine.heal
def old_heal(self, segment, after=""):
    return min(new_heal(self, segment, after), 1)
tot = {}
with open(out, "w") as fh:
    for lang in langs:
        files, _ = load_sources(source_dir(DEFAULT_SOURCES, lang), lang, 200, seed)
        cuts = cut_holes(files, n, seed, kinds, lang)
        multi = []
        for i, c in enumerate(cuts):
            req = c.request(lang, 32, SamplingOptions())
            Engine.heal = old_heal
            before = eng.prepare(req).heals[0]
            Engine.heal = new_heal
            healed = eng.prepare(req).heals[0]
            if healed != before:
                multi.append((i, c, req, healed))
        rows = []
        for i, c, req, healed in multi:
            rec = {"language": lang, "hole": i, "kind": c.kind, "path": c.path, "line": c.line, "reference": c.reference, "healed": healed.decode("utf-8", "replace")}
            for name, fn in (("old", old_heal), ("new", new_heal)):
                Engine.heal = fn
                eng.forget()
                t0 = time.perf_counter()
                res = eng.fill_batch([req])[0]
                f = res.fills[0]
                rec[name] = {"fill": f.text, "score": round(f.score, 3), "engine_valid": f.valid, "ms": round((time.perf_counter() - t0) * 1000),
                             "exact": f.text.strip() == c.reference.strip(), "es": round(edit_similarity(f.text.strip(), c.reference.strip()), 4), **judge(lang, c, f.text)}
            Engine.heal = new_heal
            fh.write(json.dumps(rec) + "\n"); fh.flush()
            rows.append(rec)
            print(lang, i, repr(c.reference)[:40], '| old', repr(rec['old']['fill'])[:40], rec['old']['valid'], '| new', repr(rec['new']['fill'])[:40], rec['new']['valid'], flush=True)
        tot[lang] = (len(cuts), len(rows))
        print("##", lang, "holes", len(cuts), "multi-token heals", len(rows), flush=True)
print(tot)
