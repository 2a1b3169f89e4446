"""The CPU's stacked decoder layers (infill/model/hf/fused.py) against an older version of that
module, in one process: two engines over the default model, one running this tree's
``StackedLayers``, one an earlier ``fused.py`` read from a file (``git show REV:infill/model/hf/fused.py
> /tmp/fused_before.py``). It checks that a real context's final states are equal bit for bit,
then times one decoding step of 1 and of 4 rows over a 700-token context through each, in
alternating order (``--calls`` pairs each), and feeds both the same typing (as ``bench lsp`` types; the language server's options), in
alternating order, and compares fill by fill (text and score). The first keystroke at a spot is
not counted.

    git show 6526afc:infill/model/hf/fused.py > /tmp/fused_before.py
    cd bench && ../.venv/bin/python stacked_ab.py --before /tmp/fused_before.py --file /usr/lib/python3.11/inspect.py --seed 419
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import time

import torch
from decode_path_ab import typing

from infill.engine.fill import Engine, EngineConfig
from infill.model.declared import declared_min_score
from infill.model.hf.causal import _Appending
from infill.model.hf.model import additive_mask


def module_from(path: str):
    spec = importlib.util.spec_from_file_location("fused_before", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def step_times(now: Engine, before: Engine, text: str, M: int, calls: int, L: int = 700) -> tuple[float, float, float]:
    """(median ms before, median ms now, median of the pairs' ratios) of a decoding step of ``M`` rows
    after an ``L``-token context, each step's cache fresh."""
    model = now.model
    ids = torch.tensor([now.tokenizer.encode(text[: L * 12])[:L]])
    pos = torch.arange(1, ids.shape[1] + 1)[None]
    kv = model._encode_row(ids[0], pos[0]).kv
    L = ids.shape[1]
    q = torch.randint(4, 400, (1, M), generator=torch.Generator().manual_seed(M))
    q_pos = (L + 1 + torch.arange(M))[None]
    mask = additive_mask(torch.ones((1, L + M), dtype=torch.bool), M, torch.float32, L, torch.cat([pos, q_pos], 1), q_pos)
    times = {now: [], before: []}
    for i in range(calls):
        for engine in ((now, before) if i % 2 else (before, now)):
            t0 = time.perf_counter()
            engine.model.stacked(q, q_pos, mask, _Appending(list(kv)))
            times[engine].append((time.perf_counter() - t0) * 1000)
    old, new = times[before], times[now]
    return statistics.median(old), statistics.median(new), statistics.median(b / a for a, b in zip(old, new))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", required=True, help="an older infill/model/hf/fused.py")
    parser.add_argument("--file", default="/usr/lib/python3.11/argparse.py")
    parser.add_argument("--seed", type=int, default=417)
    parser.add_argument("--spots", type=int, default=12)
    parser.add_argument("--keys", type=int, default=6)
    parser.add_argument("--calls", type=int, default=120)
    args = parser.parse_args()
    now, before = Engine.load(EngineConfig(threads=2)), Engine.load(EngineConfig(threads=2))
    before.model.stacked = module_from(args.before).stack(before.model.backbone)
    text = open(args.file).read()
    with torch.inference_mode():
        ids = torch.tensor([now.tokenizer.encode(text[:4000])[:400]])
        pos = torch.arange(1, ids.shape[1] + 1)[None]
        mask = additive_mask(torch.ones_like(ids, dtype=torch.bool), ids.shape[1], torch.float32, 0, pos, pos)
        equal = torch.equal(now.model.stacked(ids, pos, mask), before.model.stacked(ids, pos, mask))
        steps = {M: step_times(now, before, text, M, args.calls) for M in (1, 4)}
    floor = declared_min_score(now.config.model_dir)
    pairs = []
    for n, (spot, k, request) in enumerate(typing(text, args.spots, args.keys, args.seed, floor)):
        got = {}
        for engine in ((now, before) if n % 2 else (before, now)):
            t0 = time.perf_counter()
            fill = engine.fill(request).fills[0]
            got[engine is now] = ((time.perf_counter() - t0) * 1000, fill.text, fill.score)
        if k > 0:
            pairs.append((got[False], got[True]))
    old, new = [p[0][0] for p in pairs], [p[1][0] for p in pairs]
    print(f"{len(pairs)} fills (keystrokes 2..{args.keys} at {args.spots} spots of {args.file}, seed {args.seed}), "
          f"{torch.get_num_threads()} threads; a 400-token context's states equal bit for bit: {equal}")
    for M, (a, b, r) in steps.items():
        print(f"a step of {M} row(s): before {a:.2f} ms, now {b:.2f} ms (medians of {args.calls}); median of pairs {r:.3f}")
    print(f"fills before: median {statistics.median(old):.0f} ms, mean {statistics.mean(old):.0f} | now: median "
          f"{statistics.median(new):.0f} ms, mean {statistics.mean(new):.0f} | now/before: median of pairs "
          f"{statistics.median(b / a for a, b in zip(old, new)):.3f}, totals {sum(new) / sum(old):.3f}")
    print(f"same fills and scores: {sum(p[0][1:] == p[1][1:] for p in pairs)} of {len(pairs)}")


if __name__ == "__main__":
    main()
