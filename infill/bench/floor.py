"""The physical floor of a fill on a GPU: its FLOPs over the measured matmul rate, its bytes over the
measured copy bandwidth. Counts come from the model config alone (no profiler), so they are the
work the architecture needs, not what the kernels happen to do.
"""

from __future__ import annotations

import time


def fill_flops(cfg, context_tokens: int, window: int, rows: int, steps: float) -> float:
    """FLOPs of one fill: the context pass once, then ``steps`` window passes over ``rows`` rows.

    Matmuls count 2 x params x tokens (the tied output embedding only for window slots, the
    context pass produces no logits); attention counts QK^T and AV, causal within the context.
    """
    d, L = cfg.d_model, cfg.n_layers
    body = L * (4 * d * d + 3 * d * cfg.d_ff)
    context = 2 * body * context_tokens + 2 * L * context_tokens ** 2 * d
    step = rows * (2 * (body + cfg.vocab_size * d) * window + 4 * L * window * (context_tokens + window) * d)
    return context + steps * step


def fill_bytes(cfg, context_tokens: int, window: int, rows: int, steps: float, dtype_bytes: int) -> float:
    """Bytes that must cross the memory bus at least: the weights per pass, the cached K/V per step."""
    weights = cfg.n_params() * dtype_bytes
    kv = rows * cfg.n_layers * 2 * (context_tokens + window) * cfg.d_model * dtype_bytes
    return (steps + 1) * weights + steps * kv


def measure_gpu(device, n: int = 8192, iters: int = 20) -> dict:
    """The GPU's measured bf16 dense matmul rate (FLOP/s) and device-to-device copy bandwidth (B/s)."""
    import torch

    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    for _ in range(iters):
        a @ b
    torch.cuda.synchronize(device)
    rate = 2 * n ** 3 * iters / (time.perf_counter() - t0)
    del a, b
    x = torch.empty(1 << 29, device=device, dtype=torch.uint8)  # 512 MiB
    y = torch.empty_like(x)
    y.copy_(x)
    torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    for _ in range(iters):
        y.copy_(x)
    torch.cuda.synchronize(device)
    bandwidth = 2 * x.numel() * iters / (time.perf_counter() - t0)  # read + write
    del x, y
    return {"name": torch.cuda.get_device_name(device), "bf16_matmul_flops": rate, "copy_bytes_per_s": bandwidth,
            "matmul_n": n}
