"""The attention function the transformers families run with: key/value heads read in place,
never repeated for their query heads.

transformers' sdpa path repeats each key/value head for its query heads (a copy of the whole
cache per layer) whenever a mask is given, which for the few queries of a decoding step costs
more than the attention itself. Here, on a CPU, torch's sdpa reads the grouped heads itself
(``enable_gqa``: the same kernel, equal to the repeated heads' result bit for bit, and 2-3x faster
for one query over a 1k-token cache: ``bench/attention_kernel.py``). On a GPU, where sdpa with a
mask and grouped heads falls back to its unfused kernel, a few queries are grouped under their
key/value head instead ([B, kvH, g * Q, D]) and attend by two matrix products, reading the cache
once (equal to sdpa's to float rounding); more go to transformers' sdpa. The mask is the additive
[B, 1, Q, K] one the models build; anything else goes to transformers' sdpa as it is. Registered
with transformers' ``AttentionInterface`` under :data:`NAME`; nothing else changes in the model
classes.
"""

from __future__ import annotations

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward

NAME = "infill_sdpa"
GROUPED_QUERIES = 16  # off a CPU, at most this many queries (more than one) attend grouped; otherwise sdpa


def grouped_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None,
                      scaling: float) -> torch.Tensor:
    """[B, Q, H, D]: queries [B, H, Q, D] over keys and values [B, kvH, K, D] (H a multiple of
    kvH, query head h reading key head h // (H / kvH)), with an additive mask [B, 1, Q, K]."""
    B, H, Q, D = query.shape
    kv_heads = key.shape[1]
    g = H // kv_heads
    scores = torch.matmul(query.reshape(B, kv_heads, g * Q, D), key.transpose(-1, -2)) * scaling
    if mask is not None:
        scores = (scores.view(B, kv_heads, g, Q, -1) + mask[:, :, None]).view(B, kv_heads, g * Q, -1)
    out = torch.matmul(torch.softmax(scores, dim=-1, dtype=torch.float32).to(value.dtype), value)
    return out.view(B, H, Q, D).transpose(1, 2)


def attention_forward(module, query, key, value, attention_mask, dropout: float = 0.0, scaling: float | None = None,
                      **kwargs):
    additive = attention_mask is not None and attention_mask.dim() == 4 and attention_mask.dtype != torch.bool
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    if dropout == 0.0 and additive and query.device.type == "cpu":
        out = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask, scale=scale,
                                                               enable_gqa=True)
        return out.transpose(1, 2).contiguous(), None
    if (1 < query.shape[2] <= GROUPED_QUERIES and dropout == 0.0 and key.shape[1] < query.shape[1]
            and (attention_mask is None or additive)):
        return grouped_attention(query, key, value, attention_mask, scale), None
    return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)


AttentionInterface.register(NAME, attention_forward)
