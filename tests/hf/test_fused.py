"""Int8 Llama layers run with stacked projections (infill/model/hf/fused.py) give transformers' own
forward over the same modules bit for bit, share the parts' weights, and apply to nothing else."""

from __future__ import annotations

import json

import pytest
import torch

import hf_checkpoints as C
from infill.model import registry
from infill.model.hf import fused, int8
from infill.model.hf.causal import _Appending
from infill.model.hf.model import additive_mask


def transformers_forward(m, tokens, positions, mask, cache=None):
    return m.backbone(input_ids=tokens, position_ids=positions, attention_mask=mask, cache=cache,
                      use_cache=False).last_hidden_state


GRID_SHAPE = dict(C.CAUSAL_LLAMA, hidden_size=64, intermediate_size=128, num_key_value_heads=4)  # whole packed blocks


def grid_checkpoint(directory):
    """An int8 Llama whose layers' weights lie on a 4-bit grid, each projection a whole number of
    packed blocks (fused.PACKED_ROWS)."""
    state = C.llama_state(GRID_SHAPE, tied=False, seed=6)
    d = C.causal_llama(directory, shape=GRID_SHAPE,
                       state=C.int8_state({k: C.on_grid(v) if v.ndim == 2 else v for k, v in state.items()}))
    path = d / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()),
                                "quantization": {"grid": {"bits": 4, "group": 32, "prefix": "model.layers."}}}))
    return d


@pytest.mark.parametrize("grid", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_stacked_layers_equal_transformers_forward_bit_for_bit(grid, dtype, hf_dirs, tmp_path, monkeypatch):
    monkeypatch.setattr(int8, "grid_kernel_fast", lambda: True)
    d = grid_checkpoint(tmp_path / "grid") if grid else hf_dirs("causal-llama-int8")
    m, _ = registry.load(d, "cpu", dtype)
    assert m.stacked is not None and (m.backbone.layers[0].self_attn.q_proj.grid == 32) == grid
    g = torch.Generator().manual_seed(3)
    L = 40
    context = torch.randint(4, 400, (1, L), generator=g)
    ctx_pos = torch.arange(1, L + 1)[None]
    with torch.inference_mode():
        whole = additive_mask(torch.ones((1, L), dtype=torch.bool), L, dtype, 0, ctx_pos[0][None], ctx_pos)
        # a context: many rows, a dense product (its blocking may round otherwise)
        torch.testing.assert_close(m.stacked(context, ctx_pos, whole), transformers_forward(m, context, ctx_pos, whole))
        kv = m._encode_row(context[0], ctx_pos[0]).kv
        for M in (1, 3):  # a decoding step, a speculative one: the weight-only kernels
            q = torch.randint(4, 400, (2, M), generator=g)
            q_pos = (L + 1 + torch.arange(M)).expand(2, M)
            key_pos = torch.cat([ctx_pos.expand(2, L), q_pos], 1)
            mask = additive_mask(torch.ones((2, L + M), dtype=torch.bool), M, dtype, L, key_pos, q_pos)
            caches = [_Appending([(k.expand(2, -1, -1, -1), v.expand(2, -1, -1, -1)) for k, v in kv]) for _ in range(2)]
            got = m.stacked(q, q_pos, mask, caches[0])
            assert torch.equal(got, transformers_forward(m, q, q_pos, mask, caches[1]))
            assert all(torch.equal(a, b) for x, y in zip(caches[0].fresh, caches[1].fresh) for a, b in zip(x, y))


def test_parts_whose_packed_codes_would_not_start_a_block_are_not_stacked(monkeypatch):
    g = torch.Generator().manual_seed(4)
    parts = []
    for rows in (32, 16, 16):  # 32 rows: the next part would start inside a block of PACKED_ROWS
        w = C.on_grid(torch.randn(rows, 64, generator=g))
        parts.append(int8.Int8Linear(*int8.quantize(w), torch.bfloat16, grid=32))
    before = [p.codes.clone() for p in parts]
    assert fused._stack_linear(parts) is None
    assert all(torch.equal(p.codes, b) for p, b in zip(parts, before))
    monkeypatch.setattr(fused, "PACKED_ROWS", 16)  # a layout claim that is false: the product check refuses the stack
    assert fused._stack_linear(parts) is None
    assert all(torch.equal(p.codes, b) for p, b in zip(parts, before))


def test_the_parts_are_views_into_the_stacked_weights(hf_dirs):
    m, _ = registry.load(hf_dirs("causal-llama-int8"), "cpu", torch.float32)
    layer, qkv, gate_up = m.backbone.layers[1], m.stacked.qkv[1], m.stacked.gate_up[1]
    at = 0
    for part in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
        assert part.weight.data_ptr() == qkv.weight[at].data_ptr()
        at += part.out_features
    assert at == qkv.out_features
    assert layer.mlp.up_proj.weight.data_ptr() == gate_up.weight[layer.mlp.gate_proj.out_features].data_ptr()


@pytest.mark.parametrize("name", ["causal-llama", "dream"])
def test_float_weights_and_other_layer_shapes_run_as_transformers_runs_them(name, hf_dirs):
    m, _ = registry.load(hf_dirs(name), "cpu", torch.float32)
    assert m.stacked is None
