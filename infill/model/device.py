"""Where a model runs and in what precision: the device and weight dtype of a device/precision setting."""

from __future__ import annotations

import torch

from infill.errors import InfillError


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise InfillError(f"--device {name}: CUDA is not available on this machine")
    if name != "cpu" and not name.startswith("cuda"):
        raise InfillError(f"unknown device {name!r} (use auto, cpu or cuda)")
    return torch.device(name)


def fast_bf16(device: torch.device) -> bool:
    """Whether bf16 matrix products are native here: any CUDA GPU, or a CPU with AMX or AVX512-BF16.

    Elsewhere (most laptops: AVX2 only) bf16 is emulated and slower than fp32.
    """
    if device.type == "cuda":
        return True
    probes = [getattr(torch.cpu, name, None) for name in ("_is_amx_tile_supported", "_is_avx512_bf16_supported")]
    return any(p is not None and p() for p in probes)


def resolve_dtype(precision: str, device: torch.device) -> torch.dtype:
    """The weights' dtype for ``precision`` (auto | fp32 | bf16) on ``device``."""
    if precision == "fp32":
        return torch.float32
    if precision == "bf16":
        return torch.bfloat16
    if precision != "auto":
        raise InfillError(f"unknown precision {precision!r} (use auto, fp32 or bf16)")
    return torch.bfloat16 if fast_bf16(device) else torch.float32
