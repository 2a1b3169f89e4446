"""A model too large for one GPU, spread over several (infill/model/hf/placement.py), without GPUs.

The plan is a pure function of a skeleton, a dtype and free memory: checked here on tiny random
Llama / Qwen2 skeletons (the loader's own, built from config.json fields as tests/hf's checkpoints
write them) with budgets that force a split over two or three devices, and on a 7B one. Its
execution is checked by loading tiny checkpoints through the loader with a plan: onto the CPU
alone (accelerate's hooks on every planned module, the model's own forward paths), which must
compute exactly what the model loaded whole computes; and onto the CPU and the meta device standing
for a second GPU, under a mode that refuses any op whose tensors sit on two devices, as CUDA does
(values there are not computed: that test is about where tensors are, the first about what they
hold).
"""

from __future__ import annotations

import logging
import sys

import pytest
import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

import hf_checkpoints as C
from infill.engine.fill import Engine, EngineConfig
from infill.errors import ModelLoadError
from infill.model import registry
from infill.model.hf import families, loader, placement
from infill.protocol import FillRequest, Hole, SamplingOptions

pytest.importorskip("accelerate")  # infill[multi-gpu], in infill[test] too

PREFIX = "def add(a, b):\n    return a +"
SUFFIX = "\n\n\ndef sub(a, b):\n    return a - b\n"


def skeleton(stock: str, layers: int = 8, tied: bool = False):
    """The loader's meta-device model of a small checkpoint with real proportions (layers much
    larger than the embedding), as config.json would describe it."""
    cfg = {**C.SMALL, "hidden_size": 64, "intermediate_size": 256, "num_hidden_layers": layers, "vocab_size": 512,
           "max_position_embeddings": 2048, "rope_theta": 10000.0, "tie_word_embeddings": tied}
    family = families.CAUSAL_QWEN2 if stock == "qwen2" else families.CAUSAL_LLAMA
    return loader._build(family, families.stock_config(family, cfg, "config.json"), cfg)


def layer_devices(plan, model) -> list:
    return [placement.device_of(plan, f"model.layers.{i}") for i in range(len(model.model.layers))]


def free_for(model, dtype, share: float, n: int) -> dict[int, int]:
    """n devices, each free to take ``share`` of the weights (after the headroom)."""
    need = placement.weights_bytes(model, dtype)
    return {i: int(need * share / (1 - placement.HEADROOM)) for i in range(n)}


# --------------------------------------------------------------------------- the plan


@pytest.mark.parametrize("stock,tied", [("llama", False), ("qwen2", True)])
@pytest.mark.parametrize("n,share", [(2, 0.7), (3, 0.45)])
def test_a_model_too_large_for_one_device_is_spread_in_whole_layers_in_order(stock, tied, n, share):
    m = skeleton(stock, tied=tied)
    plan = placement.plan(m, torch.bfloat16, free_for(m, torch.bfloat16, share, n))
    assert plan is not None
    for name, _ in [*m.named_parameters(remove_duplicate=False), *m.named_buffers(remove_duplicate=False)]:
        assert placement.device_of(plan, name) in range(n), name  # a GPU for every tensor, never cpu/disk
    assert not [k for k in plan if k.startswith("model.layers.") and k.count(".") > 2]  # no layer split
    layers = layer_devices(plan, m)
    assert layers == sorted(layers) and set(layers) == set(range(n))  # contiguous runs, in order, all devices
    # the head, the embedding (a tied head is it) and the rotary cos/sin with the inputs, on the first
    first = {placement.device_of(plan, k) for k in ("lm_head.weight", "model.embed_tokens.weight", "model.rotary_emb")}
    assert first == {0}
    assert placement.device_of(plan, "model.norm") == layers[-1]


def test_a_model_that_fits_its_device_gets_no_plan_and_the_headroom_is_kept():
    m = skeleton("llama")
    need = placement.weights_bytes(m, torch.float32)
    assert need == 4 * sum(t.numel() for t in [*m.parameters(), *m.buffers()])
    roomy = int(need / (1 - placement.HEADROOM)) + 1
    assert placement.plan(m, torch.float32, {0: roomy, 1: roomy}) is None
    # free memory past the weights, but not past them and the headroom: spread
    tight = int(need * 1.1)
    assert placement.plan(m, torch.float32, {0: tight, 1: tight}) is not None
    assert placement.plan(m, torch.bfloat16, {0: tight, 1: tight}) is None  # half the bytes


def test_the_plan_starts_on_the_device_asked_for():
    m = skeleton("llama")
    free = free_for(m, torch.float32, 0.45, 3)
    plan = placement.plan(m, torch.float32, free, first=1)
    assert placement.device_of(plan, "model.embed_tokens") == placement.device_of(plan, "lm_head") == 1
    layers = layer_devices(plan, m)
    order = [1, 0, 2]
    assert [order.index(d) for d in layers] == sorted(order.index(d) for d in layers)
    assert placement.plan(m, torch.float32, {**free, 2: 10 ** 9}, first=2) is None  # fits the one asked for


def test_weights_larger_than_the_gpus_are_a_clear_error_not_an_offload():
    m = skeleton("qwen2", tied=True)
    need = placement.weights_bytes(m, torch.bfloat16)
    free = {0: need // 3, 1: need // 3}
    with pytest.raises(ModelLoadError) as e:
        placement.plan(m, torch.bfloat16, free)
    msg = str(e.value)
    assert f"need {need / 1e9:.1f} GB in bfloat16" in msg and "2 GPUs" in msg
    assert f"cuda:0 {free[0] / 1e9:.1f} GB" in msg and "20% of each" in msg
    assert "\n" not in msg


def test_a_7b_model_in_bf16_on_one_24_gb_gpu_or_two_12_gb_ones():
    """Dream-v0 / Dream-Coder 7B's shape (../shared/open-dllms.md), as the README describes it."""
    cfg = {"vocab_size": 152064, "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
           "num_attention_heads": 28, "num_key_value_heads": 4, "rope_theta": 1e6, "tie_word_embeddings": False}
    m = loader._build(families.DREAM, families.stock_config(families.DREAM, cfg, "config.json"), cfg)
    assert round(placement.weights_bytes(m, torch.bfloat16) / 1e9, 1) == 15.2
    assert placement.plan(m, torch.bfloat16, {0: 21 * 10 ** 9, 1: 10 ** 9}) is None
    plan = placement.plan(m, torch.bfloat16, {0: 12 * 10 ** 9, 1: 12 * 10 ** 9})
    assert layer_devices(plan, m) == [0] * 14 + [1] * 14
    with pytest.raises(ModelLoadError, match="need 15.2 GB .* 14.4 GB of it for weights"):
        placement.plan(m, torch.bfloat16, {0: 9 * 10 ** 9, 1: 9 * 10 ** 9})


def test_check_refuses_plans_that_break_an_invariant():
    m = skeleton("llama", layers=4, tied=True)
    good = {"lm_head": 0, "model.embed_tokens": 0, "model.rotary_emb": 0, "model.layers.0": 0, "model.layers.1": 0,
            "model.layers.2": 1, "model.layers.3": 1, "model.norm": 1}
    placement.check(good, m)
    bad = {
        "no device for model.norm.weight": {k: v for k, v in good.items() if k != "model.norm"},
        "decoder layer split": {**{k: v for k, v in good.items() if k != "model.layers.2"},
                                "model.layers.2.self_attn": 1, "model.layers.2.mlp": 0,
                                "model.layers.2.input_layernorm": 1, "model.layers.2.post_attention_layernorm": 1},
        "not contiguous": {**good, "model.layers.1": 1, "model.layers.2": 0},
        "one tensor on several devices": {**good, "lm_head": 1},  # the tied head away from its embedding
    }
    for message, plan in bad.items():
        with pytest.raises(ValueError, match=message):
            placement.check(plan, m)


# --------------------------------------------------------------------------- reading the GPUs


@pytest.fixture
def fake_gpus(monkeypatch):
    """Two or more CUDA devices as far as placement.gpu_plan can tell: free memory per index, and
    the indices it asked about."""
    asked: list[int] = []
    state = {"free": {}}

    def mem_get_info(i):
        asked.append(i)
        return state["free"][i], 80 * 10 ** 9

    monkeypatch.setattr(torch.cuda, "mem_get_info", mem_get_info)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: len(state["free"]))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)

    def set_free(free):
        state["free"] = free
        asked.clear()
        return asked

    return set_free


def test_gpu_plan_reads_free_memory_only_as_far_as_it_needs(fake_gpus):
    m = skeleton("llama")
    need = placement.weights_bytes(m, torch.bfloat16)
    asked = fake_gpus({0: need * 2, 1: need * 2, 2: need * 2})
    assert placement.gpu_plan(m, torch.bfloat16, torch.device("cpu")) is None and asked == []
    assert placement.gpu_plan(m, torch.bfloat16, torch.device("cuda")) is None and asked == [0]  # no other GPU woken
    asked = fake_gpus({0: need, 1: need, 2: need})  # fits, but not with the headroom
    plan = placement.gpu_plan(m, torch.bfloat16, torch.device("cuda:1"))
    assert sorted(asked) == [0, 1, 2] and placement.device_of(plan, "model.embed_tokens") == 1


def test_without_accelerate_or_a_second_gpu_a_model_too_large_warns_and_loads_on_its_device(fake_gpus, monkeypatch,
                                                                                             caplog):
    m = skeleton("llama")
    need = placement.weights_bytes(m, torch.bfloat16)
    fake_gpus({0: need, 1: need})
    with monkeypatch.context() as patch, caplog.at_level(logging.WARNING, logger=placement.__name__):
        patch.setitem(sys.modules, "accelerate", None)  # import accelerate raises ImportError
        assert placement.gpu_plan(m, torch.bfloat16, torch.device("cuda:0")) is None
    assert "may not fit cuda:0" in caplog.text and "install infill[multi-gpu]" in caplog.text
    caplog.clear()
    fake_gpus({0: need})
    with caplog.at_level(logging.WARNING, logger=placement.__name__):
        assert placement.gpu_plan(m, torch.bfloat16, torch.device("cuda:0")) is None
    assert "the only GPU" in caplog.text


# --------------------------------------------------------------------------- executing a plan


def two_way(a, b) -> dict[str, object]:
    """A plan of a 2-layer checkpoint in the shape placement.plan makes: the ends and layer 0 on a,
    layer 1 and the final norm on b."""
    return {"lm_head": a, "model.embed_tokens": a, "model.rotary_emb": a, "model.layers.0": a, "model.layers.1": b,
            "model.norm": b}


def load_placed(directory, plan, monkeypatch):
    """The checkpoint loaded on the CPU through the loader's placement path, with ``plan``."""
    with monkeypatch.context() as patch:
        patch.setattr(placement, "gpu_plan", lambda hf, dtype, device: plan)
        model, tok = registry.load(directory, "cpu", torch.float32)
    placement.check(plan, model.hf)
    return model, tok


def record(model) -> list[torch.Tensor]:
    """Every window_hidden and logits result the model gives from now on."""
    seen = []
    for name in ("window_hidden", "logits"):
        real = getattr(model, name)

        def spy(*args, _real=real, **kwargs):
            out = _real(*args, **kwargs)
            seen.append(out.clone())
            return out

        setattr(model, name, spy)
    return seen


def fills(model, tok, directory, cache_mode: str) -> list:
    """The model's paths through the engine: two fills of one document as it is typed (a kept
    context reused, a prefix grown), ranked by the text after the hole where the model scores text
    (two candidates); then two rows of a window, and the second alone (a finished row left out)."""
    model.set_cache_mode(cache_mode)
    engine = Engine(model, tok, EngineConfig(model_dir=directory, device="cpu", precision="fp32", cache_mode=cache_mode,
                                             rerank_candidates=2))
    out = []
    for typed in ("", " b"):
        text = PREFIX + typed + SUFFIX
        at = len(PREFIX + typed)
        result = engine.fill(FillRequest(text=text, holes=[Hole(at, at, 4)], language="python",
                                         options=SamplingOptions(steps=3, constrained=False)))
        out.append([f.text for f in result.fills])
    pre, suf, W = tok.encode(PREFIX), tok.encode(SUFFIX), 3
    ctx = model.join_segments([model.encode_segments([pre, suf])] * 2)
    cpos = torch.tensor([[*range(len(pre)), *range(len(pre) + W, len(pre) + W + len(suf))]] * 2)
    bound = model.bind_context(ctx, torch.arange(2), cpos)
    ids, pos = torch.full((2, W), model.mask_id), torch.arange(len(pre), len(pre) + W).repeat(2, 1)
    valid = torch.ones_like(ids, dtype=torch.bool)
    model.window_hidden(ids, pos, valid, bound)
    ids[:, 0] = tok.encode(" x")[0]
    second = torch.tensor([1])
    model.window_hidden(ids[second], pos[second], valid[second], bound.select(second))
    return out


CASES = [("dream-coder", "exact"), ("dream-coder", "approximate"), ("llada", "approximate"), ("open-dcoder", "exact"),
         ("causal-llama", "exact"), ("causal-qwen2", "exact")]


@pytest.mark.parametrize("name,cache_mode", CASES)
def test_a_dispatched_model_computes_exactly_what_the_whole_model_does(name, cache_mode, hf_dirs, monkeypatch):
    """Every planned module behind accelerate's hook (all on the CPU): the model's forward paths
    (whole layouts, kept contexts, incremental causal states, scoring) give the same states and
    logits, bit for bit, as the model loaded whole; a tied head stays the embedding."""
    directory = hf_dirs(name)
    whole, tok = registry.load(directory, "cpu", torch.float32)
    placed, _ = load_placed(directory, two_way("cpu", "cpu"), monkeypatch)
    assert all(hasattr(placed.hf.get_submodule(k), "_hf_hook") for k in two_way("cpu", "cpu"))
    assert not hasattr(whole.hf.model.layers[0], "_hf_hook")
    if whole.hf.config.tie_word_embeddings:
        assert placed.hf.lm_head.weight is placed.hf.model.embed_tokens.weight
    want_seen, got_seen = record(whole), record(placed)
    want = fills(whole, tok, directory, cache_mode)
    got = fills(placed, tok, directory, cache_mode)
    assert got == want
    assert len(got_seen) == len(want_seen) > 6
    for a, b in zip(got_seen, want_seen):
        assert torch.equal(a, b)


class OneDevicePerOp(TorchDispatchMode):
    """CUDA's rule on the CPU: an op's tensors all on one device (a 0-dim CPU tensor aside), index
    tensors included (stricter than CUDA, which also takes CPU indices: here the CPU stands for the
    first GPU); only copies cross. The meta device stands for a second GPU: its values are not
    computed, and a copy off it gives zeros."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.overloadpacket in (torch.ops.aten._to_copy, torch.ops.aten.to):
            src, to = args[0], kwargs.get("device")
            if src.is_meta and to is not None and torch.device(to).type == "cpu":
                return torch.zeros(src.shape, dtype=kwargs.get("dtype") or src.dtype)
            return func(*args, **kwargs)
        if func is torch.ops.aten.copy_.default:
            if args[1].is_meta and not args[0].is_meta:
                return args[0].zero_()
            return func(*args, **kwargs)
        tensors = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        devices = {t.device for t in tensors if not (t.device.type == "cpu" and t.dim() == 0)}
        assert len(devices) <= 1, f"{func}: tensors on {sorted(map(str, devices))}"
        return func(*args, **kwargs)


@pytest.mark.parametrize("name,cache_mode,head", [*[(*c, "cpu") for c in CASES], ("dream-coder", "exact", "meta"),
                                                   ("causal-llama", "exact", "meta")])
def test_a_model_split_over_two_devices_runs_each_op_on_one(name, cache_mode, head, hf_dirs, monkeypatch):
    """Layer 1 and the final norm on a second device (and the head, where ``head`` says so, as
    accelerate would put it with nothing to say otherwise): every op of the fills (the hooks'
    moves, the model's caches of keys and values on each layer's device, the final states brought
    back, the logits) sees its tensors on one device, and what the engine gets is on the model's."""
    directory = hf_dirs(name)
    placed, tok = load_placed(directory, {**two_way("cpu", "meta"), "lm_head": head}, monkeypatch)
    assert placed.layer_devices == [torch.device("cpu"), torch.device("meta")] and placed.device == torch.device("cpu")
    seen = record(placed)
    with OneDevicePerOp():
        fills(placed, tok, directory, cache_mode)
    assert seen and all(t.device == torch.device("cpu") for t in seen)
