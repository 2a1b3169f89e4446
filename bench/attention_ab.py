"""A keystroke's few-query attention on a CPU, two products over grouped heads against torch's
sdpa reading them (the routing before v2.28), in one process: two engines over the default model,
one as it loads, one whose attention sends every CPU call with an additive mask to sdpa. Both
are fed the language server's cursor requests (bench lsp's typing: keystrokes re-typing a line
of a real file at random spots, the line's rest removed; a 32-token window, the model's score
floor), in alternating order, and compared fill by fill, since a shared machine drifts by more
than the difference from one run to the next. The first keystroke at a spot (a new context to
encode) is run but not counted.

    .venv/bin/python bench/attention_ab.py --file /usr/lib/python3.11/argparse.py --seed 601
"""

from __future__ import annotations

import argparse

import torch
from decode_path_ab import paired, report, typing, typing_arguments
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from infill.engine.fill import Engine, EngineConfig
from infill.model.declared import declared_min_score
from infill.model.hf import attention

EARLIER = {"on": False}  # which routing the registered attention function takes


def earlier_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    """v2.27's routing on a CPU: every call with an additive mask to sdpa reading grouped heads."""
    if dropout == 0.0 and attention_mask is not None and attention_mask.dim() == 4 and attention_mask.dtype != torch.bool:
        scale = scaling if scaling is not None else query.shape[-1] ** -0.5
        out = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask, scale=scale,
                                                               enable_gqa=True)
        return out.transpose(1, 2).contiguous(), None
    return attention.attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)


def switched(*args, **kwargs):
    return (earlier_attention if EARLIER["on"] else attention.attention_forward)(*args, **kwargs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    typing_arguments(parser, seed=601)
    args = parser.parse_args()
    ALL_ATTENTION_FUNCTIONS[attention.NAME] = switched
    now, before = Engine.load(EngineConfig(threads=2)), Engine.load(EngineConfig(threads=2))
    floor = declared_min_score(now.config.model_dir)
    pairs = paired(now, before, typing(open(args.file).read(), args.spots, args.keys, args.seed, floor),
                   lambda on: EARLIER.__setitem__("on", on))
    report(pairs, f"keystrokes 2..{args.keys} at {args.spots} spots of {args.file}, seed {args.seed}")


if __name__ == "__main__":
    main()
