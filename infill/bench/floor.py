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


def hf_fill_work(config, context_tokens: int, window: int, rows: int, steps: int, mode: str,
                 dtype_bytes: int) -> tuple[float, float]:
    """FLOPs and least bytes of one fill by a transformers decoder (a Qwen2 / Llama config), every
    token attending to every other (a bidirectional model).

    ``exact`` runs the whole sequence (context and window) at every step; ``approximate`` runs the
    context once and then only the window, against the context's kept keys and values. Matmuls
    count 2 x params x tokens; the output head runs on window slots alone; attention counts QK^T and
    AV. Bytes: the weights once per model pass, and per window pass the kept keys and values.
    """
    d, L = config.hidden_size, config.num_hidden_layers
    heads = config.num_attention_heads
    kv = config.num_key_value_heads * (d // heads)
    body = L * (2 * d * d + 2 * d * kv + 3 * d * config.intermediate_size)  # q, o; k, v; gate, up, down
    head = config.vocab_size * d
    n = context_tokens + window

    def passes(tokens: int, keys: int) -> float:
        return 2 * body * tokens + 4 * L * tokens * keys * d

    if mode == "exact":
        flops = steps * rows * (passes(n, n) + 2 * head * window)
        byts = steps * (body + head) * dtype_bytes
    else:
        flops = rows * passes(context_tokens, context_tokens) + steps * rows * (passes(window, n) + 2 * head * window)
        byts = (steps + 1) * (body + head) * dtype_bytes + steps * rows * L * 2 * n * kv * dtype_bytes
    return flops, byts
