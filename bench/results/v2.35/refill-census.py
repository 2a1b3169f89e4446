"""Fill the holes a census found (the default model, constrained, as `infill bench validity` asks) and judge them;
usage: python refill-census.py CENSUS.json OUT.json [all] (without `all`: only the holes judged in a nested region)."""
import sys, json, time
from infill.bench import validity as V
from infill.engine.fill import Engine, EngineConfig
from infill.protocol import SamplingOptions
hits = [h for h in json.load(open(sys.argv[1])) if h["nested"] or len(sys.argv) > 3]
eng = Engine.load(EngineConfig(threads=2))
out = []
for h in hits:
    files, _ = V.load_sources("bench/sources", "python", 200, h["seed"])
    cut = next(c for c in V.cut_holes(files, 24, h["seed"], ["line", "rest", "inside", "string", "block"], "python") if c.path == h["path"] and c.start == h["start"])
    req = cut.request("python", 32, SamplingOptions(constrained=True))
    t = time.perf_counter(); r = eng.fill_batch([req])[0]; ms = (time.perf_counter() - t) * 1000
    f = r.fills[0]
    j = V.judge("python", cut, f.text)
    out.append(dict(h, fill=f.text, score=f.score, engine_valid=f.valid, valid=j["valid"], ms=ms))
    print(h["seed"], h["path"].split("/")[-1], repr(h["ref"]), "->", repr(f.text[:60]), round(f.score, 3), f.valid, j["valid"], f"{ms:.0f} ms", flush=True)
json.dump(out, open(sys.argv[2], "w"))
