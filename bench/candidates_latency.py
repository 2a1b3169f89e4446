"""One request at a time (2 threads): the latency of HumanEval single-line fills with 1, 4 and 8 candidates.

Usage: python bench/candidates_latency.py SEED N OUT.json: the first N tasks shuffled by SEED, each
filled alone, its context encoded each time (no context cache), after one untimed fill that loads
the kernels."""
import gzip, json, random, statistics, sys, time
import torch
from infill.engine.fill import Engine, EngineConfig
from infill.protocol import FillRequest, Hole, SamplingOptions
torch.set_num_threads(2)
rows = [json.loads(l) for l in gzip.open('bench/data/human-eval-infilling/HumanEval-SingleLineInfilling.jsonl.gz')]
random.Random(int(sys.argv[1])).shuffle(rows)
rows = rows[: int(sys.argv[2])]
engine = Engine.load(EngineConfig(context_cache_tokens=0))  # every fill encodes its context, as a first fill of a document does
def req(r, c):
    text = r['prompt'] + r['suffix']
    n = len(r['prompt'])
    return FillRequest(text=text, holes=[Hole(n, n, 32)], language='python', options=SamplingOptions(candidates=c))
engine.fill(req(rows[0], 1))
out = {}
for c in (1, 4, 8):
    ts = []
    for r in rows:
        t = time.perf_counter(); engine.fill(req(r, c)); ts.append((time.perf_counter() - t) * 1000)
    out[c] = ts
    print(c, 'median %.0f ms mean %.0f ms' % (statistics.median(ts), statistics.mean(ts)), flush=True)
json.dump(out, open(sys.argv[3], 'w'))
