"""Open diffusion LMs through transformers (infill/model/hf): tiny random checkpoints of each family
in its file layout, checked against an independent pure-torch forward pass (hf_reference.py), for
the properties the engine relies on, and refused with one clear line where they are bad."""

from __future__ import annotations

import contextlib
import glob
import json
import shutil

import pytest
import torch
from safetensors.torch import load_file

import hf_reference as REF
from infill.errors import ModelLoadError
from infill.model import registry

FAMILIES = ["dream", "dream-coder", "dreamon", "diffucoder", "open-dcoder", "llada"]
PREFIX = "def add(a, b):\n    return "
SUFFIX = "\n\n\ndef sub(a, b):\n    return a - b\n"


@contextlib.contextmanager
def cache_mode(model, mode: str, refresh_every: int = 0):
    old = (model.cache_mode, model.refresh_every)
    model.set_cache_mode(mode, refresh_every)
    try:
        yield model
    finally:
        model.set_cache_mode(*old)


def facts(model) -> dict:
    cfg = model.backbone.config
    return dict(layout="qwen2" if model.family.stock == "qwen2" else "llada", layers=cfg.num_hidden_layers,
                heads=cfg.num_attention_heads, kv_heads=cfg.num_key_value_heads, eps=cfg.rms_norm_eps,
                theta=cfg.rope_parameters["rope_theta"], tied=cfg.tie_word_embeddings)


def checkpoint_state(directory) -> dict:
    state = {}
    for f in glob.glob(str(directory / "*.safetensors")):
        state.update(load_file(f))
    return state


def layout(model, tok, prefix: str, window: list[int], suffix: str, rows=1):
    """One hole between prefix and suffix: (bound context, ids, pos, valid, prefix ids, suffix ids)."""
    pre, suf = tok.encode(prefix), tok.encode(suffix)
    W = len(window)
    ctx = model.join_segments([model.encode_segments([s for s in (pre, suf) if s])] * rows)
    cpos = torch.tensor([list(range(len(pre))) + list(range(len(pre) + W, len(pre) + W + len(suf)))] * rows)
    bound = model.bind_context(ctx, torch.arange(rows), cpos)
    ids = torch.tensor([window] * rows)
    pos = torch.arange(len(pre), len(pre) + W)[None].repeat(rows, 1)
    return bound, ids, pos, torch.ones_like(ids, dtype=torch.bool), pre, suf


def reference_window_logits(model, directory, pre, window, suf):
    """The reference's logits predicting each window slot: the document laid out with the lead
    (where the family has one) at position 0; a shifted family's slot j from the position before it."""
    lead = model.family.bos_leads or (model.family.shifted and not pre)
    seq = ([model.lead_id] if lead else []) + pre + window + suf
    ref = REF.forward(checkpoint_state(directory), facts(model), seq, list(range(len(seq))))
    first = (1 if lead else 0) + len(pre)
    at = [first + j - (1 if model.family.shifted else 0) for j in range(len(window))]
    return ref[at], ref


# --------------------------------------------------------------------------- conventions read at load


def test_special_ids_and_conventions_read_from_the_checkpoint(hf_models):
    from infill.model.seam import DiffusionModel, Tokenizer

    m, tok = hf_models("dream-coder")
    assert isinstance(m, DiffusionModel) and isinstance(tok, Tokenizer)
    assert (m.mask_id, m.eos_id, m.pad_id, m.lead_id) == (151666, 151643, 151643, 151665)
    assert m.family.shifted and m.variant == "dream" and not m.capabilities.exact_segment_cache
    assert m.vocab_size == 152064 and tok.vocab_size == 151666 + 1  # a padded vocabulary is normal
    assert (tok.mask_id, tok.pad_id) == (m.mask_id, m.pad_id)
    m, tok = hf_models("dream")  # Dream-v0 config: bos 151643; tokenizer from vocab.json + merges.txt
    assert (m.mask_id, m.lead_id) == (151666, 151643)
    m, tok = hf_models("llada")
    assert (m.mask_id, m.eos_id, m.pad_id, m.lead_id) == (126336, 126081, 126081, 126080)
    assert not m.family.shifted and m.vocab_size == 126464
    m, tok = hf_models("open-dcoder")
    assert (m.mask_id, m.eos_id, m.pad_id) == (151665, 151643, 151643)
    assert m.family.shifted and not m.family.bos_leads
    assert m.hf.lm_head.weight is m.backbone.embed_tokens.weight  # tied, as Qwen2.5-Coder-0.5B
    assert hf_models("dreamon")[0].variant == "dreamon" and hf_models("diffucoder")[0].variant == "diffucoder"


def test_tokenizer_round_trip_and_token_bytes(hf_models):
    for name in ("dream", "dream-coder", "llada"):
        _, tok = hf_models(name)
        text = "def f(x):\n\tif x:  # é ü 日本\r\n        return '<|mask|><|endoftext|>'\n"
        ids = tok.encode(text)
        assert tok.decode(ids) == text
        assert b"".join(tok.token_bytes(t) for t in ids) == text.encode()
        assert tok.mask_id not in ids and tok.eos_id not in ids  # special-token text in a file stays text
        assert tok.token_bytes(tok.mask_id) == b"" and tok.decode([tok.mask_id, tok.pad_id]) == ""
    # the slow-tokenizer layout (vocab.json + merges.txt + added tokens) encodes as tokenizer.json does
    assert hf_models("dream")[1].encode(PREFIX + SUFFIX) == hf_models("dream-coder")[1].encode(PREFIX + SUFFIX)


# --------------------------------------------------------------------------- the forward pass


@pytest.mark.parametrize("name", FAMILIES)
def test_forward_matches_the_reference(name, hf_models, hf_dirs):
    m, tok = hf_models(name)
    window = [m.mask_id, tok.encode("a")[0], m.mask_id, m.mask_id]
    bound, ids, pos, valid, pre, suf = layout(m, tok, PREFIX, window, SUFFIX)
    ours = m.raw_logits(m.window_hidden(ids, pos, valid, bound))[0]
    want, _ = reference_window_logits(m, hf_dirs(name), pre, window, suf)
    assert torch.allclose(ours, want, atol=1e-4, rtol=1e-4), (ours - want).abs().max()


@pytest.mark.parametrize("name", ["open-dcoder", "dream-coder", "llada"])
def test_empty_prefix_has_a_lead_token(name, hf_models, hf_dirs):
    """A window at the document's start: a shifted family's first slot is predicted from the lead
    token (BOS, or EOS where the family has no BOS), never from nothing."""
    m, tok = hf_models(name)
    window = [m.mask_id] * 3
    bound, ids, pos, valid, pre, suf = layout(m, tok, "", window, SUFFIX)
    ours = m.raw_logits(m.window_hidden(ids, pos, valid, bound))[0]
    want, _ = reference_window_logits(m, hf_dirs(name), pre, window, suf)
    assert torch.allclose(ours, want, atol=1e-4, rtol=1e-4)


def test_eager_attention_equals_sdpa(hf_models):
    m, tok = hf_models("dream-coder")
    bound, ids, pos, valid, *_ = layout(m, tok, PREFIX, [m.mask_id] * 4, SUFFIX, rows=2)
    valid[1, 3] = False  # window padding in one row
    sdpa = m.window_hidden(ids, pos, valid, bound)
    m.backbone.config._attn_implementation = "eager"
    try:
        eager = m.window_hidden(ids, pos, valid, bound)
    finally:
        m.backbone.config._attn_implementation = "sdpa"
    assert torch.allclose(sdpa, eager, atol=1e-5)


@pytest.mark.parametrize("name", ["dream-coder", "llada"])
def test_bidirectional_a_later_token_changes_earlier_logits(name, hf_models):
    m, tok = hf_models(name)
    a = layout(m, tok, PREFIX, [m.mask_id] * 3, SUFFIX)
    b = layout(m, tok, PREFIX, [m.mask_id] * 3, SUFFIX.replace("sub", "mul"))
    ha = m.window_hidden(*a[1:4], a[0])
    hb = m.window_hidden(*b[1:4], b[0])
    assert (ha - hb).abs().max() > 1e-3  # the suffix, after the window, changes it
    # and a later window slot changes an earlier one's
    c = layout(m, tok, PREFIX, [m.mask_id, m.mask_id, tok.encode("x")[0]], SUFFIX)
    hc = m.window_hidden(*c[1:4], c[0])
    assert (ha[0, 0] - hc[0, 0]).abs().max() > 1e-3


def test_shift_convention(hf_models, hf_dirs):
    """Shifted (Dream): slot j is predicted by the state of the position before it, so slot 0's
    logits are those of the prefix's last token; unshifted (LLaDA): by its own state."""
    for name, shifted in (("dream-coder", True), ("llada", False)):
        m, tok = hf_models(name)
        window = [m.mask_id] * 3
        bound, ids, pos, valid, pre, suf = layout(m, tok, PREFIX, window, SUFFIX)
        ours = m.raw_logits(m.window_hidden(ids, pos, valid, bound))[0]
        _, ref = reference_window_logits(m, hf_dirs(name), pre, window, suf)
        slot0 = 1 + len(pre)  # both families lead with BOS
        assert torch.allclose(ours[0], ref[slot0 - 1 if shifted else slot0], atol=1e-4)
        assert not torch.allclose(ours[0], ref[slot0 if shifted else slot0 - 1], atol=1e-2)


@pytest.mark.parametrize("name", ["dream-coder", "llada"])
def test_padding_invariance(name, hf_models):
    """A row's states do not depend on what it is batched with (context and window padding)."""
    m, tok = hf_models(name)
    short = layout(m, tok, "x = ", [m.mask_id] * 2, "\n")
    long = layout(m, tok, PREFIX, [m.mask_id] * 4, SUFFIX)
    alone_s = m.window_hidden(*short[1:4], short[0])
    alone_l = m.window_hidden(*long[1:4], long[0])
    # batch them: contexts padded to the longer, windows padded to 4 slots
    pre_s, suf_s, pre_l, suf_l = short[4], short[5], long[4], long[5]
    ctx = m.join_segments([m.encode_segments([pre_s, suf_s]), m.encode_segments([pre_l, suf_l])])
    Lc = ctx.length
    cpos = torch.zeros((2, Lc), dtype=torch.long)
    cpos[0, : len(pre_s) + len(suf_s)] = short[0].pos[0]
    cpos[1] = long[0].pos[0]
    bound = m.bind_context(ctx, torch.arange(2), cpos)
    ids = torch.full((2, 4), m.pad_id)
    ids[0, :2], ids[1] = short[1][0], long[1][0]
    pos = torch.zeros((2, 4), dtype=torch.long)
    pos[0, :2], pos[1] = short[2][0], long[2][0]
    valid = torch.tensor([[True, True, False, False], [True] * 4])
    both = m.window_hidden(ids, pos, valid, bound)
    assert torch.allclose(both[0, :2], alone_s[0], atol=1e-5)
    assert torch.allclose(both[1], alone_l[0], atol=1e-5)


# --------------------------------------------------------------------------- cache modes


def denoise_trace(m, tok, steps: int = 4):
    """Run the sampler on two rows; return each step's window hidden states (recorded) and the final ids."""
    from infill.decode.sampler import Schedule, Windows, denoise_steps

    bound, ids, pos, valid, *_ = layout(m, tok, PREFIX, [m.mask_id] * 6, SUFFIX, rows=2)
    ids, pos = ids.to(m.device), pos.to(m.device)
    hole = torch.zeros_like(ids)
    hole[1, 4:] = -1  # the second row has a shorter window
    valid = hole >= 0
    state = Windows(ids=torch.where(valid, m.mask_id, m.pad_id), pos=pos, hole=hole, masked=valid.clone(),
                    logprob=torch.zeros(ids.shape, device=m.device))
    seen = []
    real = m.window_hidden

    def spy(ids, pos, valid, ctx):
        h = real(ids, pos, valid, ctx)
        seen.append((ids.clone(), pos.clone(), valid.clone(), ctx, h))
        return h

    m.window_hidden = spy
    try:
        # the second row finishes after 2 steps: the later steps run the first row alone (Bound.select)
        for _ in denoise_steps(m, bound, state, Schedule(steps=steps, pad_in_order=False), row_steps=torch.tensor([steps, 2])):
            pass
    finally:
        del m.window_hidden
    return seen, state.ids


def fresh(m, ids, pos, valid, ctx):
    """The window states from scratch: the whole layout, no state kept."""
    from infill.model.hf.model import HFBound

    with cache_mode(m, "exact"):
        return m.window_hidden(ids, pos, valid, HFBound(ctx.ids, ctx.pos, ctx.valid))


def test_exact_mode_equals_full_recomputation(hf_models):
    m, tok = hf_models("dream-coder")
    with cache_mode(m, "exact"):
        seen, _ = denoise_trace(m, tok)
    assert len(seen) >= 3 and seen[-1][0].shape[0] == 1  # rows dropped out
    for ids, pos, valid, ctx, h in seen:
        assert torch.equal(h, fresh(m, ids, pos, valid, ctx))


@pytest.mark.parametrize("name", ["dream-coder", "llada"])
def test_approximate_mode_runs_and_is_close(name, hf_models):
    m, tok = hf_models(name)
    with cache_mode(m, "approximate"):
        seen, final = denoise_trace(m, tok)
    assert not (final == m.mask_id).any() and seen[-1][0].shape[0] == 1
    first = seen[0]
    assert torch.allclose(first[4], fresh(m, *first[:4]), atol=1e-6)  # its first step is the whole layout
    for ids, pos, valid, ctx, h in seen[1:]:
        want = fresh(m, ids, pos, valid, ctx)
        ok = valid
        cos = torch.nn.functional.cosine_similarity(h[ok], want[ok], dim=-1)
        assert cos.min() > 0.8, cos.min()  # stale context: close, not equal (random weights: a loose bound)
    with cache_mode(m, "approximate", refresh_every=1):  # a refresh every step is the exact mode
        seen, _ = denoise_trace(m, tok)
    for ids, pos, valid, ctx, h in seen:
        assert torch.allclose(h, fresh(m, ids, pos, valid, ctx), atol=1e-6)


def first_step(m, tok, prefix, window, suffix):
    """A new fill's first window states, whether they took a whole-layout run, and its layout."""
    bound, ids, pos, valid, *_ = layout(m, tok, prefix, window, suffix)
    runs = m.whole_runs
    h = m.window_hidden(ids, pos, valid, bound)
    return h, m.whole_runs > runs, (ids, pos, valid, bound)


@pytest.mark.parametrize("name", ["dream-coder", "llada"])
def test_approximate_mode_reuses_a_kept_context_across_fills(name, hf_models):
    """Keystrokes: a fill whose context shares its start and end with a kept one runs only what
    differs at its first step; the end's keys are turned to their new positions exactly."""
    m, tok = hf_models(name)
    mask = m.mask_id
    with cache_mode(m, "approximate"):
        m.forget_kept()
        assert first_step(m, tok, PREFIX, [mask] * 6, SUFFIX)[1]  # the whole layout, kept
        # the same document again: the kept context is exact, so is the first step
        h, whole, lay = first_step(m, tok, PREFIX, [mask] * 6, SUFFIX)
        assert not whole and torch.allclose(h, fresh(m, *lay), atol=1e-5)
        # a wider window: the suffix sits two positions further on; its kept keys are turned there (the
        # first layer's keys depend only on token and position: equal to a whole run's)
        h, whole, lay = first_step(m, tok, PREFIX, [mask] * 8, SUFFIX)
        kept, m._kept = m._kept, []
        whole_run = first_step(m, tok, PREFIX, [mask] * 8, SUFFIX)[2][3]
        m._kept = kept
        assert not whole and torch.allclose(lay[3].kv[0][0], whole_run.kv[0][0], atol=1e-5)
        assert not torch.allclose(lay[3].kv[1][0], whole_run.kv[1][0], atol=1e-3)  # later layers: close, not equal
        cos = torch.nn.functional.cosine_similarity(h[0], fresh(m, *lay)[0], dim=-1)
        assert cos.min() > 0.8, cos.min()
        # typed text before the hole: only the new tokens (and the windows) run; close, not equal
        h, whole, (ids, pos, valid, bound) = first_step(m, tok, PREFIX + "a + b", [mask] * 6, SUFFIX)
        assert not whole
        cos = torch.nn.functional.cosine_similarity(h[0], fresh(m, ids, pos, valid, bound)[0], dim=-1)
        assert cos.min() > 0.8, cos.min()
        ids[0, 0] = tok.encode("x")[0]
        runs = m.whole_runs
        m.window_hidden(ids, pos, valid, bound)  # later steps go on from it
        assert m.whole_runs == runs and bound.calls == 2
        # another document: the whole layout
        assert first_step(m, tok, "import os\n", [mask] * 6, "\nprint(os.sep)\n")[1]
    with cache_mode(m, "exact"):
        assert first_step(m, tok, PREFIX, [mask] * 6, SUFFIX)[1]


def test_keystrokes_through_the_engine_reuse_the_kept_context(hf_dirs):
    """Typing before a hole with --cache-mode approximate: the next fill runs no whole layout."""
    from infill.engine.fill import Engine, EngineConfig
    from infill.protocol import FillRequest, Hole, SamplingOptions

    engine = Engine.load(EngineConfig(model_dir=hf_dirs("dream-coder"), device="cpu", precision="fp32", cache_mode="approximate"))
    m = engine.model
    for typed in ("", "a", "a +"):
        text = PREFIX + typed + SUFFIX
        at = len(PREFIX + typed)
        runs = m.whole_runs
        result = engine.fill(FillRequest(text=text, holes=[Hole(at, at, 8)], language="python",
                                         options=SamplingOptions(steps=4, constrained=False)))
        assert result.fills[0].text is not None
        assert (m.whole_runs > runs) == (typed == "")  # only the document's first fill runs the whole layout


def test_variable_length_spare_slots_are_unseen_and_positions_close_up(hf_models, hf_dirs):
    """DreamOn: a hole's spare slots (pad) are not in the layout the model sees; the live slots and
    the suffix sit where a layout made for the live slots alone puts them (the reference's)."""
    m, tok = hf_models("dreamon")
    t = tok.encode("a")[0]
    live, spare = [t, m.mask_id, m.mask_id], [m.pad_id] * 3
    bound, ids, pos, valid, pre, suf = layout(m, tok, PREFIX, live + spare, SUFFIX)
    got = m.logits(m.window_hidden(ids, pos, valid, bound))[0, :3]
    want, _ = reference_window_logits(m, hf_dirs("dreamon"), pre, live, suf)
    finite = torch.isfinite(got)
    assert torch.allclose(got[finite], want[finite], atol=1e-4)
    with cache_mode(m, "approximate"):  # a fill that grew moves the context after it: the whole layout again
        ctx = bound
        m.window_hidden(ids, pos, valid, ctx)
        grown = torch.tensor([live + [m.mask_id] + spare[1:]])
        assert torch.allclose(m.window_hidden(grown, pos, valid, ctx), fresh(m, grown, pos, valid, ctx), atol=1e-6)
        assert ctx.calls == 1
        settled = grown.clone()
        settled[0, 1] = t  # the same length: the kept context is used
        m.window_hidden(settled, pos, valid, ctx)
        assert ctx.calls == 2


@contextlib.contextmanager
def wanting_expand(m, draws: int = 10):
    """The model made to want the expand token for its first ``draws`` logits calls; yields the
    number of slots each call asked for."""
    real, calls = m.logits, []

    def logits(hidden):
        out = real(hidden)
        calls.append(out.shape[0])
        if len(calls) <= draws:
            out[..., m.capabilities.expand_id] = 100.0
        return out

    m.logits = logits
    try:
        yield calls
    finally:
        del m.logits


def grow_request():
    from infill.protocol import FillRequest, Hole, SamplingOptions

    return FillRequest(text=PREFIX + SUFFIX, holes=[Hole(len(PREFIX), len(PREFIX), 12)], language="python",
                       options=SamplingOptions(steps=12, constrained=False))


@pytest.mark.parametrize("cache", ["exact", "approximate"])
def test_dreamon_fills_grow_past_their_start_with_expand(cache, hf_dirs):
    """The engine on DreamOn: holes start with EXPAND_START live slots and grow by the expand
    token up to their window; the step-level engine (infill serve) fills the same."""
    from infill.engine.fill import EXPAND_START, Engine, EngineConfig
    from infill.engine.stepper import Stepper

    engine = Engine.load(EngineConfig(model_dir=hf_dirs("dreamon"), device="cpu", precision="fp32", cache_mode=cache))
    with wanting_expand(engine.model) as calls:
        result = engine.fill(grow_request())
    assert calls[0] == EXPAND_START and max(calls) > EXPAND_START  # the masked slots grew
    assert EXPAND_START < result.timings.tokens_filled <= 12
    stepper = Stepper(engine)
    with wanting_expand(engine.model):
        slot = stepper.add(grow_request())
        for _ in range(100):
            if not stepper.slots:
                break
            stepper.step()
    assert slot.error is None and [f.text for f in slot.result.fills] == [f.text for f in result.fills]


# --------------------------------------------------------------------------- special ids in fills


def test_logits_stay_in_the_tokenizer_and_off_special_tokens(hf_models):
    for name in ("dreamon", "diffucoder", "llada", "open-dcoder"):
        m, tok = hf_models(name)
        h = torch.randn(3, m.backbone.config.hidden_size)
        lg = m.logits(h)
        allowed = torch.isfinite(lg[0]).nonzero().flatten()
        assert int(allowed.max()) < tok.vocab_size  # rows past the tokenizer (padding) never drawn
        for i in tok.special_ids - {m.pad_id, m.capabilities.expand_id}:
            assert lg[0, i] == float("-inf"), (name, i)
        assert torch.isfinite(lg[0, m.pad_id])
    m, tok = hf_models("dreamon")
    expand = m.capabilities.expand_id  # variable length: the sampler decides where it may be drawn
    assert expand == tok.id_of("<|expand|>") and torch.isfinite(m.logits(torch.randn(1, 32))[0, expand])
    for name in ("dream", "dream-coder", "diffucoder", "llada", "open-dcoder"):  # no expand token: fixed-length windows
        assert hf_models(name)[0].capabilities.expand_id is None
    m, tok = hf_models("llada")  # EoT's probability goes to pad (the fill ends there)
    h = torch.randn(2, 32)
    raw, lg = m.raw_logits(h), m.logits(h)
    assert torch.allclose(lg[:, m.pad_id], torch.logsumexp(raw[:, [126081, 126348]], dim=-1), atol=1e-5)


@pytest.mark.parametrize("name", ["dream-coder", "llada", "open-dcoder"])
def test_engine_fill_uses_the_models_ids(name, hf_dirs):
    from infill.engine.fill import Engine, EngineConfig
    from infill.protocol import FillRequest, Hole, SamplingOptions

    engine = Engine.load(EngineConfig(model_dir=hf_dirs(name), device="cpu", precision="fp32", candidates=1))
    text = PREFIX + SUFFIX
    req = FillRequest(text=text, holes=[Hole(start=len(PREFIX), end=len(PREFIX), max_tokens=6)],
                      language="python", options=SamplingOptions(steps=3, constrained=False))
    result = engine.fill(req)
    fill = result.fills[0].text
    assert "<|" not in fill and "<M>" not in fill
    assert result.model == hf_dirs(name).name


# --------------------------------------------------------------------------- bad checkpoints


def copy(src, dst):
    shutil.copytree(src, dst)
    return dst


def edit_config(directory, **changes):
    path = directory / "config.json"
    data = json.loads(path.read_text())
    for k, v in changes.items():
        if v is None:
            data.pop(k, None)
        else:
            data[k] = v
    path.write_text(json.dumps(data))


def bad_checkpoint(case, hf_dirs, tmp_path):
    import hf_checkpoints as C

    if case == "unknown-architecture":
        d = copy(hf_dirs("dream-small"), tmp_path / "m")
        edit_config(d, architectures=["MambaForCausalLM"], model_type="mamba")
    elif case == "no-tokenizer":
        d = copy(hf_dirs("dream-small"), tmp_path / "m")
        (d / "tokenizer.json").unlink()
    elif case == "missing-shard":
        d = copy(hf_dirs("dream-small"), tmp_path / "m")
        next(d.glob("model-00002-of-*.safetensors")).unlink()
    elif case == "tokenizer-past-vocab":  # a tokenizer from another model: ids past the 512 rows
        d = copy(hf_dirs("dream-small"), tmp_path / "m")
        shutil.copy(hf_dirs("dream-coder") / "tokenizer.json", d / "tokenizer.json")
        edit_config(d, mask_token_id=None, bos_token_id=None, eos_token_id=None, pad_token_id=None)
    elif case == "wrong-shape":
        d = copy(hf_dirs("dream-small"), tmp_path / "m")
        edit_config(d, intermediate_size=64)
    return d


BAD = {
    "unknown-architecture": "unknown architecture",
    "no-tokenizer": "no tokenizer",
    "missing-shard": "missing weight shard model-00002-of-00002.safetensors",
    "tokenizer-past-vocab": "past the model's vocabulary of 512",
    "wrong-shape": "weights do not match config.json",
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_checkpoints_are_refused_with_one_line(case, hf_dirs, tmp_path):
    d = bad_checkpoint(case, hf_dirs, tmp_path)
    with pytest.raises(ModelLoadError) as e:
        registry.load(d, "cpu", torch.float32)
    message = str(e.value)
    assert BAD[case] in message and "\n" not in message, message


@pytest.mark.parametrize("case", ["wrong-shape", "missing-shard"])
def test_bad_checkpoint_exits_2_from_the_command_line(case, hf_dirs, tmp_path, capsys):
    from infill.cli import main

    d = bad_checkpoint(case, hf_dirs, tmp_path)
    f = tmp_path / "m.py"
    f.write_text(PREFIX + "<FILL>" + SUFFIX)
    rc = main(["fill", str(f), "--model", str(d), "--device", "cpu"])
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert rc == 2 and out == "" and len(lines) == 1 and BAD[case] in lines[0], err


def test_padded_vocabulary_is_normal(hf_models):
    m, tok = hf_models("open-dcoder")  # 151936 rows for 151666 token ids
    assert m.vocab_size - tok.vocab_size == 151936 - 151666
