"""A Llama decoder stack with int8 weights run with its projections stacked: a layer's queries,
keys and values from one product, its gate and up from another.

On a CPU a decoding step runs a few rows through 30 layers of small products, and each product
costs a kernel call whatever its size; two products a layer instead of five cut a step's time by
about a ninth (the default model, one query over a 950-token cache, logits included: 20.6 -> 18.2 ms
on a 2-core Intel Xeon with AMX; a 40-token context piece 136 -> 96 ms).
Stacking rows of a weight-only int8 or 4-bit product (at most ``int8.KERNEL_ROWS`` rows: a
decoding step) changes no row's result, so a step's states equal transformers' own forward over the same
modules bit for bit; a context's many rows go through a dense product, whose blocking may round
differently (tests/hf/test_fused.py). The parts' weights become views into the stacked ones (no
second copy), and transformers' forward over them stays the reference.

Everything else is transformers' own or torch's fused form of it: the layers' norms (in fp32
torch's ``rms_norm``, one call where transformers' ``LlamaRMSNorm`` makes seven, equal to it bit for
bit), the rotary embedding and its application (once over the queries' and keys' heads side by
side, the same products elementwise), the attention function the config names, the caches'
``update`` protocol. A decoding step runs some 80 small ops a layer, so their count, not their
arithmetic, is most of what is left outside the products. Only the order of the calls is written
here, for the one layer shape it knows (``LlamaDecoderLayer``: pre-norm attention and a gated MLP
with its own activation, no biases, RMS norms); :func:`stack` returns None for any other stack,
which then runs as transformers runs it.
"""

from __future__ import annotations

import sys

import torch
from torch import nn
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRMSNorm

from infill.model.hf.int8 import Int8Linear

PACKED_ROWS = 64  # torch's CPU 4-bit layout packs the codes in blocks of this many rows: stacked rows
# keep their packing where each part starts a block (and each stack is checked: :func:`_same_rows`)


def _same_rows(stacked: Int8Linear, parts: list[Int8Linear]) -> bool:
    """Whether a decoding step's product through ``stacked`` equals its parts' side by side."""
    x = torch.randn(2, stacked.in_features, generator=torch.Generator().manual_seed(0)).to(stacked.scale.dtype)
    with torch.inference_mode():
        return torch.equal(stacked(x), torch.cat([p(x) for p in parts], -1))


def _stack_linear(parts: list[Int8Linear]) -> Int8Linear | None:
    """One Int8Linear over ``parts``' rows in order, each part's int8 weights and 4-bit codes then
    views into it; None where the parts do not share an input width and a grid, or where a part's
    4-bit codes would not start a block of the packed layout (PACKED_ROWS), or where a decoding
    step's product through it differs from the parts' (the parts are then left as they were)."""
    if len({p.in_features for p in parts}) != 1 or len({p.grid for p in parts}) != 1:
        return None
    if parts[0].grid is not None and any(p.out_features % PACKED_ROWS for p in parts[:-1]):
        return None
    out = Int8Linear.__new__(Int8Linear)
    nn.Module.__init__(out)
    out.in_features, out.out_features, out.grid = parts[0].in_features, sum(p.out_features for p in parts), parts[0].grid
    for name in ("weight", "scale", "scale_bf16") + (("codes",) if out.grid is not None else ()):
        out.register_buffer(name, torch.cat([getattr(p, name) for p in parts]), persistent=name in ("weight", "scale"))
    if out.grid is not None:  # [in / group, out, 2]: stacked along the rows
        out.register_buffer("grid_scales", torch.cat([p.grid_scales for p in parts], dim=1).contiguous(), persistent=False)
    if not _same_rows(out, parts):
        return None
    at = 0
    for p in parts:
        rows = slice(at, at + p.out_features)
        p.weight = out.weight[rows]
        if out.grid is not None:
            p.codes = out.codes[rows]
        at += p.out_features
    return out


class StackedLayers:
    """The backbone's layers run with stacked projections, called as the model calls the backbone
    (token ids, position ids, the 4D additive mask, a cache or None; out: the final norm's states).
    Not a module: the backbone stays the model's, and its weights are counted and moved once."""

    def __init__(self, backbone: nn.Module, qkv: list[Int8Linear], gate_up: list[Int8Linear]):
        self.backbone, self.qkv, self.gate_up = backbone, qkv, gate_up
        attn = backbone.layers[0].self_attn
        self.head_dim = attn.head_dim
        self.heads = attn.q_proj.out_features // self.head_dim  # query heads, then key heads, then value heads
        self.rotated = self.heads + attn.k_proj.out_features // self.head_dim  # the heads the rotary turns
        self.rotate_half = sys.modules[type(backbone.layers[0]).__module__].rotate_half
        self.attend = ALL_ATTENTION_FUNCTIONS[backbone.config._attn_implementation]

    @staticmethod
    def norm(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
        """``module`` (a LlamaRMSNorm) applied: in fp32 as one call (equal to it bit for bit), in
        another dtype as the module (which multiplies by its weight after rounding to that dtype)."""
        if x.dtype != torch.float32 or module.weight.dtype != torch.float32:
            return module(x)
        return nn.functional.rms_norm(x, module.weight.shape, module.weight, module.variance_epsilon)

    def __call__(self, tokens: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor, cache=None) -> torch.Tensor:
        bb = self.backbone
        x = bb.embed_tokens(tokens)
        cos, sin = bb.rotary_emb(x, positions)
        B, M = tokens.shape
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)  # over the heads (transformers' apply_rotary_pos_emb)
        for i, layer in enumerate(bb.layers):
            attn, mlp = layer.self_attn, layer.mlp
            heads = self.qkv[i](self.norm(layer.input_layernorm, x)).view(B, M, -1, self.head_dim).transpose(1, 2)
            qk = heads[:, : self.rotated]
            qk = qk * cos + self.rotate_half(qk) * sin
            q, k, v = qk[:, : self.heads], qk[:, self.heads :], heads[:, self.rotated :]
            if cache is not None:
                k, v = cache.update(k, v, i)
            o, _ = self.attend(attn, q, k, v, mask, dropout=0.0, scaling=attn.scaling)
            x = x + attn.o_proj(o.reshape(B, M, -1).contiguous())
            gate, up = self.gate_up[i](self.norm(layer.post_attention_layernorm, x)).split(mlp.gate_proj.out_features, -1)
            x = x + mlp.down_proj(mlp.act_fn(gate) * up)
        return self.norm(bb.norm, x)


def stack(backbone: nn.Module) -> StackedLayers | None:
    """The backbone's layers with stacked projections, where every layer is a Llama layer whose
    q, k, v and gate, up projections are Int8Linear; else None (nothing changed)."""
    layers = list(getattr(backbone, "layers", []))
    if not layers:
        return None
    projections = ("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj")
    norms = [backbone.norm] + [n for layer in layers for n in (layer.input_layernorm, layer.post_attention_layernorm)]
    ok = all(type(n) is LlamaRMSNorm for n in norms) and all(isinstance(layer, LlamaDecoderLayer)
             and all(isinstance(getattr(m, n), Int8Linear) for m, names in zip((layer.self_attn, layer.mlp), projections)
                     for n in names) for layer in layers)
    if not ok:
        return None
    qkv = [_stack_linear([getattr(layer.self_attn, n) for n in projections[0]]) for layer in layers]
    gate_up = [_stack_linear([getattr(layer.mlp, n) for n in projections[1]]) for layer in layers]
    if any(s is None for s in qkv + gate_up):
        return None
    return StackedLayers(backbone, qkv, gate_up)
