"""CUDA-graph replay of whole-layout passes (infill/model/hf/graphs.py): the padding that fixes a
graph's shape leaves the real tokens' states as they were. Runs on the CPU (padding and the first,
eager sighting); the capture and replay are checked on a GPU in test_cuda.py."""

from __future__ import annotations

import pytest
import torch

from infill.model.hf.graphs import GraphRunner, pad_layout
from infill.model.hf.model import additive_mask


@pytest.fixture(scope="module")
def dream(hf_models):
    return hf_models("dream-coder")[0]


def layout(m, n: int, rows: int = 2, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, m.tokenizer_size, (rows, n), generator=g)
    positions = torch.arange(n)[None].repeat(rows, 1)
    ok = torch.ones((rows, n), dtype=torch.bool)
    ok[1, n - 3:] = False  # the second row ends in tokens that are not real
    return tokens, positions, additive_mask(ok, n, m.dtype, 0)


@pytest.mark.parametrize("n, size", [(13, 16), (13, 13), (5, 64)])
def test_padding_leaves_the_real_states_unchanged(dream, n, size):
    tokens, positions, mask = layout(dream, n)
    want = dream._forward(tokens, positions, mask)
    t, p, m = pad_layout(tokens, positions, mask, size, dream.pad_id)
    assert t.shape == (2, size) and m.shape == (2, 1, size, size)
    assert torch.equal(t[:, :n], tokens) and (t[:, n:] == dream.pad_id).all()
    got = dream._forward(t, p, m)
    assert torch.isfinite(got).all()
    assert torch.allclose(got[:, :n], want, atol=1e-5, rtol=1e-5)


def test_a_shape_seen_once_runs_eagerly_padded_and_is_not_captured(dream):
    seen = []

    def run(t, p, m):
        seen.append(t.shape)
        return dream._forward(t, p, m)

    runner = GraphRunner(run, dream.pad_id, bucket=8)
    tokens, positions, mask = layout(dream, 13)
    got = runner(tokens, positions, mask)
    assert seen == [(2, 16)] and runner.captures == 0 and got.shape[:2] == (2, 13)
    assert torch.allclose(got, dream._forward(tokens, positions, mask), atol=1e-5, rtol=1e-5)


def test_a_model_on_the_cpu_runs_no_graphs(dream, hf_models):
    assert dream.graphs is None and hf_models("causal-llama")[0].graphs is None
