"""Keystrokes at random spots of a file, filled in-process as the language server's cursor path
asks (one candidate): per fill its latency, steps and rounds (2: the first round's fill was
invalid and a retry ran), and its text. The first keystroke at a spot (a new context to encode) is
not counted. A "before" runs the same from a git worktree of the earlier code:

    .venv/bin/python bench/keystroke_rounds.py 59 /usr/lib/python3.11/typing.py
    ROOT=/tmp/before .venv/bin/python bench/keystroke_rounds.py 59 /usr/lib/python3.11/typing.py

The typing is bench/decode_path_ab.py's: keystrokes re-typing a line of the file at random
spots, the line's rest removed, as ``infill bench lsp`` types.
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
import time

ROOT = os.environ.get("ROOT")  # a worktree of other code to measure, or this checkout's
if ROOT:
    sys.path[:0] = [ROOT, os.path.join(ROOT, "bench")]
else:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from decode_path_ab import typing  # noqa: E402
from infill.engine.fill import Engine, EngineConfig  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("seed", type=int)
    p.add_argument("file")
    p.add_argument("--spots", type=int, default=12)
    p.add_argument("--keys", type=int, default=4)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    engine = Engine.load(EngineConfig(device="cpu"))
    text = open(args.file, encoding="utf-8").read()
    rows = []
    for spot, k, request in typing(text, args.spots, args.keys, args.seed):
        t0 = time.perf_counter()
        result = engine.fill(request)
        ms = (time.perf_counter() - t0) * 1000
        if k == 0:
            continue
        t, fill = result.timings, result.fills[0]
        rows.append((ms, t.rounds))
        print(spot, k, round(ms), "steps", t.steps, "rounds", t.rounds, "tok", t.tokens_filled, "valid", fill.valid, repr(fill.text[:50]))
    print("median", statistics.median(ms for ms, _ in rows))
    by = collections.defaultdict(list)
    for ms, rounds in rows:
        by[rounds].append(ms)
    for rounds, v in sorted(by.items()):
        print("rounds", rounds, len(v), "median ms", round(statistics.median(v)), "sum", round(sum(v)))


if __name__ == "__main__":
    main()
