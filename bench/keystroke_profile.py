"""Where a keystroke fill's time goes: the language server's cursor fills (bench lsp's typing:
keystrokes re-typing a line of a real file at random spots, the line's rest removed; one
candidate, a 32-token window, the model's score floor) in one process under cProfile, the first
keystroke at each spot (a new context to encode) run but not profiled. Prints the fills' median
and mean, then the calls that took the most time of their own, and the few that name the parts
a fill is made of (the model's calls, the constraint's parses, tokenizing).

    .venv/bin/python bench/keystroke_profile.py --file /usr/lib/python3.11/argparse.py --seed 503
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time

from decode_path_ab import typing

from infill.engine.fill import Engine, EngineConfig
from infill.model.declared import declared_min_score

PARTS = "fused.py.*__call__|_encode_rows|_feed|raw_logits|languages.py.*parse|encode_batch|for_chunk|advance|prepare"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--file", default="/usr/lib/python3.11/argparse.py")
    parser.add_argument("--seed", type=int, default=503)
    parser.add_argument("--spots", type=int, default=8)
    parser.add_argument("--keys", type=int, default=6)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    engine = Engine.load(EngineConfig(threads=2))
    floor = declared_min_score(engine.config.model_dir)
    profile, times = cProfile.Profile(), []
    for _spot, k, request in typing(open(args.file).read(), args.spots, args.keys, args.seed, floor):
        if k > 0:
            profile.enable()
        t0 = time.perf_counter()
        engine.fill(request)
        if k > 0:
            profile.disable()
            times.append((time.perf_counter() - t0) * 1000)
    print(f"{len(times)} keystroke fills of {args.file}, seed {args.seed}: median {statistics.median(times):.0f} ms, "
          f"mean {statistics.mean(times):.0f} ms")
    stats = pstats.Stats(profile)
    stats.sort_stats("tottime").print_stats(args.top)
    stats.sort_stats("cumulative").print_stats(PARTS)


if __name__ == "__main__":
    main()
