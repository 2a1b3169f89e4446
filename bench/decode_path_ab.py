"""The CPU decoding path against the one before it, in one process: two engines over the default
model, one as it loads (int8 layers with stacked projections, infill/model/hf/fused.py; attention
reading grouped key/value heads in place, infill/model/hf/attention.py), one with transformers'
layer forward and the earlier attention routing (few queries grouped by two matrix products, the
rest through transformers' sdpa with repeated heads). Both are fed the same typing (keystrokes
re-typing a line of a real file at random spots, the line's rest removed, as bench lsp types),
in alternating order, and compared fill by fill: a shared machine's speed drifts by more than the
difference between them from one run to the next, a pair of fills a second apart does not.
The first keystroke at a spot (a new context to encode) is not counted.

    .venv/bin/python bench/decode_path_ab.py --file /usr/lib/python3.11/inspect.py --seed 37
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from infill.engine.fill import Engine, EngineConfig
from infill.model.hf import attention
from infill.protocol import FillRequest, Hole, SamplingOptions

EARLIER = {"on": False}  # which routing the registered attention function takes


def earlier_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    """The routing before this change: 2-16 queries grouped, the rest to transformers' sdpa."""
    if (1 < query.shape[2] <= attention.GROUPED_QUERIES and dropout == 0.0 and key.shape[1] < query.shape[1]
            and (attention_mask is None or attention_mask.dim() == 4 and attention_mask.dtype != torch.bool)):
        scale = scaling if scaling is not None else query.shape[-1] ** -0.5
        return attention.grouped_attention(query, key, value, attention_mask, scale), None
    return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)


def switched(*args, **kwargs):
    return (earlier_attention if EARLIER["on"] else attention.attention_forward)(*args, **kwargs)


def typing(text: str, spots: int, keys: int, seed: int, min_score: float | None = None):
    """(spot, keystroke, request): ``keys`` keystrokes into a line at each of ``spots`` random lines.
    With ``min_score``, the requests the language server makes at a cursor (a 32-token window, that
    score floor); without, one candidate and the engine's defaults."""
    lines = text.splitlines(keepends=True)
    rng = random.Random(seed)
    for spot in range(spots):
        i = rng.randrange(50, len(lines) - 50)
        while len(lines[i].strip()) <= 20:
            i = rng.randrange(50, len(lines) - 50)
        indent = len(lines[i]) - len(lines[i].lstrip())
        start = sum(map(len, lines[:i])) + indent
        end = start + len(lines[i].rstrip("\n")) - indent
        for k in range(keys):
            cur = start + k
            options = SamplingOptions(candidates=1, min_score=min_score)
            hole = Hole(cur, cur) if min_score is None else Hole(cur, cur, 32)
            yield spot, k, FillRequest(text=text[:cur] + text[end:], holes=[hole], language="python", options=options)


def typing_arguments(parser: argparse.ArgumentParser, seed: int, spots: int = 10, keys: int = 6) -> None:
    """The options of :func:`typing`'s keystrokes (a file, a seed, how many spots and keystrokes)."""
    parser.add_argument("--file", default="/usr/lib/python3.11/argparse.py")
    parser.add_argument("--seed", type=int, default=seed)
    parser.add_argument("--spots", type=int, default=spots)
    parser.add_argument("--keys", type=int, default=keys)


def paired(now: Engine, before: Engine, requests, switch=lambda before_on: None) -> list[tuple[tuple, tuple]]:
    """Each (spot, keystroke, request) of ``requests`` filled by both engines, in alternating order
    (``switch(True)`` before ``before`` fills, ``switch(False)`` before ``now``): per keystroke after
    a spot's first, ((ms, fill text, score) before, the same now)."""
    pairs = []
    for spot, k, request in requests:
        got = {}
        for engine in ((now, before) if (spot + k) % 2 else (before, now)):
            switch(engine is before)
            t0 = time.perf_counter()
            result = engine.fill(request)
            got[engine is before] = ((time.perf_counter() - t0) * 1000, result.fills[0].text, result.fills[0].score)
        if k > 0:
            pairs.append((got[True], got[False]))
    return pairs


def report(pairs: list[tuple[tuple, tuple]], what: str) -> None:
    """The two sides' medians and means, the median of the pairs' ratios, and how many fills agree."""
    old, new = [p[0][0] for p in pairs], [p[1][0] for p in pairs]
    print(f"{len(pairs)} fills ({what}), {torch.get_num_threads()} threads, {torch.backends.cpu.get_cpu_capability()}")
    print(f"before: median {statistics.median(old):.0f} ms, mean {statistics.mean(old):.0f} | now: median "
          f"{statistics.median(new):.0f} ms, mean {statistics.mean(new):.0f} | now/before: median of pairs "
          f"{statistics.median(b / a for a, b in zip(old, new)):.3f}, totals {sum(new) / sum(old):.3f}")
    print(f"same fills: {sum(p[0][1] == p[1][1] for p in pairs)} of {len(pairs)}; largest score difference "
          f"{max(abs(p[0][2] - p[1][2]) for p in pairs):.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    typing_arguments(parser, seed=31, spots=20, keys=4)
    args = parser.parse_args()
    ALL_ATTENTION_FUNCTIONS[attention.NAME] = switched
    now, before = Engine.load(EngineConfig(threads=2)), Engine.load(EngineConfig(threads=2))
    before.model.stacked = None  # transformers' own layer forward
    pairs = paired(now, before, typing(open(args.file).read(), args.spots, args.keys, args.seed),
                   lambda on: EARLIER.__setitem__("on", on))
    report(pairs, f"keystrokes 2..{args.keys} at {args.spots} spots of {args.file}, seed {args.seed}")


if __name__ == "__main__":
    main()
