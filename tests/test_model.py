"""The model: the cached context path equals the full layout, segments are position-invariant,
and loading refuses anything but a complete, matching model directory."""

import json

import pytest
import torch

from infill.errors import ModelLoadError
from infill.model.network import DiffusionLM, ModelConfig, layout_mask, load_model, save_model

CFG = ModelConfig(vocab_size=100, d_model=32, n_layers=2, n_heads=2, d_ff=64)


def layout(segs, wins, gen):
    """Document-order layout: segment, window, segment, window, ..., segment."""
    ids, pos, seg, isw, p = [], [], [], [], 0
    for i, n in enumerate(segs):
        for _ in range(n):
            ids.append(int(torch.randint(3, 100, (), generator=gen)))
            pos.append(p), seg.append(i), isw.append(False)
            p += 1
        if i < len(wins):
            for _ in range(wins[i]):
                ids.append(CFG.mask_id)
                pos.append(p), seg.append(-1), isw.append(True)
                p += 1
    return ids, pos, seg, isw


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return DiffusionLM(CFG).eval()


@pytest.mark.parametrize("segs,wins", [([5, 3], [4]), ([5, 3, 4], [4, 2]), ([0, 6], [3]), ([7, 0], [5])])
def test_cached_context_path_equals_full_forward(model, segs, wins):
    gen = torch.Generator().manual_seed(1)
    ids, pos, seg, isw = layout(segs, wins, gen)
    T = lambda x, dt=torch.long: torch.tensor([x], dtype=dt)  # noqa: E731
    with torch.no_grad():
        full = model(T(ids), T(pos), T(seg), T(isw, torch.bool))[0]
    ctx = [i for i in range(len(ids)) if not isw[i]]
    win = [i for i in range(len(ids)) if isw[i]]
    cache = model.encode_context(T([ids[i] for i in ctx]), T([seg[i] for i in ctx]))
    bound = model.bind_context(cache, torch.tensor([0]), T([pos[i] for i in ctx]))
    got = model.window_logits(T([ids[i] for i in win]), T([pos[i] for i in win]), torch.ones(1, len(win), dtype=torch.bool), bound)[0]
    assert torch.allclose(got, full[win], atol=1e-5)


def test_a_segment_does_not_depend_on_where_it_sits(model):
    """What makes the cache reusable across keystrokes and window lengths."""
    gen = torch.Generator().manual_seed(2)
    ids, pos, seg, isw = layout([6, 5], [4], gen)
    T = lambda x, dt=torch.long: torch.tensor([x], dtype=dt)  # noqa: E731
    with torch.no_grad():
        h1 = model.hidden(T(ids), T(pos), T(seg), T(isw, torch.bool))[0]
        h2 = model.hidden(T(ids), T([p + 37 for p in pos]), T(seg), T(isw, torch.bool))[0]
    assert torch.allclose(h1, h2, atol=1e-4)


def test_layout_mask_rules():
    pos = torch.tensor([[0, 1, 2, 3, 4]])
    seg = torch.tensor([[0, 0, -1, 1, -1]])
    isw = torch.tensor([[False, False, True, False, False]])
    m = layout_mask(pos, seg, isw)[0, 0]
    assert m[1].tolist() == [True, True, False, False, False]  # causal within its segment
    assert m[3].tolist() == [False, False, False, True, False]  # suffix sees only itself
    assert m[2].tolist() == [True, True, True, True, False]  # window sees every real token
    assert m[4].tolist() == [False, False, False, False, True]  # padding sees itself only


def test_save_and_load_round_trip(tmp_path, model):
    save_model(model, tmp_path, extra={"name": "t"})
    back = load_model(tmp_path)
    for (k, a), (_, b) in zip(model.state_dict().items(), back.state_dict().items()):
        assert torch.equal(a, b), k


def test_loading_bad_directories_fails_clearly(tmp_path, model):
    with pytest.raises(ModelLoadError, match="no config.json"):
        load_model(tmp_path / "nowhere")
    save_model(model, tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"\x00garbage" * 10)
    with pytest.raises(ModelLoadError, match="corrupt"):
        load_model(tmp_path)
    (tmp_path / "model.safetensors").unlink()
    with pytest.raises(ModelLoadError, match="no model.safetensors"):
        load_model(tmp_path)
    save_model(model, tmp_path)
    data = json.loads((tmp_path / "config.json").read_text())
    data["model"]["d_model"] = 64
    (tmp_path / "config.json").write_text(json.dumps(data))
    with pytest.raises(ModelLoadError, match="do not match"):
        load_model(tmp_path)
    data["architecture"] = "llama"
    (tmp_path / "config.json").write_text(json.dumps(data))
    with pytest.raises(ModelLoadError, match="architecture"):
        load_model(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ModelLoadError, match="unreadable"):
        load_model(tmp_path)
