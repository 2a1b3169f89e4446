"""A causal model's speculative steps at several draft lengths, or its context budget split, in one
process: engines over the default model that differ only in ``EngineConfig.lookahead``, the
schedule's ``lookahead_slots`` and, where a variant names a third number, ``EngineConfig.prefix_share``,
fed the same typing (keystrokes re-typing a line of a real file at random spots, the line's rest
removed, as ``bench lsp`` types; the language server's options: one candidate, 32 tokens, the
model's score floor), in rotating order, and compared fill by fill against the first variant.
The first keystroke at a spot (a new context to encode) is not counted.

    .venv/bin/python bench/lookahead_ab.py --file /usr/lib/python3.11/inspect.py --seed 403 --variants 4:6,3:4
    .venv/bin/python bench/lookahead_ab.py --seed 451 --variants 3:4:0.75,3:4:1  # the prefix's share
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

import torch
from decode_path_ab import typing

from infill.engine.fill import Engine, EngineConfig
from infill.model.declared import declared_min_score


def engine_with(lookahead: int, slots: int, share: float | None = None) -> Engine:
    engine = Engine.load(EngineConfig(threads=2, lookahead=lookahead, prefix_share=share))
    schedule = engine.schedule
    engine.schedule = lambda *a, **k: dataclasses.replace(schedule(*a, **k), lookahead_slots=slots)
    return engine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--file", default="/usr/lib/python3.11/argparse.py")
    parser.add_argument("--seed", type=int, default=401)
    parser.add_argument("--spots", type=int, default=12)
    parser.add_argument("--keys", type=int, default=6)
    parser.add_argument("--variants", default="4:6,3:4", help="lookahead:slots[:prefix share],... (the first is the baseline)")
    args = parser.parse_args()
    variants = [tuple(int(x) if i < 2 else float(x) for i, x in enumerate(v.split(":"))) for v in args.variants.split(",")]
    engines = [engine_with(*v) for v in variants]
    floor = declared_min_score(engines[0].config.model_dir)
    times, fills = [[] for _ in engines], [[] for _ in engines]
    for n, (spot, k, request) in enumerate(typing(open(args.file).read(), args.spots, args.keys, args.seed, floor)):
        for i in [(n + j) % len(engines) for j in range(len(engines))]:
            t0 = time.perf_counter()
            result = engines[i].fill(request)
            if k > 0:
                times[i].append((time.perf_counter() - t0) * 1000)
                fills[i].append(result.fills[0].text)
    print(f"{len(times[0])} fills (keystrokes 2..{args.keys} at {args.spots} spots of {args.file}, seed {args.seed}), "
          f"{torch.get_num_threads()} threads, floor {floor}")
    for variant, t, f in zip(variants, times, fills):
        ratio = statistics.median(a / b for a, b in zip(t, times[0]))
        share = f", prefix share {variant[2]}" if len(variant) > 2 else ""
        print(f"lookahead {variant[0]}, slots {variant[1]}{share}: median {statistics.median(t):.0f} ms, mean {statistics.mean(t):.0f} | "
              f"against the first: median of pairs {ratio:.3f}, totals {sum(t) / sum(times[0]):.3f}, "
              f"same fills {sum(a == b for a, b in zip(f, fills[0]))} of {len(f)}")


if __name__ == "__main__":
    main()
