"""The 4-bit against the int8 weight-only kernel on this CPU: the products of one forward of a
SmolLM2-135M-shaped network (30 layers of q, k, v, o, gate, up, down) on 3 rows, random weights.

Run it under each kernel set torch has for x86 to see where the 4-bit grid pays
(infill/model/hf/int8.py's ``grid_kernel_fast``):

    for cap in avx512 avx2 default; do ATEN_CPU_CAPABILITY=$cap .venv/bin/python bench/int4_kernel.py; done
"""

from __future__ import annotations

import time

import torch

SHAPES = [(576, 576), (192, 576), (192, 576), (576, 576), (1536, 576), (1536, 576), (576, 1536)] * 30
ROWS, GROUP, REPEATS = 3, 32, 30


def int8_forward():
    weights = [(torch.randint(-127, 127, (n, k), dtype=torch.int8), torch.rand(n, dtype=torch.bfloat16)) for n, k in SHAPES]
    xs = {k: torch.randn(ROWS, k, dtype=torch.bfloat16) for k in (576, 1536)}
    return lambda: [torch.ops.aten._weight_int8pack_mm(xs[w.shape[1]], w, s) for w, s in weights]


def int4_forward():
    weights = [(torch.ops.aten._convert_weight_to_int4pack_for_cpu(torch.randint(0, 16, (n, k), dtype=torch.int32), 1),
                torch.rand(k // GROUP, n, 2, dtype=torch.bfloat16), k) for n, k in SHAPES]
    xs = {k: torch.randn(ROWS, k, dtype=torch.bfloat16) for k in (576, 1536)}
    return lambda: [torch.ops.aten._weight_int4pack_mm_for_cpu(xs[k], w, GROUP, sz) for w, sz, k in weights]


def timed(forward) -> float:
    for _ in range(5):
        forward()
    t0 = time.perf_counter()
    for _ in range(REPEATS):
        forward()
    return (time.perf_counter() - t0) / REPEATS * 1000


if __name__ == "__main__":
    torch.set_num_threads(2)
    print(f"{torch.backends.cpu.get_cpu_capability()}: int8 {timed(int8_forward()):.1f} ms, 4-bit {timed(int4_forward()):.1f} ms "
          f"per forward's products ({ROWS} rows, 2 threads)")
