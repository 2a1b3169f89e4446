"""The model seam (infill/model/seam.py) and the registry (infill/model/registry.py).

A second, unrelated model drives the sampler, the context cache and the engine: a tiny
bidirectional transformer that runs the whole layout at every step (no segment cache), with
shifted logits (the state before a slot predicts it, as in Dream), a byte tokenizer, a
vocabulary padded past its tokenizer's, and its special ids at the end of the vocabulary
(eos 256, pad 257, mask 258) instead of ours (pad 0, mask 1, eos 2).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from torch import nn

from infill.decode.sampler import Schedule, Windows, denoise
from infill.engine.fill import Engine, EngineConfig
from infill.errors import ModelLoadError
from infill.model import registry
from infill.model.context_cache import SegmentCache
from infill.model.network import DiffusionLM
from infill.model.seam import Bound, Capabilities, Context, DiffusionModel, Tokenizer
from infill.protocol import FillRequest, Hole, SamplingOptions

EOS, PAD, MASK = 256, 257, 258


class ByteTokenizer:
    """One token per UTF-8 byte, then eos, pad and mask."""

    vocab_size = 259
    eos_id, pad_id, mask_id = EOS, PAD, MASK

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8", "surrogatepass"))

    def encode_batch(self, texts):
        return [self.encode(t) for t in texts]

    def decode(self, ids) -> str:
        return bytes(int(i) for i in ids if int(i) < 256).decode("utf-8", errors="replace")

    def token_bytes(self, token_id: int) -> bytes:
        return bytes([token_id]) if token_id < 256 else b""


@dataclass
class TokenContext:
    ids: torch.Tensor  # [B, L]
    valid: torch.Tensor  # [B, L]

    @property
    def length(self) -> int:
        return self.ids.shape[1]


@dataclass
class TokenBound:
    ids: torch.Tensor  # [R, Lc]
    valid: torch.Tensor
    pos: torch.Tensor

    def select(self, rows: torch.Tensor) -> "TokenBound":
        return TokenBound(self.ids.index_select(0, rows), self.valid.index_select(0, rows), self.pos.index_select(0, rows))


class FullAttentionLM(nn.Module):
    """Every window step reads the whole layout, context and windows, bidirectionally."""

    capabilities = Capabilities(exact_segment_cache=False)
    languages = None

    def __init__(self, vocab: int = 320, d: int = 32, max_context: int = 96):
        super().__init__()
        torch.manual_seed(1)
        self.name = "full-attention-test"
        self._max_context = max_context
        self.embed = nn.Embedding(vocab, d)
        self.pos_embed = nn.Embedding(1024, d)
        self.layer = nn.TransformerEncoderLayer(d, 2, 64, dropout=0.0, batch_first=True)
        self.head = nn.Linear(d, vocab)
        self.eval()
        self.encoded: list[list[int]] = []  # every segment encode_segments saw
        self.bound: list[TokenBound] = []

    mask_id, pad_id, eos_id = MASK, PAD, EOS
    vocab_size = 320
    n_params = property(lambda self: sum(p.numel() for p in self.parameters()))
    max_context = property(lambda self: self._max_context)
    device = property(lambda self: self.head.weight.device)
    dtype = property(lambda self: self.head.weight.dtype)

    def encode_segments(self, segments):
        self.encoded.extend(segments)
        return [torch.tensor(s, dtype=torch.long) for s in segments]

    def extend_segments(self, heads, ids):
        raise AssertionError("a model without exact_segment_cache never extends a cached segment")

    def prefetch(self, context):
        raise AssertionError("a model without prefix_cache is never asked to encode a context ahead")

    def join_segments(self, rows):
        L = max(1, max(sum(len(s) for s in segs) for segs in rows))
        ids = torch.full((len(rows), L), self.pad_id, dtype=torch.long)
        valid = torch.zeros(len(rows), L, dtype=torch.bool)
        for b, segs in enumerate(rows):
            joined = torch.cat(segs) if segs else torch.zeros(0, dtype=torch.long)
            ids[b, : len(joined)], valid[b, : len(joined)] = joined, True
        return TokenContext(ids, valid)

    def bind_context(self, context, rows, pos):
        bound = TokenBound(context.ids.index_select(0, rows), context.valid.index_select(0, rows), pos)
        self.bound.append(bound)
        return bound

    @torch.no_grad()
    def window_hidden(self, ids, pos, valid, ctx):
        all_ids, all_pos = torch.cat([ctx.ids, ids], 1), torch.cat([ctx.pos, pos], 1)
        real = torch.cat([ctx.valid, valid], 1)
        h = self.layer(self.embed(all_ids) + self.pos_embed(all_pos.clamp(0, 1023)), src_key_padding_mask=~real)
        # Shifted logits: a slot is predicted by the state at the position before it (its own at 0).
        before = (all_pos[:, None, :] == (pos - 1).clamp_min(0)[:, :, None]) & real[:, None, :]  # [R, W, L]
        at = torch.where(before.any(-1), before.float().argmax(-1), ctx.ids.shape[1] + torch.arange(ids.shape[1]))
        return h.gather(1, at[..., None].expand(-1, -1, h.shape[-1]))

    def logits(self, hidden):
        out = self.head(hidden)
        out[..., ByteTokenizer.vocab_size :] = float("-inf")  # the padded vocabulary is never a token
        return out


def test_the_second_model_and_ours_are_diffusion_models(tiny_engine):
    assert isinstance(FullAttentionLM(), DiffusionModel) and isinstance(ByteTokenizer(), Tokenizer)
    assert isinstance(tiny_engine.model, DiffusionModel) and isinstance(tiny_engine.tokenizer, Tokenizer)
    assert tiny_engine.model.capabilities.exact_segment_cache


def _state(model: FullAttentionLM, ctx_len: int, W: int, rows: int = 1) -> Windows:
    hole = torch.zeros(rows, W, dtype=torch.long)
    return Windows(ids=torch.full((rows, W), model.mask_id), pos=ctx_len + torch.arange(W).expand(rows, W).clone(),
                   hole=hole, masked=torch.ones(rows, W, dtype=torch.bool), logprob=torch.zeros(rows, W))


def test_the_sampler_and_the_cache_drive_a_second_model():
    model, cache = FullAttentionLM(), SegmentCache()
    tok = ByteTokenizer()
    segments = [tok.encode("x = 1\ny = "), tok.encode("\nprint(y)\n")]
    context = cache.encode(model, [segments])
    assert isinstance(context, Context) and context.length == sum(map(len, segments))
    cache.encode(model, [segments])
    # Not exact: nothing is kept or extended, every fill encodes its context again.
    assert cache.stats.encoded == 4 and cache.stats.hits == cache.stats.extended == 0 and not cache._entries
    bound = model.bind_context(context, torch.zeros(2, dtype=torch.long), torch.arange(context.length).expand(2, -1))
    assert isinstance(bound, Bound)
    state, steps = denoise(model, bound, _state(model, context.length, 6, rows=2), Schedule(steps=3))
    assert steps == 3 and not state.masked.any()
    ids = state.ids.tolist()
    assert ids[0] == ids[1]  # rows are independent candidates
    assert all(t < tok.vocab_size and t != MASK for t in ids[0])
    if PAD in ids[0]:  # pad-terminated with the model's own pad id
        assert all(t == PAD for t in ids[0][ids[0].index(PAD) :])


def test_the_sampler_uses_the_models_own_special_ids():
    model = FullAttentionLM()
    ctx = model.bind_context(model.join_segments([[torch.tensor([120, 121, 122])]]), torch.zeros(1, dtype=torch.long),
                             torch.arange(3)[None])
    with torch.no_grad():
        model.head.bias[MASK] = 1e4  # the model would rather propose its mask
    state, _ = denoise(model, ctx, _state(model, 3, 5), Schedule(steps=5))
    assert MASK not in state.ids[0].tolist()
    with torch.no_grad():
        model.head.bias[MASK] = 0
        model.head.bias[PAD] = 1e4  # ... or leave the hole empty
    state = _state(model, 3, 5)
    denoise(model, ctx, state, Schedule(steps=5))
    assert state.ids[0].tolist() == [PAD] * 5
    state = _state(model, 3, 5)
    state.no_pad = torch.tensor([[True, True, False, False, False]])  # a hole's min_tokens
    denoise(model, ctx, state, Schedule(steps=5))
    ids = state.ids[0].tolist()
    assert PAD not in ids[:2] and ids[2:] == [PAD] * 3


def _second_model_dir(tmp_path: Path, data: dict) -> Path:
    directory = tmp_path / "second"
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps(data))
    return directory


def _load_second(directory: Path, data: dict, device: torch.device, dtype: torch.dtype):
    return FullAttentionLM(max_context=data["max_context"]).to(device=device, dtype=dtype), ByteTokenizer()


def test_the_engine_loads_and_fills_with_a_registered_second_model(tmp_path, monkeypatch):
    # Keyed as a Hugging Face checkpoint is: by its class name, else its model_type.
    monkeypatch.setitem(registry._LOADERS, "TinyFullAttention", _load_second)
    directory = _second_model_dir(tmp_path, {"architectures": ["TinyFullAttention"], "model_type": "tiny", "max_context": 40})
    engine = Engine.load(EngineConfig(model_dir=directory, device="cpu", precision="fp32"))
    assert isinstance(engine.model, FullAttentionLM) and engine.model_id == "second" and engine.budget() == 40
    text = "def add(a, b):\n    return \n\nprint(add(1, 2))\n"
    at = text.index("return ") + len("return ")
    for constrained in (False, True):
        r = engine.fill(FillRequest(text=text, holes=[Hole(at, at, 6)], language="python",
                                    options=SamplingOptions(candidates=2, constrained=constrained)))
        assert len(r.fills) == 1 and isinstance(r.fills[0].text, str) and r.model == "second"
        assert 0 <= r.timings.tokens_filled <= 6 and r.timings.context_tokens <= 40
    # The model read the text around the hole, through its own tokenizer, within its budget.
    first = engine.model.bound[0]
    seen = engine.tokenizer.decode(first.ids[0][first.valid[0]].tolist())
    assert 20 < len(seen) <= 40  # trimmed to the budget
    assert any(text[:at].endswith(seen[:k]) and text[at:].startswith(seen[k:]) for k in range(len(seen) + 1))
    assert engine.context_cache.stats.hits == engine.context_cache.stats.extended == 0


def test_the_registry_loads_ours(tiny_model_dir):
    model, tokenizer = registry.load(tiny_model_dir)
    assert isinstance(model, DiffusionLM) and isinstance(model, DiffusionModel) and model.name == "tiny-test"
    assert (tokenizer.pad_id, tokenizer.mask_id, tokenizer.eos_id) == (model.pad_id, model.mask_id, model.eos_id) == (0, 1, 2)
    assert model.device == torch.device("cpu") and model.dtype == torch.float32 and not model.training
    assert registry.architecture_keys(json.loads((tiny_model_dir / "config.json").read_text())) == ["infill-segment-window-v1"]


@pytest.mark.parametrize("data, named", [
    ({"architecture": "mamba"}, "'mamba'"),  # (Dream and Llama keys are the open diffusion loaders', infill/model/hf)
    ({"architectures": ["MambaForCausalLM"], "model_type": "mamba"}, "'MambaForCausalLM', 'mamba'"),
    ({}, "none"),
])
def test_an_unknown_architecture_is_one_clear_error(tmp_path, data, named):
    with pytest.raises(ModelLoadError, match="unknown architecture") as e:
        registry.load(_second_model_dir(tmp_path, data))
    assert named in str(e.value) and "infill-segment-window-v1" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ModelLoadError, match="unknown architecture"):
        Engine.load(EngineConfig(model_dir=tmp_path / "second", device="cpu"))


def test_missing_or_corrupt_files_are_load_errors(tiny_model_dir, tmp_path):
    with pytest.raises(ModelLoadError, match="does not exist"):
        registry.load(tmp_path / "nowhere")
    with pytest.raises(ModelLoadError, match="no config.json"):
        registry.load(tmp_path)
    for name, match in [("tokenizer.json", "tokenizer file not found"), ("model.safetensors", "no model.safetensors")]:
        copy = tmp_path / f"without-{name}"
        shutil.copytree(tiny_model_dir, copy)
        (copy / name).unlink()
        with pytest.raises(ModelLoadError, match=match):
            registry.load(copy)
    corrupt = tmp_path / "corrupt"
    shutil.copytree(tiny_model_dir, corrupt)
    (corrupt / "model.safetensors").write_bytes(b"not weights")
    with pytest.raises(ModelLoadError, match="corrupt"):
        registry.load(corrupt)
