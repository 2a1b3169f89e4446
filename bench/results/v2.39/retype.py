"""Retype lines of argparse.py a character at a time, filling at the cursor after each one in
process as the language server does (the whole file, a cursor hole of 32 tokens, one candidate,
the model's calibrated floor, no retry), and print the medians of each fill's timings; with
``--out=FILE``, the fills as JSON (to compare two commits' fills).

Usage: python bench/results/v2.39/retype.py LINE[,LINE...] [--out=FILE]
"""

import json
import statistics
import sys
import sysconfig
import time
from pathlib import Path

from infill.engine.fill import Engine, EngineConfig
from infill.protocol import FillRequest, Hole, SamplingOptions

engine = Engine.load(EngineConfig(threads=2))
floor = json.loads((Path(engine.config.model_dir) / "config.json").read_text()).get("min_score")
options = SamplingOptions(candidates=1, constrained=True, retry=False, min_score=floor)
lines = Path(sysconfig.get_paths()["stdlib"], "argparse.py").read_text().splitlines(keepends=True)
requests = []
for n in map(int, sys.argv[1].split(",")):
    pre, line, post = "".join(lines[:n]), lines[n], "".join(lines[n + 1 :])
    for k in range(len(line) - len(line.lstrip()), len(line.rstrip("\n")) + 1):
        requests.append(FillRequest(text=pre + line[:k] + "\n" + post, holes=[Hole(len(pre) + k, len(pre) + k, 32)],
                                    language="python", options=options, path="argparse.py"))
engine.fill(requests[0])  # warm
rows, fills = [], []
for request in requests:
    t0 = time.perf_counter()
    result = engine.fill(request)
    t = result.timings
    rows.append(((time.perf_counter() - t0) * 1000, t.denoise_ms, t.constrain_ms, t.steps))
    fills.append([f.text for f in result.fills])
print(f"{len(rows)} fills; medians: total {statistics.median(r[0] for r in rows):.1f} ms, denoise "
      f"{statistics.median(r[1] for r in rows):.1f} ms, constrain {statistics.median(r[2] for r in rows):.1f} ms, "
      f"steps {statistics.median(r[3] for r in rows):.0f}")
for arg in sys.argv[2:]:
    if arg.startswith("--out="):
        Path(arg[len("--out="):]).write_text(json.dumps(fills))
