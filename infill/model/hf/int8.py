"""Int8 weights: per-row symmetric quantization of linear layers, stored and run as int8.

A checkpoint may store a weight ``X.weight`` as int8 [out, in] with ``X.weight_scale`` [out]
beside it (``weight = int8 * scale`` row by row). On the CPU a linear layer keeps its int8
weights. A few rows at a time (a decoding step) it multiplies them directly
(``torch.ops.aten._weight_int8pack_mm``, weight-only, activations in bf16: the kernel is
vectorized for bf16 on every x86 CPU with AVX2, while its fp32 path is about 10x slower than a
dense fp32 product there), which reads a quarter of fp32's bytes; many rows at a time (a context)
it multiplies the weights converted on the fly in the model's dtype (a dense product, whose cost
then dwarfs the conversion). Elsewhere, and for embeddings, the weights are dequantized to the
model's dtype at load.

Pure functions and one module; nothing here reads files.
"""

from __future__ import annotations

import torch
from torch import nn

SCALE_SUFFIX = "_scale"
KERNEL_ROWS = 16  # at most this many rows go through the int8 kernel (2-core AVX2 CPU: the crossover)


def quantize(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(int8 [out, in], scale [out] float32): each row scaled so its largest magnitude is 127."""
    w = weight.float()
    scale = w.abs().amax(dim=1).clamp_min(1e-12) / 127.0
    return torch.round(w / scale[:, None]).clamp_(-127, 127).to(torch.int8), scale


def dequantize(q: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return (q.float() * scale.float()[:, None]).to(dtype)


def split_scales(state: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """A checkpoint's tensors without the scales, and the scales by their weight's name."""
    scales = {k[: -len(SCALE_SUFFIX)]: v for k, v in state.items() if k.endswith(SCALE_SUFFIX)}
    return {k: v for k, v in state.items() if not k.endswith(SCALE_SUFFIX)}, scales


class Int8Linear(nn.Module):
    """A bias-free linear layer with int8 weights and per-row scales, run weight-only on the CPU."""

    def __init__(self, q: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype):
        super().__init__()
        self.in_features, self.out_features = q.shape[1], q.shape[0]
        self.register_buffer("weight", q.clone())  # fresh memory: the kernel needs it aligned (a file's may not be)
        self.register_buffer("scale", scale.to(dtype))
        self.register_buffer("scale_bf16", scale.to(torch.bfloat16), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        if flat.shape[0] > KERNEL_ROWS:
            out = nn.functional.linear(flat, self.weight.to(x.dtype)) * self.scale.to(x.dtype)
        else:
            out = torch.ops.aten._weight_int8pack_mm(flat.to(torch.bfloat16).contiguous(), self.weight, self.scale_bf16).to(x.dtype)
        return out.reshape(*shape[:-1], self.out_features)


def int8_runs_on(device: torch.device, dtype: torch.dtype) -> bool:
    """Whether int8 weights are kept as int8 (and multiplied so) on ``device`` in ``dtype``."""
    return device.type == "cpu" and dtype in (torch.float32, torch.bfloat16)


def install(model: nn.Module, name: str, q: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype) -> None:
    """Replace the nn.Linear whose weight is ``name`` (``a.b.weight``) in ``model`` with an Int8Linear."""
    path = name[: -len(".weight")]
    parent_name, _, child = path.rpartition(".")
    parent = model.get_submodule(parent_name) if parent_name else model
    old = getattr(parent, child)
    if not isinstance(old, nn.Linear) or old.bias is not None:
        raise ValueError(f"{name}: int8 weights only for bias-free linear layers")
    setattr(parent, child, Int8Linear(q, scale, dtype))
