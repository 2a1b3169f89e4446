"""Attention over grouped key/value heads equals plain attention with repeated ones, and each kind of\ncall goes where it is fastest."""

import pytest
import torch

from infill.model.hf import attention


def reference(q, k, v, mask, scale):
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
    p = torch.softmax(q @ k.transpose(-1, -2) * scale + mask, dim=-1)
    return (p @ v).transpose(1, 2)


@pytest.mark.parametrize("queries", [1, 2, 5, 16])
@pytest.mark.parametrize("heads,kv_heads", [(9, 3), (4, 1), (6, 2)])
def test_grouped_equals_repeated_heads(queries, heads, kv_heads):
    g = torch.Generator().manual_seed(queries * 31 + heads)
    B, K, D = 2, 40, 16
    q = torch.randn(B, heads, queries, D, generator=g)
    k, v = torch.randn(B, kv_heads, K, D, generator=g), torch.randn(B, kv_heads, K, D, generator=g)
    mask = torch.zeros(B, 1, queries, K)
    mask.masked_fill_(torch.rand(B, 1, queries, K, generator=g) < 0.4, torch.finfo(torch.float32).min)
    got = attention.grouped_attention(q, k, v, mask, D ** -0.5)
    torch.testing.assert_close(got, reference(q, k, v, mask, D ** -0.5), rtol=1e-5, atol=1e-5)


class Module:  # what transformers' sdpa reads of an attention module
    num_key_value_groups, is_causal, training = 3, False, False


def test_on_a_cpu_few_queries_attend_grouped_and_more_go_to_sdpa_reading_grouped_heads(monkeypatch):
    calls, sdpa = [], []
    monkeypatch.setattr(attention, "sdpa_attention_forward", lambda *a, **kw: calls.append(a[1].shape[2]) or (None, None))
    grouped = attention.grouped_attention
    monkeypatch.setattr(attention, "grouped_attention", lambda q, *a: sdpa.append(("grouped", q.shape[2])) or grouped(q, *a))
    torch_sdpa = torch.nn.functional.scaled_dot_product_attention
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention",
                        lambda q, *a, **kw: sdpa.append(("sdpa", q.shape[2])) or torch_sdpa(q, *a, **kw))

    g = torch.Generator().manual_seed(7)
    for Q in (1, 4, 16, 17):
        q, kv = torch.randn(1, 9, Q, 8, generator=g), torch.randn(1, 3, 20, 8, generator=g)
        mask = torch.zeros(1, 1, Q, 20)
        mask[..., :5] = torch.finfo(torch.float32).min
        out, _ = attention.attention_forward(Module(), q, kv, kv, mask, scaling=0.3)
        torch.testing.assert_close(out, reference(q, kv, kv, mask, 0.3), rtol=1e-5, atol=1e-5)
    attention.attention_forward(Module(), q, kv, kv, None, scaling=0.3)  # no mask: transformers' own (causal) rule
    assert sdpa == [("grouped", 1), ("grouped", 4), ("grouped", 16), ("sdpa", 17)]
    assert calls == [17]


def test_off_a_cpu_few_queries_attend_grouped_and_the_rest_go_to_sdpa(monkeypatch):
    calls = []
    monkeypatch.setattr(attention, "sdpa_attention_forward", lambda *a, **kw: calls.append(a[1].shape[2]) or (None, None))

    for Q in (1, 4, 17):  # meta tensors: shapes only, on no CPU
        q, kv = torch.empty(1, 9, Q, 8, device="meta"), torch.empty(1, 3, 20, 8, device="meta")
        out, _ = attention.attention_forward(Module(), q, kv, kv, torch.zeros(1, 1, Q, 20, device="meta"), scaling=0.3)
        if Q == 4:
            assert out.shape == (1, 4, 9, 8)
    assert calls == [1, 17]
