"""Rows of `infill bench lsp` runs: p50 and p95 over all keystrokes, the keystrokes that ran the model
(answered in MODEL_RAN_MS or more) and their median, and the keystrokes the server answered quiet
(its log's "quiet at" lines); then the runs pooled per prefix (lsp-s, lsp-quiet-s, lsp-base-s).
Usage: python bench/results/v2.40/lsp_table.py DIR...  (each an `infill bench lsp --out` directory)"""
import json
import statistics
import sys
from pathlib import Path

MODEL_RAN_MS = 10.0  # infill/bench/keystrokes.py's


def p95(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]


pools = {}
for d in map(Path, sys.argv[1:]):
    lat = [json.loads(line)["latency_ms"] for line in open(d / "results.jsonl")]
    ran = [x for x in lat if x >= MODEL_RAN_MS]
    quiet = sum("quiet at" in line for line in open(d / "server.log"))
    prefix, seed = d.name.rsplit("-s", 1)
    print(f"{d.name:22} p50 {statistics.median(lat):6.1f}  p95 {p95(lat):6.1f}  ran the model {len(ran):2}/{len(lat)}"
          f" (median {statistics.median(ran) if ran else float('nan'):6.1f})  quiet {quiet:2}")
    pool = pools.setdefault(prefix, ([], [], 0))
    pools[prefix] = (pool[0] + lat, pool[1] + ran, pool[2] + quiet)
for prefix, (lat, ran, quiet) in pools.items():
    print(f"{prefix}: {len(lat)} keystrokes, p50 {statistics.median(lat):.1f}, p95 {p95(lat):.1f}, ran the model {len(ran)}"
          f" (median {statistics.median(ran):.1f}), quiet {quiet}")
