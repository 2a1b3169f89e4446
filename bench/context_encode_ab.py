"""A keystroke's context encoded into its fill's state (CausalLM._start_alone, 6434bf5) against the
way before it (the row encoded on its own, the cached run and the new states concatenated, then
copied into the fill's state: three copies of the context's keys and values), in one process.

Two engines over the default model, fed the same typing (decode_path_ab.typing: keystrokes
re-typing a line of a real file at random spots) with the language server's options at the cursor
(one candidate, no retry, the model's floor), in alternating order, compared fill by fill (text and
score) and timed. The first keystroke at a spot (a new context to encode) is not counted.

    .venv/bin/python bench/context_encode_ab.py --file /usr/lib/python3.11/argparse.py --seed 79
"""

from __future__ import annotations

import argparse
import statistics
import time

import msgspec
import torch

from decode_path_ab import typing
from infill.bench.serve import lsp_options
from infill.engine.fill import DEFAULT_MODEL_DIR, Engine, EngineConfig
from infill.model.hf import causal


def copied_start(self, ctx, pos, valid):
    """CausalLM._start as it was before 6434bf5: every row through _encode_rows, then copied in."""
    rows = self._context_rows(ctx, pos, valid)
    st = self._room(pos, max(1, max(len(x.tokens) for x in rows)))
    for r, row in enumerate(rows):
        self._put_context(st, r, row)
    st.before = causal._before(pos, valid, st.key_pos[:, : st.key_ok.shape[1]], st.key_ok)
    return st


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--file", default="/usr/lib/python3.11/argparse.py")
    parser.add_argument("--seed", type=int, default=79)
    parser.add_argument("--spots", type=int, default=8)
    parser.add_argument("--keys", type=int, default=10)
    args = parser.parse_args()
    now, before = Engine.load(EngineConfig(threads=2)), Engine.load(EngineConfig(threads=2))
    before.model._start = copied_start.__get__(before.model)
    options = lsp_options(DEFAULT_MODEL_DIR)
    pairs = []
    for spot, k, request in typing(open(args.file).read(), args.spots, args.keys, args.seed):
        request = msgspec.structs.replace(request, options=options)
        got = {}
        for engine in ((now, before) if (spot + k) % 2 else (before, now)):
            t0 = time.perf_counter()
            result = engine.fill(request)
            got[engine is before] = ((time.perf_counter() - t0) * 1000, (result.fills[0].text, result.fills[0].score))
        if k > 0:
            pairs.append((got[True], got[False]))
    old, new = [p[0][0] for p in pairs], [p[1][0] for p in pairs]
    print(f"{len(pairs)} fills (keystrokes 2..{args.keys} at {args.spots} spots of {args.file}, seed {args.seed}), "
          f"{torch.get_num_threads()} threads, {torch.backends.cpu.get_cpu_capability()}")
    print(f"before: median {statistics.median(old):.0f} ms, mean {statistics.mean(old):.0f} | now: median "
          f"{statistics.median(new):.0f} ms, mean {statistics.mean(new):.0f} | now/before: median of pairs "
          f"{statistics.median(b / a for a, b in zip(old, new)):.3f}, totals {sum(new) / sum(old):.3f}")
    print(f"same fills and scores: {sum(p[0][1] == p[1][1] for p in pairs)} of {len(pairs)}")


if __name__ == "__main__":
    main()
