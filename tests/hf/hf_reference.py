"""An independent pure-torch forward pass of the published architectures, from the checkpoint's
own tensor names (Qwen2 names for the Dream family and Open-dCoder, LLaDA's OLMo-style names), for
checking the transformers-backed adapter. Written from the definitions (RMSNorm in fp32, rotary
embeddings rotating the two halves of each head, grouped-query attention, SwiGLU MLP, full
bidirectional attention), not from any family's modeling code.
"""

from __future__ import annotations

import math

import torch


def rms_norm(x, w, eps):
    xf = x.float()
    return w * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def rotate(x, pos, theta):
    """x [H, L, D] rotated to positions pos [L]: pairs (i, i + D/2) by angle pos * theta^(-2i/D)."""
    D = x.shape[-1]
    inv = theta ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    ang = pos.double()[:, None] * inv[None]  # [L, D/2]
    cos, sin = ang.cos().float(), ang.sin().float()
    a, b = x[..., : D // 2], x[..., D // 2 :]
    return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)


def forward(state: dict, facts: dict, ids: list[int], pos: list[int]) -> torch.Tensor:
    """Logits [L, V] of one sequence ``ids`` at positions ``pos``, every token seeing every token.

    facts: layout ("qwen2" | "llada"), layers, heads, kv_heads, eps, theta, tied."""
    s = {k: v.float() for k, v in state.items()}
    ids_t, pos_t = torch.tensor(ids), torch.tensor(pos)
    H, K, eps, theta = facts["heads"], facts["kv_heads"], facts["eps"], facts["theta"]
    if facts["layout"] == "qwen2":
        emb, final, head = "model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"
        names = lambda i: {  # noqa: E731
            "q": f"model.layers.{i}.self_attn.q_proj", "k": f"model.layers.{i}.self_attn.k_proj",
            "v": f"model.layers.{i}.self_attn.v_proj", "o": f"model.layers.{i}.self_attn.o_proj",
            "gate": f"model.layers.{i}.mlp.gate_proj", "up": f"model.layers.{i}.mlp.up_proj",
            "down": f"model.layers.{i}.mlp.down_proj", "n1": f"model.layers.{i}.input_layernorm",
            "n2": f"model.layers.{i}.post_attention_layernorm"}
    else:
        emb, final, head = "model.transformer.wte.weight", "model.transformer.ln_f.weight", "model.transformer.ff_out.weight"
        names = lambda i: {  # noqa: E731
            "q": f"model.transformer.blocks.{i}.q_proj", "k": f"model.transformer.blocks.{i}.k_proj",
            "v": f"model.transformer.blocks.{i}.v_proj", "o": f"model.transformer.blocks.{i}.attn_out",
            "gate": f"model.transformer.blocks.{i}.ff_proj", "up": f"model.transformer.blocks.{i}.up_proj",
            "down": f"model.transformer.blocks.{i}.ff_out", "n1": f"model.transformer.blocks.{i}.attn_norm",
            "n2": f"model.transformer.blocks.{i}.ff_norm"}

    def lin(x, name):
        y = x @ s[name + ".weight"].T
        return y + s[name + ".bias"] if name + ".bias" in s else y

    x = s[emb][ids_t]
    L, d = x.shape
    D = d // H
    for i in range(facts["layers"]):
        n = names(i)
        h = rms_norm(x, s[n["n1"] + ".weight"], eps)
        q = lin(h, n["q"]).view(L, H, D).transpose(0, 1)
        k = lin(h, n["k"]).view(L, K, D).transpose(0, 1)
        v = lin(h, n["v"]).view(L, K, D).transpose(0, 1)
        q, k = rotate(q, pos_t, theta), rotate(k, pos_t, theta)
        k, v = k.repeat_interleave(H // K, dim=0), v.repeat_interleave(H // K, dim=0)
        att = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(D), dim=-1) @ v  # no mask: bidirectional
        x = x + lin(att.transpose(0, 1).reshape(L, H * D), n["o"])
        h = rms_norm(x, s[n["n2"] + ".weight"], eps)
        g = lin(h, n["gate"])
        x = x + lin(g * torch.sigmoid(g) * lin(h, n["up"]), n["down"])
    x = rms_norm(x, s[final], eps)
    W = s[emb] if facts.get("tied") else s[head]
    return x @ W.T
