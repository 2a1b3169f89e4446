"""A model too large for one GPU, spread over several (infill/model/hf/placement.py), without GPUs.

The plan is a pure function of a skeleton, a dtype and free memory: checked here on tiny random
Llama / Qwen2 skeletons (the loader's own, built from config.json fields as tests/hf's checkpoints
write them) with budgets that force a split over two or three devices, and on a 7B one.
"""

from __future__ import annotations

import logging
import sys

import pytest
import torch

import hf_checkpoints as C
from infill.errors import ModelLoadError
from infill.model.hf import families, loader, placement

pytest.importorskip("accelerate")  # infill[multi-gpu], in infill[test] too


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
