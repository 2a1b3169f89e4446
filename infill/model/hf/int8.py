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

A checkpoint may also say that its int8 rows were rounded from a 4-bit grid, one step and offset
per group of weights along a row (``quantization.grid`` in config.json: a network imported from
llama.cpp's Q4_1 blocks). Such a layer fits that grid back (:func:`fit_grid`) and multiplies a few
rows at a time with the 4-bit codes (``torch.ops.aten._weight_int4pack_mm_for_cpu``), which reads
half the int8 kernel's bytes; the dense product for many rows keeps the int8 weights. The fitted
grid is refused where it strays from the int8 weights by more than ``GRID_ERROR`` steps (the
checkpoint's claim is false), and unused where the kernel cannot take the layer's shape or the
CPU does not run it vectorized (:func:`grid_kernel_fast`; the loader asks).

Pure functions and one module; nothing here reads files.
"""

from __future__ import annotations

import torch
from torch import nn

SCALE_SUFFIX = "_scale"
KERNEL_ROWS = 16  # at most this many rows go through the int8 kernel (2-core AVX2 CPU: the crossover)
GRID_BITS = 4
GRID_GROUPS = (32, 64, 128, 256)  # group sizes the 4-bit kernel takes
GRID_ERROR = 2.0  # int8 steps: the most a fitted grid may stray from the weights it claims to hold
# (measured on the default model: at most 1.2, rounding; a general int8 matrix strays by several)


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


class OffGrid(ValueError):
    """A layer's int8 weights are not on the 4-bit grid its checkpoint claims."""


def fit_grid(q: torch.Tensor, group: int, rows: int = 256) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float]:
    """The 4-bit grid that int8 rows ``q`` [out, in] were rounded from, one per ``group`` weights
    along a row, where each group's extremes are its codes 0 and 15 (llama.cpp's Q4_1): (codes
    [out, in] int32 in 0..15, step and zero [out, in / group] in int8 steps, the largest distance
    from a weight to its grid value). A weight is ``(code - 8) * step + zero``. The codes come from
    each group's extremes, the step and offset from a least-squares fit (which averages out the
    int8 rounding). Done ``rows`` rows at a time: its float temporaries stay small."""
    n, k = q.shape
    codes = torch.empty((n, k), dtype=torch.int32)
    step, zero = torch.empty((n, k // group)), torch.empty((n, k // group))
    levels, half, worst = 2**GRID_BITS - 1, 2 ** (GRID_BITS - 1), 0.0
    for a in range(0, n, rows):
        g = q[a : a + rows].float().view(-1, k // group, group)
        lo, hi = g.amin(-1, keepdim=True), g.amax(-1, keepdim=True)
        c = torch.round((g - lo) / ((hi - lo) / levels).clamp_min(1e-6)).clamp_(0, levels)
        cm, gm = c.mean(-1, keepdim=True), g.mean(-1, keepdim=True)
        var = ((c - cm) ** 2).sum(-1, keepdim=True)
        s = torch.where(var > 0, ((c - cm) * (g - gm)).sum(-1, keepdim=True) / var.clamp_min(1e-9), 0.0)
        base = gm - s * cm  # the value of code 0
        worst = max(worst, float((c * s + base - g).abs().max()))
        codes[a : a + rows] = c.view(-1, k).to(torch.int32)
        step[a : a + rows], zero[a : a + rows] = s[..., 0], (base + half * s)[..., 0]
    return codes, step, zero, worst


def grid_kernel_fast() -> bool:
    """Does this CPU run the 4-bit kernel vectorized? Measured on x86 (bench/int4_kernel.py: a
    30-layer model's products of 3 rows): with AVX512 6.2 ms against the int8 kernel's 12.9, with
    AVX2 8.8 against 12.5, without either 295 against 107. Elsewhere (other capabilities, other
    architectures) it is not known, and the int8 kernel is kept."""
    return torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512")


def grid_fits_kernel(out_features: int, in_features: int, group: int) -> bool:
    """Whether the CPU's 4-bit kernel takes a layer of this shape."""
    return group in GRID_GROUPS and in_features % group == 0 and out_features % 16 == 0


class Int8Linear(nn.Module):
    """A bias-free linear layer with int8 weights and per-row scales, run weight-only on the CPU
    (with ``grid``, a few rows at a time through the 4-bit grid the weights lie on)."""

    def __init__(self, q: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype, grid: int | None = None):
        super().__init__()
        self.in_features, self.out_features = q.shape[1], q.shape[0]
        self.register_buffer("weight", q.clone())  # fresh memory: the kernel needs it aligned (a file's may not be)
        self.register_buffer("scale", scale.to(dtype))
        self.register_buffer("scale_bf16", scale.to(torch.bfloat16), persistent=False)
        self.grid = grid if grid is not None and grid_fits_kernel(*q.shape, grid) else None
        if self.grid is not None:
            codes, step, zero, worst = fit_grid(q, grid)
            if worst > GRID_ERROR:
                raise OffGrid(f"its int8 weights are not on a {GRID_BITS}-bit grid in groups of {grid} "
                                 f"(a fitted grid is off by {worst:.1f} int8 steps)")
            s = scale.float()[:, None]
            self.register_buffer("codes", torch.ops.aten._convert_weight_to_int4pack_for_cpu(codes, 1), persistent=False)
            self.register_buffer("grid_scales", torch.stack([(step * s).t(), (zero * s).t()], -1).to(torch.bfloat16).contiguous(),
                                 persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        if flat.shape[0] > KERNEL_ROWS:
            out = nn.functional.linear(flat, self.weight.to(x.dtype)) * self.scale.to(x.dtype)
        elif self.grid is not None:
            out = torch.ops.aten._weight_int4pack_mm_for_cpu(flat.to(torch.bfloat16).contiguous(), self.codes, self.grid,
                                                             self.grid_scales).to(x.dtype)
        else:
            out = torch.ops.aten._weight_int8pack_mm(flat.to(torch.bfloat16).contiguous(), self.weight, self.scale_bf16).to(x.dtype)
        return out.reshape(*shape[:-1], self.out_features)


def int8_runs_on(device: torch.device, dtype: torch.dtype) -> bool:
    """Whether int8 weights are kept as int8 (and multiplied so) on ``device`` in ``dtype``."""
    return device.type == "cpu" and dtype in (torch.float32, torch.bfloat16)


def install(model: nn.Module, name: str, q: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype,
            grid: int | None = None) -> None:
    """Replace the nn.Linear whose weight is ``name`` (``a.b.weight``) in ``model`` with an Int8Linear
    (``grid``: the group size of the 4-bit grid its weights lie on; ValueError where they do not)."""
    path = name[: -len(".weight")]
    parent_name, _, child = path.rpartition(".")
    parent = model.get_submodule(parent_name) if parent_name else model
    old = getattr(parent, child)
    if not isinstance(old, nn.Linear) or old.bias is not None:
        raise ValueError(f"{name}: int8 weights only for bias-free linear layers")
    setattr(parent, child, Int8Linear(q, scale, dtype, grid))
