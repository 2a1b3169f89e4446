"""A frozen window adapter's products in bf16 (before) against float32 (now), paired in one
engine: the same keystroke requests as bench/model_ab.py's (the language server's cursor requests,
the default model's score floor), each filled with the hooks of one and then the other, in
alternating order. The first keystroke at a spot (a new context to encode) is run but not counted.

    cd bench && PYTHONPATH=.. ../.venv/bin/python adapter_dtype_ab.py --seed 811
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch
from decode_path_ab import typing, typing_arguments

from infill.engine.fill import Engine, EngineConfig
from infill.model.declared import declared_min_score
from infill.model.hf import adapter as window_adapter

DEFAULT_MODEL = Path(__file__).resolve().parents[1] / "infill" / "model" / "default_model"


def bf16_hook(self: window_adapter.WindowAdapter, layer: int, names: tuple[str, ...]):
    """The hook as v2.28 shipped it: both products in the activations' dtype (bf16 on this CPU)."""
    ks = [self.index[(layer, n)] for n in names]
    a = torch.cat([self.A[k].detach() for k in ks]).contiguous()
    bt = torch.block_diag(*[self.B[k].detach() * self.config.scale for k in ks]).t().contiguous()

    def add(module, inputs, output):
        if not self.active:
            return None
        x = inputs[0].reshape(-1, inputs[0].shape[-1])
        return torch.addmm(output.reshape(-1, output.shape[-1]), x @ a.t(), bt).view(output.shape)
    return add


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL, help="a model directory with an adapter")
    typing_arguments(parser, seed=811)
    args = parser.parse_args()
    engine = Engine.load(EngineConfig(model_dir=args.model, threads=2))
    model = engine.model
    adapter, now_hook = model.adapter, window_adapter.WindowAdapter._hook
    assert adapter is not None, f"{args.model} has no window adapter"

    def use(before: bool) -> None:
        window_adapter.WindowAdapter._hook = bf16_hook if before else now_hook
        adapter.attach(list(model.backbone.layers), model.stacked)

    pairs = []
    for spot, k, request in typing(open(args.file).read(), args.spots, args.keys, args.seed, declared_min_score(args.model)):
        got = {}
        for before in ((True, False) if (spot + k) % 2 else (False, True)):
            use(before)
            t0 = time.perf_counter()
            result = engine.fill(request)
            got[before] = ((time.perf_counter() - t0) * 1000, result.fills[0].text)
        if k > 0:
            pairs.append((got[True], got[False]))
    use(False)
    before, now = [p[0][0] for p in pairs], [p[1][0] for p in pairs]
    print(f"{args.file} seed {args.seed}: {len(pairs)} keystroke fills; median bf16 {statistics.median(before):.1f} ms, "
          f"float32 {statistics.median(now):.1f} ms; paired median difference "
          f"{statistics.median([b - n for b, n in zip(before, now)]):.1f} ms; identical fills "
          f"{sum(p[0][1] == p[1][1] for p in pairs)}/{len(pairs)}")


if __name__ == "__main__":
    main()
