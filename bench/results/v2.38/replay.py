"""Replay failing (valid False) constrained validity records at the current code (a both-modes
run's unconstrained records are skipped)."""
import json, sys
from infill.bench.validity import judge, recorded_cuts
from infill.engine.fill import Engine
from infill.protocol import SamplingOptions
eng = Engine.load()
for d, r, cut in recorded_cuts(sys.argv[1:]):
    if r.get("valid") or r.get("mode", "constrained") != "constrained":
        continue
    lang = r["language"]
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
