"""The open diffusion LMs on a CUDA device: the same tiny checkpoints as test_hf_models.py, loaded
on the GPU, checked against the CPU reference forward pass and against the CPU's own fills.

Runs only where torch sees a GPU (marked ``gpu``; CI has none): these are the checks the device
machine runs. Everything they compare against is computed on the CPU in the same test.
"""

from __future__ import annotations

import pytest
import torch

from infill.model import registry
from test_hf_models import FAMILIES, PREFIX, SUFFIX, cache_mode, layout, reference_window_logits

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]
CUDA = torch.device("cuda")


def on_cuda(dirs, name, dtype=torch.float32):
    return registry.load(dirs(name), "cuda", dtype)


def window_logits(m, tok, window):
    bound, ids, pos, valid, pre, suf = layout(m, tok, PREFIX, window, SUFFIX)
    ids, pos, valid = ids.to(m.device), pos.to(m.device), valid.to(m.device)
    return m.raw_logits(m.window_hidden(ids, pos, valid, bound))[0].float().cpu(), pre, suf


@pytest.mark.parametrize("name", FAMILIES)
def test_forward_on_cuda_matches_the_reference(name, hf_dirs):
    torch.backends.cuda.matmul.allow_tf32 = False
    m, tok = on_cuda(hf_dirs, name)
    assert m.device.type == "cuda" and next(m.hf.parameters()).device.type == "cuda"
    assert m.keep_layouts == 0  # on a GPU the whole layout is cheaper than reusing a kept one
    window = [m.mask_id, tok.encode("a")[0], m.mask_id, m.mask_id]
    ours, pre, suf = window_logits(m, tok, window)
    want, _ = reference_window_logits(m, hf_dirs(name), pre, window, suf)
    assert torch.allclose(ours, want, atol=1e-3, rtol=1e-3), (ours - want).abs().max()


@pytest.mark.parametrize("name", ["dream-coder", "llada", "open-dcoder"])
def test_bf16_on_cuda_stays_near_the_reference(name, hf_dirs):
    m, tok = on_cuda(hf_dirs, name, torch.bfloat16)
    assert m.dtype == torch.bfloat16
    window = [m.mask_id, tok.encode("a")[0], m.mask_id, m.mask_id]
    ours, pre, suf = window_logits(m, tok, window)
    want, _ = reference_window_logits(m, hf_dirs(name), pre, window, suf)
    cos = torch.nn.functional.cosine_similarity(ours, want, dim=-1)
    assert cos.min() > 0.99, cos


@pytest.mark.parametrize("mode", ["exact", "approximate"])
@pytest.mark.parametrize("name", ["dream-coder", "llada", "open-dcoder", "causal-llama-int8"])
def test_engine_fill_on_cuda_equals_the_cpu_fill(name, mode, hf_dirs):
    """The same request, greedy, fp32: the same fill text on the GPU as on the CPU."""
    from infill.engine.fill import Engine, EngineConfig
    from infill.protocol import FillRequest, Hole, SamplingOptions

    torch.backends.cuda.matmul.allow_tf32 = False
    req = FillRequest(text=PREFIX + SUFFIX, holes=[Hole(start=len(PREFIX), end=len(PREFIX), max_tokens=6)],
                      language="python", options=SamplingOptions(steps=3, temperature=0.0, constrained=True))
    fills = {}
    for device in ("cpu", "cuda"):
        engine = Engine.load(EngineConfig(model_dir=hf_dirs(name), device=device, precision="fp32", candidates=1,
                                          cache_mode=mode))
        assert engine.device.type == device
        fills[device] = [f.text for f in engine.fill(req).fills]
    assert fills["cuda"] == fills["cpu"]


def test_exact_mode_on_cuda_equals_full_recomputation(hf_dirs):
    from test_hf_models import denoise_trace, fresh

    m, tok = on_cuda(hf_dirs, "dream-coder")
    with cache_mode(m, "exact"):
        seen, _ = denoise_trace(m, tok)
    assert seen and seen[0][0].device.type == "cuda"
    for ids, pos, valid, ctx, h in seen:
        assert torch.equal(h, fresh(m, ids, pos, valid, ctx))


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_cli_fill_on_cuda(precision, hf_dirs, tmp_path, capsys):
    import json

    from infill.cli import main

    f = tmp_path / "a.py"
    f.write_text(PREFIX + "<FILL>" + SUFFIX)
    rc = main(["fill", str(f), "--model", str(hf_dirs("dream-coder")), "--device", "cuda", "--precision", precision,
               "--steps", "3", "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    record = json.loads(out.strip().splitlines()[0])
    assert record["model"] == "dream-coder" and len(record["fills"]) == 1 and "<|" not in record["fills"][0]["text"]


@torch.inference_mode()
def test_whole_passes_replay_from_cuda_graphs(hf_dirs):
    """A shape's first pass runs eagerly, its second is captured, later ones replay: every one gives
    the eager pass's states on the same padded layout, bit for bit."""
    from infill.model.hf.graphs import KEEP, pad_layout
    from test_graphs import layout as random_layout

    m, _ = on_cuda(hf_dirs, "dream-coder", torch.bfloat16)
    assert m.graphs is not None and on_cuda(hf_dirs, "causal-llama")[0].graphs is None
    tokens, positions, mask = (x.to(CUDA) for x in random_layout(m, 37))
    eager = m._forward(*pad_layout(tokens, positions, mask, m.graphs.bucket, m.pad_id))[:, :37]
    outs = [m._run(tokens, positions, mask) for _ in range(3)]
    assert m.graphs.captures == 1
    for out in outs:
        assert torch.equal(out, eager)
    again = m._run(*(x.to(CUDA) for x in random_layout(m, 37, seed=1)))
    assert m.graphs.captures == 1 and not torch.equal(again, outs[0])  # new inputs, the same graph
    for n in range(1, KEEP + 3):  # more shapes than are kept: the oldest go
        for _ in range(2):
            m._run(*(x.to(CUDA) for x in random_layout(m, n * m.graphs.bucket)))
    assert len(m.graphs._graphs) == KEEP
