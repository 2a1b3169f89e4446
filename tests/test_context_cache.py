"""Reusing encoded context across fills is exact, and typing at the cursor reuses the prefix."""

import torch

from infill.model.context_cache import SegmentCache
from infill.engine.fill import Engine, EngineConfig, sticky_start
from infill.model.network import DiffusionLM, ModelConfig
from infill.protocol import FillRequest, Hole, SamplingOptions


def _model():
    torch.manual_seed(0)
    return DiffusionLM(ModelConfig(vocab_size=80, d_model=32, n_layers=2, n_heads=2, d_ff=64)).eval()


def test_extended_segments_equal_fresh_encodings():
    model = _model()
    g = torch.Generator().manual_seed(3)
    cases = [(25, 15), (30, 1), (8, 5)]  # (cached head, new tokens): different sizes in one batch
    rows = [torch.randint(3, 80, (1, n + m), generator=g) for n, m in cases]
    heads = []
    for (n, _), t in zip(cases, rows):
        head = model.encode_context(t[:, :n], torch.zeros(1, n, dtype=torch.long))
        heads.append((head.keys, head.values))
    grown = model.extend_segments(heads, [t[0, n:].tolist() for (n, _), t in zip(cases, rows)])
    for (n, m), t, (keys, values) in zip(cases, rows, grown):
        fresh = model.encode_context(t, torch.zeros(1, n + m, dtype=torch.long))
        for a, b in zip(keys + values, fresh.keys + fresh.values):
            assert a.shape == b.shape and torch.allclose(a, b, atol=1e-5)


def test_cache_hits_extensions_and_misses_give_the_same_context():
    model = _model()
    g = torch.Generator().manual_seed(4)
    prefix = torch.randint(3, 80, (30,), generator=g).tolist()
    suffix = torch.randint(3, 80, (12,), generator=g).tolist()
    cache = SegmentCache()
    first = cache.encode(model, [[prefix, suffix]])
    typed = prefix + [7, 9]  # the user typed two tokens at the cursor
    second = cache.encode(model, [[typed, suffix]])
    assert cache.stats.encoded == 2 and cache.stats.extended == 1 and cache.stats.hits == 1
    reference = SegmentCache(max_tokens=0).encode(model, [[typed, suffix]])
    for a, b in zip(second.keys + second.values, reference.keys + reference.values):
        assert torch.allclose(a, b, atol=1e-5)
    assert first.valid.sum() == 42 and second.valid.sum() == 44


def test_cache_is_bounded():
    model = _model()
    cache = SegmentCache(max_tokens=50)
    for i in range(10):
        cache.encode(model, [[[3 + i] * 20]])
    assert cache._tokens <= 50


def test_engine_fills_are_identical_with_and_without_the_cache(tiny_model_dir):
    cached = Engine.load(EngineConfig(model_dir=tiny_model_dir))
    plain = Engine.load(EngineConfig(model_dir=tiny_model_dir, context_cache_tokens=0))
    text = "def area(r):\n    return 3.14 * r * r\n\n\ndef perimeter(r):\n    return \n\nprint(area(2))\n"
    cursor = text.index("return \n") + len("return ")
    opts = SamplingOptions(candidates=1)
    for typed in ["", "2", "2 *", "2 * 3"]:  # keystrokes at the cursor
        t = text[:cursor] + typed + text[cursor:]
        req = FillRequest(text=t, holes=[Hole(cursor + len(typed), cursor + len(typed), 8)], options=opts)
        assert cached.fill(req).fills == plain.fill(req).fills
    assert cached.context_cache.stats.hits >= 3  # the suffix never changed


def test_sticky_start_moves_in_quanta():
    starts = {sticky_start(n, 100, 25) for n in range(130, 150)}
    assert starts <= {50, 75}
    assert all(n - sticky_start(n, 100, 25) <= 100 for n in range(100, 400))
    assert sticky_start(50, 100, 25) == 0
