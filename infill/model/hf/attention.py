"""The attention function the transformers families run with: key/value heads read in place,
never repeated for their query heads.

transformers' sdpa path repeats each key/value head for its query heads (a copy of the whole
cache per layer) whenever a mask is given, which for the few queries of a decoding step costs
more than the attention itself. Here a few queries (at most :data:`GROUPED_QUERIES`: a decoding
step, a keystroke's typed tokens) are grouped under their key/value head ([B, kvH, g * Q, D]) and
attend by two matrix products, reading the cache once; on a GPU, where sdpa with a mask and
grouped heads falls back to its unfused kernel, only from two queries on (one goes to
transformers' sdpa). On a CPU more queries (a context) go to torch's sdpa reading the grouped
heads itself (``enable_gqa``: the same kernel, equal to the repeated heads' result bit for bit),
whose few-query path costs 1.2-5x the two products on the CPUs measured
(``bench/attention_kernel.py``, BENCHMARKS.md v2.28); off a CPU to transformers' sdpa. The two
products equal sdpa's to float rounding. The mask is the additive [B, 1, Q, K] one the models
build; anything else goes to transformers' sdpa as it is. Registered with transformers'
``AttentionInterface`` under :data:`NAME`; nothing else changes in the model classes.
"""

from __future__ import annotations

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward

NAME = "infill_sdpa"
GROUPED_QUERIES = 16  # at most this many queries attend grouped (off a CPU: more than one); otherwise sdpa


def grouped_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None,
                      scaling: float) -> torch.Tensor:
    """[B, Q, H, D]: queries [B, H, Q, D] over keys and values [B, kvH, K, D] (H a multiple of
    kvH, query head h reading key head h // (H / kvH)), with an additive mask [B, 1, Q, K]."""
    B, H, Q, D = query.shape
    kv_heads = key.shape[1]
    g = H // kv_heads
    # the queries scaled, not the scores (fewer numbers; with a power of two, as 1/sqrt(64), the same bits)
    scores = torch.matmul((query * scaling).reshape(B, kv_heads, g * Q, D), key.transpose(-1, -2))
    if mask is not None:
        scores = (scores.view(B, kv_heads, g, Q, -1) + mask[:, :, None]).view(B, kv_heads, g * Q, -1)
    out = torch.matmul(torch.softmax(scores, dim=-1, dtype=torch.float32).to(value.dtype), value)
    return out.view(B, H, Q, D).transpose(1, 2)


def attention_forward(module, query, key, value, attention_mask, dropout: float = 0.0, scaling: float | None = None,
                      **kwargs):
    additive = attention_mask is not None and attention_mask.dim() == 4 and attention_mask.dtype != torch.bool
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    cpu = query.device.type == "cpu"
    if ((1 if cpu else 2) <= query.shape[2] <= GROUPED_QUERIES and dropout == 0.0 and key.shape[1] < query.shape[1]
            and (additive or attention_mask is None and not cpu)):
        return grouped_attention(query, key, value, attention_mask, scale), None
    if dropout == 0.0 and additive and cpu:
        out = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask, scale=scale,
                                                               enable_gqa=True)
        return out.transpose(1, 2).contiguous(), None
    return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)


AttentionInterface.register(NAME, attention_forward)
