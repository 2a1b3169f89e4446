"""Where a fill's time goes on a GPU (random weights, hf_speed's shapes): one whole-layout forward
pass of the transformers backbone, eager and replayed from a CUDA graph, against a full sampler step.

    python bench/gpu/forward_probe.py --shapes 0.5b 7b --context 1024 --window 32 --out probe.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from infill.bench import hf_speed as H


def timed(fn, repeats: int, sync) -> float:
    fn()
    sync()
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync()
        runs.append((time.perf_counter() - t0) * 1000)
    return round(statistics.median(runs), 3)


def probe(shape: str, context: int, window: int, batch: int, repeats: int, device: torch.device,
          profile: bool = False) -> dict:
    m = H.random_model(shape, device, torch.bfloat16 if device.type == "cuda" else torch.float32)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    n = 1 + context + window
    tokens = torch.randint(0, 150000, (batch, n), device=device)
    positions = torch.arange(n, device=device)[None].repeat(batch, 1)
    ok = torch.ones((batch, n), dtype=torch.bool, device=device)
    mask = m._mask(ok, tokens, positions, positions, 0)
    row = {"shape": shape, "batch": batch, "tokens": n}
    with torch.inference_mode():
        row["forward_eager_ms"] = timed(lambda: m._run(tokens, positions, mask), repeats, sync)
        h = m._run(tokens, positions, mask)[:, -window:]
        row["head_ms"] = timed(lambda: m.logits(h), repeats, sync)
        if device.type == "cuda":
            try:
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    for _ in range(2):
                        m._run(tokens, positions, mask)
                torch.cuda.current_stream().wait_stream(s)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    out = m._run(tokens, positions, mask)
                row["forward_graph_ms"] = timed(g.replay, repeats, sync)
                eager = m._run(tokens, positions, mask)
                g.replay()
                sync()
                row["graph_equals_eager"] = bool(torch.equal(out, eager))
            except Exception as e:  # noqa: BLE001 - a probe: report why capture failed
                row["forward_graph_error"] = f"{type(e).__name__}: {str(e)[:300]}"
    H.one_fill(m, context, window, 4, seed=1, batch=batch)  # warm-up of this shape
    H.use_mode(m, "exact")
    fill = H.one_fill(m, context, window, 4, seed=2, batch=batch)
    row["sampler_step_exact_ms"] = round(fill["later_step_ms"], 3)
    if profile:
        from torch.profiler import ProfilerActivity
        from torch.profiler import profile as torch_profile

        with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
            H.one_fill(m, context, window, 4, seed=3, batch=batch)
        ka = prof.key_averages()
        row["profiled_ops"] = sum(e.count for e in ka)
        print(ka.table(sort_by="cpu_time_total", row_limit=25), flush=True)
    del m
    if device.type == "cuda":
        torch.cuda.empty_cache()
    print(json.dumps(row), flush=True)
    return row


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", nargs="+", default=["0.5b", "7b"])
    p.add_argument("--context", type=int, default=1024)
    p.add_argument("--window", type=int, default=32)
    p.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--device", default="cuda")
    p.add_argument("--out", default=None)
    p.add_argument("--profile", action="store_true", help="the ops of one exact fill of the first shape, batch 1")
    a = p.parse_args()
    torch.set_grad_enabled(False)
    rows = [probe(s, a.context, a.window, b, a.repeats, torch.device(a.device), a.profile and (s, b) == (a.shapes[0], 1))
            for s in a.shapes for b in a.batch]
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name() if a.device == "cuda" else "cpu",
                       "torch": torch.__version__, "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
