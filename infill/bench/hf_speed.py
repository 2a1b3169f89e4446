"""Speed of an open diffusion LM behind our seam (infill/model/hf): exact against approximate context reuse.

A random-weight model of a real shape (Qwen2.5-0.5B-like: Open-dCoder's, and the Dream family's
architecture at that size; or 7B-like), Dream's conventions (shifted logits, a BOS lead), one fill
of ``--window`` slots between a prefix and a suffix of ``--context`` tokens in all (three quarters
before the hole), denoised by our sampler in exactly ``--steps`` steps (pad forbidden, so every
row runs all its steps). Timed from binding the context to the last step: the model calls and the
sampler, no tokenizer, no syntax constraint. Random weights: speed only.

    python -m infill.bench.hf_speed --shape 0.5b --context 1024 --window 32 --steps 4 8 \\
        --modes exact approximate --threads 2 --out bench/results/hf_speed_cpu.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import time
from pathlib import Path

import torch

from infill.bench.quality import cpu_model
from infill.model.hf.model import KEEP_LAYOUTS

SHAPES = {  # Qwen2.5-0.5B (Open-dCoder) and Qwen2.5-7B (Dream, Dream-Coder, DreamOn, DiffuCoder)
    "0.5b": dict(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                 num_attention_heads=14, num_key_value_heads=2, tie_word_embeddings=True),
    "7b": dict(vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
               num_attention_heads=28, num_key_value_heads=4, tie_word_embeddings=False),
}


def random_model(shape: str, device: torch.device, dtype: torch.dtype, seed: int = 0):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from infill.model.hf.families import DREAM
    from infill.model.hf.model import HFDiffusionModel

    cfg = Qwen2Config(**SHAPES[shape], rms_norm_eps=1e-6, max_position_embeddings=32768, use_sliding_window=False,
                      rope_parameters={"rope_type": "default", "rope_theta": 1e6}, use_cache=False)
    cfg._attn_implementation = "sdpa"
    with torch.device("meta"):
        hf = Qwen2ForCausalLM(cfg)
    hf = hf.to(dtype).to_empty(device=device)  # the dtype first: a 7B shape never holds fp32 weights
    g = torch.Generator(device=device).manual_seed(seed)  # drawn where the weights live: a 7B shape in seconds
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if name.endswith("norm.weight"):
                p.fill_(1.0)
            else:
                p.copy_((torch.randn(p.shape, generator=g, device=device) * 0.02).to(dtype))
    if cfg.tie_word_embeddings:
        hf.lm_head.weight = hf.model.embed_tokens.weight
    hf.model.rotary_emb = type(hf.model.rotary_emb)(config=cfg).to(device)
    mask, eos = 151666, 151643
    return HFDiffusionModel(hf, DREAM, mask_id=mask, pad_id=eos, eos_id=eos, lead_id=eos, tokenizer_size=151668,
                            special_ids=frozenset({eos, mask}), end_ids=frozenset({eos}), max_context=1536,
                            name=f"random-{shape}").eval()


def one_fill(model, context: int, window: int, steps: int, seed: int, typed: list[int] = (), batch: int = 1) -> dict:
    """One fill between a random prefix and suffix (``context`` tokens, three quarters before the
    hole), with ``typed`` tokens more at the prefix's end; ``batch`` such fills (documents of their
    own) denoised together."""
    from infill.decode.sampler import Schedule, Windows, denoise_steps

    g = torch.Generator().manual_seed(seed)
    docs = torch.randint(0, 150000, (batch, context), generator=g).tolist()
    rows = [(d[: context * 3 // 4] + list(typed), d[context * 3 // 4 :]) for d in docs]
    n_pre, context = len(rows[0][0]), len(rows[0][0]) + len(rows[0][1])
    dev = model.device
    ctx = model.join_segments([model.encode_segments([pre, suf]) for pre, suf in rows])
    cpos = torch.cat([torch.arange(n_pre), torch.arange(n_pre + window, context + window)])[None].repeat(batch, 1)
    pos = torch.arange(n_pre, n_pre + window)[None].repeat(batch, 1).to(dev)
    hole = torch.zeros((batch, window), dtype=torch.long, device=dev)
    valid = hole >= 0
    if dev.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    bound = model.bind_context(ctx, torch.arange(batch), cpos)
    state = Windows(ids=torch.full((batch, window), model.mask_id, device=dev), pos=pos, hole=hole,
                    masked=valid.clone(), logprob=torch.zeros((batch, window), device=dev), no_pad=valid.clone())
    marks = []
    for _ in denoise_steps(model, bound, state, Schedule(steps=steps, pad_in_order=False)):
        if dev.type == "cuda":
            torch.cuda.synchronize()
        marks.append(time.perf_counter())
    total = (marks[-1] - t0) * 1000
    first = (marks[0] - t0) * 1000
    return {"total_ms": total, "first_step_ms": first, "later_step_ms": (total - first) / max(1, len(marks) - 1),
            "steps": len(marks)}


def use_mode(model, mode: str) -> None:
    """Cache mode ``mode`` (``approximate-steps``: approximate without contexts kept across fills), nothing kept."""
    model.set_cache_mode(mode.removesuffix("-steps"))
    model.keep_layouts = 0 if mode.endswith("-steps") else KEEP_LAYOUTS
    model.forget_kept()


def typing(model, context: int, window: int, steps: int, keys: int, seed: int) -> dict:
    """A document's first fill, then ``keys`` keystrokes (a token typed before the hole, a new fill each)."""
    opening = one_fill(model, context, window, steps, seed)
    g = torch.Generator().manual_seed(seed + 1000)
    typed = torch.randint(0, 150000, (keys,), generator=g).tolist()
    strokes = [one_fill(model, context, window, steps, seed, typed[: i + 1]) for i in range(keys)]
    return {"opening_ms": opening["total_ms"], "keystroke_ms": [k["total_ms"] for k in strokes],
            "keystroke_first_step_ms": [k["first_step_ms"] for k in strokes]}


def floor(model, context: int, window: int, batch: int, steps: int, mode: str, gpu: dict) -> dict:
    """The fill's physical floor on this GPU (infill.bench.floor): FLOPs over the measured matmul rate,
    least bytes over the measured copy bandwidth."""
    from infill.bench.floor import hf_fill_work

    flops, byts = hf_fill_work(model.hf.config, context, window, batch, steps, mode.removesuffix("-steps"),
                               model.dtype.itemsize)
    return {"flops": flops, "bytes": byts, "floor_flops_ms": round(flops / gpu["bf16_matmul_flops"] * 1000, 3),
            "floor_bytes_ms": round(byts / gpu["copy_bytes_per_s"] * 1000, 3)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m infill.bench.hf_speed", description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", choices=sorted(SHAPES), default="0.5b")
    p.add_argument("--context", type=int, default=1024)
    p.add_argument("--window", type=int, nargs="+", default=[32])
    p.add_argument("--steps", type=int, nargs="+", default=[4, 8])
    p.add_argument("--batch", type=int, nargs="+", default=[1],
                   help="documents filled together, each its own context (tokens/s counts every row's window)")
    p.add_argument("--modes", nargs="+", choices=("exact", "approximate", "approximate-steps"),
                   default=["exact", "approximate"],
                   help="approximate-steps: reuse across a fill's steps only, not across fills (keystrokes)")
    p.add_argument("--graphs", nargs="+", choices=("on", "off"), default=["on"],
                   help="passes without a cache replayed from CUDA graphs (on a GPU; infill/model/hf/graphs.py) or eager")
    p.add_argument("--keystrokes", type=int, default=0,
                   help="instead of separate documents: a document's first fill, then this many keystrokes, each a fill")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--device", default="cpu")
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.set_grad_enabled(False)
    device = torch.device(args.device)
    dtype = torch.float32 if args.precision == "fp32" else torch.bfloat16
    gpu = None
    if device.type == "cuda":
        from infill.bench.floor import measure_gpu

        gpu = measure_gpu(device)
        print(json.dumps(gpu), flush=True)
    t0 = time.perf_counter()
    model = random_model(args.shape, device, dtype)
    build_s = time.perf_counter() - t0
    one_fill(model, 64, 8, 2, seed=99)  # warm up
    runs = []
    if args.keystrokes:
        for window in args.window:
            for steps in args.steps:
                for mode in args.modes:
                    use_mode(model, mode)
                    got = [typing(model, args.context, window, steps, args.keystrokes, seed=r) for r in range(args.repeats)]
                    strokes = [ms for g in got for ms in g["keystroke_ms"]]
                    row = {"mode": mode, "window": window, "steps": steps, "keystrokes": args.keystrokes,
                           "opening_ms": [round(g["opening_ms"], 1) for g in got],
                           "keystroke_ms": [round(ms, 1) for ms in strokes],
                           "keystroke_median_ms": round(statistics.median(strokes), 1),
                           "keystroke_first_step_median_ms": round(statistics.median(
                               ms for g in got for ms in g["keystroke_first_step_ms"]), 1)}
                    runs.append(row)
                    print(json.dumps(row), flush=True)
    runner = model.graphs
    for window, graphs in itertools.product(args.window if not args.keystrokes else (), args.graphs):
        model.graphs = runner if graphs == "on" else None
        for batch in args.batch:
            for steps in args.steps:
                for mode in args.modes:
                    use_mode(model, mode)
                    one_fill(model, args.context, window, steps, seed=1000, batch=batch)  # this shape's warm-up
                    got = [one_fill(model, args.context, window, steps, seed=r, batch=batch) for r in range(args.repeats)]
                    median = statistics.median(g["total_ms"] for g in got)
                    row = {"mode": mode, "window": window, "batch": batch, "steps": steps,
                           "graphs": model.graphs is not None,
                           "runs_ms": [round(g["total_ms"], 1) for g in got], "median_ms": round(median, 1),
                           "first_step_ms": round(statistics.median(g["first_step_ms"] for g in got), 1),
                           "later_step_ms": round(statistics.median(g["later_step_ms"] for g in got), 1),
                           "tokens_per_s": round(batch * window / median * 1000, 1)}
                    if gpu:
                        row |= floor(model, args.context, window, batch, steps, mode, gpu)
                    runs.append(row)
                    print(json.dumps(row), flush=True)
    for r in (r for r in runs if r["mode"] == "exact" and "batch" in r):  # (keystroke rows have no batch)
        ap = next((a for a in runs if a["mode"] == "approximate"
                   and all(a[k] == r[k] for k in ("window", "batch", "steps", "graphs"))), None)
        if ap:
            graphs = ", CUDA graphs" if r["graphs"] else ""
            print(f"window {r['window']}, batch {r['batch']}, {r['steps']} steps{graphs}: exact {r['median_ms']:.1f} ms, "
                  f"approximate {ap['median_ms']:.1f} ms ({r['median_ms'] / ap['median_ms']:.2f}x)")
    result = {
        "benchmark": "hf_speed", "shape": args.shape, "n_params": model.n_params, "context": args.context,
        "keystrokes": args.keystrokes, "device": str(device) if gpu is None else gpu["name"],
        "precision": args.precision, "threads": torch.get_num_threads(), "torch": torch.__version__,
        "cpu": cpu_model(), "gpu": gpu, "build_s": round(build_s, 1), "runs": runs,
        "command": "python -m infill.bench.hf_speed " + " ".join(argv if argv is not None else __import__("sys").argv[1:]),
    }
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
