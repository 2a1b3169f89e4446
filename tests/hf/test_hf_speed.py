"""The open-model speed benchmark (infill/bench/hf_speed.py) and its physical floor
(infill/bench/floor.py), at tiny sizes on the CPU: the counts and the shape of the output, not speed."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from infill.bench import floor, hf_speed

TINY = dict(vocab_size=151936, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, tie_word_embeddings=True)


def test_floor_counts_every_projection_of_the_real_network():
    """The body's weights in the count are exactly the Linear weights transformers builds."""
    cfg = Qwen2Config(**hf_speed.SHAPES["0.5b"], use_sliding_window=False)
    with torch.device("meta"):
        net = Qwen2ForCausalLM(cfg)
    linear = sum(m.weight.numel() for n, m in net.model.layers.named_modules() if isinstance(m, torch.nn.Linear))
    one_token = floor.hf_fill_work(cfg, 0, 1, 1, 1, "exact", 2)
    attention = 4 * cfg.num_hidden_layers * cfg.hidden_size  # one query on one key
    assert one_token[0] == 2 * linear + attention + 2 * cfg.vocab_size * cfg.hidden_size
    assert one_token[1] == (linear + cfg.vocab_size * cfg.hidden_size) * 2


def test_floor_exact_reruns_the_context_and_approximate_reads_its_keys():
    cfg = Qwen2Config(**TINY)
    ex1 = floor.hf_fill_work(cfg, 100, 8, 1, 1, "exact", 2)
    ex4 = floor.hf_fill_work(cfg, 100, 8, 1, 4, "exact", 2)
    ap4 = floor.hf_fill_work(cfg, 100, 8, 1, 4, "approximate", 2)
    assert ex4[0] == 4 * ex1[0] and ap4[0] < ex4[0]
    assert floor.hf_fill_work(cfg, 100, 8, 3, 4, "exact", 2)[0] == 3 * ex4[0]
    kv = cfg.num_key_value_heads * cfg.hidden_size // cfg.num_attention_heads
    assert ap4[1] - ex4[1] == pytest.approx(ex1[1] + 4 * cfg.num_hidden_layers * 2 * 108 * kv * 2)


def test_batched_rows_and_tokens_per_second(tmp_path, monkeypatch):
    monkeypatch.setitem(hf_speed.SHAPES, "tiny", TINY)
    out = tmp_path / "r.json"
    threads = torch.get_num_threads()
    try:
        with torch.no_grad():  # main turns gradients off for the process: back on after it
            assert hf_speed.main(["--shape", "tiny", "--context", "24", "--window", "4", "6", "--batch", "1", "3",
                                  "--steps", "2", "--repeats", "1", "--threads", "1", "--out", str(out)]) == 0
    finally:
        torch.set_num_threads(threads)
    assert torch.is_grad_enabled()
    got = json.loads(out.read_text())
    rows = {(r["mode"], r["window"], r["batch"]): r for r in got["runs"]}
    assert len(rows) == 2 * 2 * 2 and all(r["steps"] == 2 for r in rows.values())
    for (mode, window, batch), r in rows.items():
        assert r["tokens_per_s"] == pytest.approx(batch * window / r["median_ms"] * 1000, rel=1e-2)
    assert got["gpu"] is None and got["device"] == "cpu"



def test_results_name_the_cpu():
    from infill.bench.quality import cpu_model, machine_info

    cpu = cpu_model()
    assert cpu["name"] and set(cpu["extensions"]) <= {"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_int8"}
    assert machine_info()["cpu"] == cpu
