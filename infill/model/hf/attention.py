"""The attention function the transformers families run with: sdpa, except for a few queries
over grouped keys and values.

transformers' sdpa path repeats each key/value head for its query heads (a copy of the whole
cache per layer) whenever more than one query is run, which for the few queries of a
speculative step (one slot and its drafts) costs more than the attention itself. Here those
queries are grouped under their key/value head instead ([B, kvH, g * Q, D]) and attend by two
matrix products, reading the cache once. The result equals sdpa's to float rounding; the mask
is the additive [B, 1, Q, K] one the models build. Registered with transformers'
``AttentionInterface`` under :data:`NAME`; nothing else changes in the model classes.
"""

from __future__ import annotations

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward

NAME = "infill_sdpa"
GROUPED_QUERIES = 16  # at most this many queries (more than one) attend grouped; otherwise sdpa


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
    q_len = query.shape[2]
    if (1 < q_len <= GROUPED_QUERIES and dropout == 0.0 and key.shape[1] < query.shape[1]
            and (attention_mask is None or attention_mask.dim() == 4 and attention_mask.dtype != torch.bool)):
        scale = scaling if scaling is not None else query.shape[-1] ** -0.5
        return grouped_attention(query, key, value, attention_mask, scale), None
    return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)


AttentionInterface.register(NAME, attention_forward)
