"""Attention over grouped key/value heads on this CPU: torch's sdpa reading the grouped heads
itself (``enable_gqa``), sdpa over heads repeated for their queries (transformers' path with a
mask), and two matrix products over queries grouped under their key head
(infill/model/hf/attention.py's ``grouped_attention``). SmolLM2-135M's heads (9 queries over 3
keys and values, 64 wide), bf16, an additive mask, one row; per call, for query and key counts
from a decoding step (1 query) to a context (as many queries as keys).

    .venv/bin/python bench/attention_kernel.py
"""

from __future__ import annotations

import time

import torch
from torch.nn.functional import scaled_dot_product_attention as sdpa

from infill.model.hf.attention import grouped_attention

HEADS, KV_HEADS, WIDTH = 9, 3, 64
CASES = [(1, 300), (1, 950), (1, 2000), (4, 950), (16, 950), (64, 1100), (950, 950)]


def timed(f, repeats: int) -> float:
    for _ in range(3):
        f()
    t0 = time.perf_counter()
    for _ in range(repeats):
        f()
    return (time.perf_counter() - t0) / repeats * 1e6


def main() -> None:
    torch.set_num_threads(2)
    g = HEADS // KV_HEADS
    print(f"{torch.get_num_threads()} threads, {torch.backends.cpu.get_cpu_capability()}")
    print(f"{'queries':>7} {'keys':>5} {'sdpa gqa':>10} {'repeated':>10} {'grouped':>10}  (us per call; gqa = repeated: bits)")
    for q_len, k_len in CASES:
        q = torch.randn(1, HEADS, q_len, WIDTH, dtype=torch.bfloat16)
        k, v = (torch.randn(1, KV_HEADS, k_len, WIDTH, dtype=torch.bfloat16) for _ in range(2))
        mask = torch.zeros(1, 1, q_len, k_len, dtype=torch.bfloat16)
        mask[..., : k_len // 10] = float("-inf")
        gqa = lambda: sdpa(q, k, v, attn_mask=mask, scale=WIDTH ** -0.5, enable_gqa=True)  # noqa: E731
        rep = lambda: sdpa(q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1), attn_mask=mask, scale=WIDTH ** -0.5)  # noqa: E731
        grp = lambda: grouped_attention(q, k, v, mask, WIDTH ** -0.5)  # noqa: E731
        same = torch.equal(gqa(), rep())
        n = 10 if q_len > 100 else 200
        print(f"{q_len:>7} {k_len:>5} {timed(gqa, n):>10.1f} {timed(rep, n):>10.1f} {timed(grp, n):>10.1f}  {same}")


if __name__ == "__main__":
    main()
