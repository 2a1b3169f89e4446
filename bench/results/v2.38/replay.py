"""Replay failing (valid False) constrained validity records at the current code."""
import glob, json, sys
from pathlib import Path
from infill.bench.validity import Cut, judge, source_dir, language_name
from infill.engine.fill import Engine
from infill.protocol import SamplingOptions
dirs = sys.argv[1:]
eng = Engine.load()
for d in dirs:
    for f in sorted(glob.glob(d + "/*/results.jsonl")):
        for line in open(f):
            r = json.loads(line)
            if r.get("mode") != "constrained" or r.get("valid"):
                continue
            lang = r["language"]
            root = source_dir("bench/sources", lang)
            original = (root / r["path"]).read_text()
            cut = Cut(r["path"], original, r["start"], r["end"], r["kind"], r["line"])
            assert cut.reference == r["reference"], (r["path"], r["reference"])
            req = cut.request(lang, 32, SamplingOptions(constrained=True))
            eng.forget(); eng.fill_batch([req]); eng.forget(contexts=False)
            res = eng.fill_batch([req])[0]
            fill = res.fills[0].text
            j = judge(lang, cut, fill)
            print(json.dumps({"seed": d.split("/")[-1], "lang": lang, "kind": r["kind"], "path": r["path"][-40:],
                              "ref": r["reference"][:60], "old_fill": r["fill"][:60], "old_ev": r.get("engine_valid"),
                              "fill": fill[:60], "valid": j["valid"], "engine_valid": res.fills[0].valid,
                              "score": round(res.fills[0].score, 3)}), flush=True)
