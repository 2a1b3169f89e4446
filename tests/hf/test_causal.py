"""Plain causal (autoregressive) Llama / Qwen2 checkpoints as the degenerate case of masked
diffusion (infill/model/hf/causal.py, the sampler's frontier schedule, the engine's token healing
and said-all rule, int8 weights, ``infill import-gguf``), checked against transformers' own causal
models built from the same tensors: tiny random checkpoints (hf_checkpoints.py), fp32 on the CPU."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

import hf_checkpoints as C
from infill.decode.sampler import denoise_steps, first_masked
from infill.engine.fill import Engine, EngineConfig, sticky_start
from infill.engine.finish import Finisher
from infill.errors import ModelLoadError
from infill.model import registry
from infill.model.hf import int8
from infill.model.hf.causal import CausalLM
from infill.protocol import FillRequest, Hole, SamplingOptions

PREFIX = "def add(a, b):\n    return max(a,"  # ends inside a line, after a comma: nothing to heal
LONGER = "class Stack:\n    def push(self, x):\n        self.items.append(x)\n        return len(self.items"
SUFFIX = "\n\n\ndef sub(a, b):\n    return a - b\n"
ATOL = 1e-5  # fp32 states of two computations of the same attention (other shapes, other orders)


# --------------------------------------------------------------------------- helpers


def load(directory):
    return registry.load(directory, "cpu", torch.float32)


def engine_of(directory, candidates: int = 1, **config):
    """An engine over a freshly loaded model (no prefix cache from earlier fills); by default one
    candidate row, the greedy fill (section 9 tests the ranked draws), reading the text before the
    hole alone (no lines further down: the references here decode the prefix)."""
    m, tok = load(directory)
    config.setdefault("suffix_lines", 0)
    return Engine(m, tok, EngineConfig(model_dir=directory, device="cpu", precision="fp32", rerank_candidates=candidates,
                                       **config))


def reference(directory):
    """transformers' own causal model of the checkpoint (Llama or Qwen2, causal attention as it builds it)."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(directory), dtype=torch.float32).eval()


def model_calls(model) -> list[tuple[int, ...]]:
    """The shape of the tokens of each of ``model``'s calls from now on (its ``_run`` wrapped)."""
    calls, real = [], model._run

    def counting(tokens, *args, **kwargs):
        calls.append(tuple(tokens.shape))
        return real(tokens, *args, **kwargs)

    model._run = counting
    return calls


def request(prefix: str, suffix: str = SUFFIX, max_tokens: int = 8, **options) -> FillRequest:
    return FillRequest(text=prefix + suffix, holes=[Hole(start=len(prefix), end=len(prefix), max_tokens=max_tokens)],
                       language="python", options=SamplingOptions(constrained=False, **options))


def allowed_logits(model, logits: torch.Tensor) -> torch.Tensor:
    """The vocabulary rules CausalLM.logits applies, written out: rows past the tokenizer and
    special tokens other than pad banned; pad takes the logsumexp of the end tokens."""
    out = logits.clone()
    ends = sorted(model._end_ids)
    if len(ends) > 1:
        out[..., model.pad_id] = torch.logsumexp(logits[..., ends], dim=-1)
    out[..., model.tokenizer_size:] = float("-inf")
    for i in model._banned.nonzero().flatten().tolist():
        out[..., i] = float("-inf")
    return out


@torch.no_grad()
def greedy(model, ref, prefix_ids: list[int], n: int) -> list[int]:
    """Greedy decoding with transformers' causal model: up to n tokens, ending at pad."""
    ids, out = list(prefix_ids), []
    for _ in range(n):
        logits = ref(torch.tensor([ids])).logits[0, -1]
        t = int(allowed_logits(model, logits).argmax())
        out.append(t)
        if t == model.pad_id:
            break
        ids.append(t)
    return out


def committed_rows(engine):
    """Wrap engine.decode_row (unchanged) to record the ids of every row it decodes."""
    seen = []
    real = engine.decode_row

    def spy(ids, logprob, hole, heals, path):
        seen.append(ids[hole >= 0].clone())
        return real(ids, logprob, hole, heals, path)

    engine.decode_row = spy
    return seen


def until_pad(ids: torch.Tensor, pad: int) -> list[int]:
    ids = ids.tolist()
    return ids[: ids.index(pad)] if pad in ids else ids


def causal_mask(L: int) -> torch.Tensor:
    return torch.full((1, 1, L, L), torch.finfo(torch.float32).min).triu(1)


@torch.no_grad()
def causal_logits(model, ids: list[int]) -> torch.Tensor:
    """A loaded model's logits of ``ids`` with an explicit causal mask (the loader turns the
    layers' own causal flag off: infill always passes its mask)."""
    return model.hf(input_ids=torch.tensor([ids]), attention_mask=causal_mask(len(ids))).logits[0]


def one_hole(model, tok, prefix: str, W: int):
    """A bound context of ``prefix`` alone and a window of W masked slots after it."""
    pre = tok.encode(prefix)
    ctx = model.join_segments([model.encode_segments([pre])])
    bound = model.bind_context(ctx, torch.arange(1), torch.arange(len(pre))[None])
    pos = torch.arange(len(pre), len(pre) + W)[None]
    return pre, bound, torch.full((1, W), model.mask_id), pos, torch.ones((1, W), dtype=torch.bool)


def engine_rows(engine, requests, prepared=None):
    """What Engine._fill_chunk lays out before denoising: prepared requests (``prepared``: these,
    already prepared), layout, bound context, the initial windows."""
    prepared = prepared or [engine.prepare(r) for r in requests]
    cache = engine.context_cache.encode(engine.model, [p.segments for p in prepared])
    lay = engine.layout(prepared, cache.length)
    bound = engine.model.bind_context(cache, torch.tensor(lay.rows), lay.ctx_pos)
    return prepared, lay, bound, engine.initial_state(prepared, lay)


# --------------------------------------------------------------------------- 1. loading


@pytest.mark.parametrize("name, family", [("causal-llama", "causal-llama"), ("causal-qwen2", "causal-qwen2")])
def test_plain_causal_checkpoints_load_as_causal_families(name, family, hf_models):
    m, tok = hf_models(name)
    assert isinstance(m, CausalLM) and m.family.key == family and m.family.causal
    assert m.capabilities.left_to_right is True and m.capabilities.exact_segment_cache is False
    # no mask token anywhere: a special token stands in for masked slots, never EOS/pad/BOS
    assert m.mask_id in tok.special_ids and m.mask_id not in (m.eos_id, m.pad_id, m.lead_id)
    assert tok.mask_id == m.mask_id and tok.text_of(m.eos_id) == "<|endoftext|>"
    assert tok.text_of(m.mask_id) == "<|im_start|>"  # the first special after EOS (the placeholder)
    lg = m.logits(torch.randn(2, m.backbone.config.hidden_size))
    assert (lg[:, m.mask_id] == float("-inf")).all() and torch.isfinite(lg[:, m.pad_id]).all()


def test_a_diffusion_qwen2_checkpoint_is_not_causal(hf_models):
    m, _ = hf_models("open-dcoder")  # Qwen2ForCausalLM too, but with a mask token: Open-dCoder
    assert not isinstance(m, CausalLM) and m.capabilities.left_to_right is False


# --------------------------------------------------------------------------- 2. exactness


@pytest.mark.parametrize("name", ["causal-llama", "causal-qwen2"])
def test_window_states_equal_transformers_causal_model(name, hf_models, hf_dirs):
    """Decoding slot by slot through window_hidden: each frontier slot's state is transformers'
    last hidden state of the prefix and the slots before it, and greedy picks the same tokens."""
    m, tok = hf_models(name)
    ref = reference(hf_dirs(name))
    W = 8
    pre, bound, ids, pos, valid = one_hole(m, tok, PREFIX, W)
    got = []
    for j in range(W):
        h = m.window_hidden(ids, pos, valid, bound)
        want = ref.model(torch.tensor([pre + got])).last_hidden_state[0, -1]
        assert torch.allclose(h[0, j], want, atol=ATOL), (j, (h[0, j] - want).abs().max())
        t = int(m.logits(h[:, j])[0].argmax())
        got.append(t)
        if t == m.pad_id:
            break
        ids[0, j] = t
    assert got == greedy(m, ref, pre, W)
    assert len(got) > 1


def test_engine_fill_commits_transformers_greedy_tokens(hf_dirs):
    engine = engine_of(hf_dirs("causal-llama"))
    ref = reference(hf_dirs("causal-llama"))
    seen = committed_rows(engine)
    result = engine.fill(request(PREFIX, max_tokens=8))
    assert engine.prepare(request(PREFIX)).heals == [b""]
    assert len(seen) == 1 and result.timings.candidates == 1  # one row: left to right, a shorter window is a cut
    ids = until_pad(seen[0], engine.model.pad_id)
    want = greedy(engine.model, ref, engine.tokenizer.encode(PREFIX), 8)
    assert ids and ids == want[: len(ids)]
    assert engine.tokenizer.decode(ids).startswith(result.fills[0].text)  # finishing only cuts its end


def test_a_causal_model_reads_the_whole_budget_before_the_hole(hf_dirs):
    """It never encodes the text after its hole, so the prefix takes the budget that text had
    (less up to one eighth, the sticky start); a config's share still rules where it sets one."""
    prefix = "".join(f"x{i} = {i} * {i}\n" for i in range(400))
    suffix = "".join(f"y{i} = {i} + {i}\n" for i in range(400))
    req = request(prefix, suffix)
    engine = engine_of(hf_dirs("causal-llama"), context_tokens=64)
    pre, suf = engine.prepare(req).segments
    assert 64 - 8 <= len(pre) <= 64 and not suf
    assert "x399 = 399 * 399" in engine.tokenizer.decode(pre) and engine.tokenizer.decode(pre) in prefix
    pre, suf = engine_of(hf_dirs("causal-llama"), context_tokens=64, prefix_share=0.75).prepare(req).segments
    assert 48 - 8 <= len(pre) <= 48 and len(suf) == 16


def test_a_batch_of_two_prefix_lengths_gives_each_alone(hf_dirs):
    d = hf_dirs("causal-llama")
    reqs = [request(PREFIX, max_tokens=7), request(LONGER, "\n", max_tokens=5)]
    alone = []
    for r in reqs:
        engine = engine_of(d)
        seen = committed_rows(engine)
        alone.append((engine.fill(r), seen[0]))
    engine = engine_of(d)
    seen = committed_rows(engine)
    together = engine.fill_batch(reqs)
    assert len(seen) == 2
    for (res, ids), res2, ids2 in zip(alone, together, seen):
        assert torch.equal(ids, ids2[: len(ids)]) and (ids2[len(ids):] == engine.model.pad_id).all()
        assert [f.text for f in res.fills] == [f.text for f in res2.fills]


# --------------------------------------------------------------------------- 3. the prefix cache


def test_prefix_cache_runs_only_the_new_context_tokens(hf_dirs):
    d = hf_dirs("causal-llama")
    engine = engine_of(d, lookahead=0)  # one slot a call: no guessed tokens ride along
    m, tok = engine.model, engine.tokenizer
    grown = PREFIX + " b, (a,"  # ends after a comma: nothing healed
    first, second = tok.encode(PREFIX), tok.encode(grown)
    assert second[: len(first)] == first  # the typed text starts new tokens
    new = len(second) - len(first)
    calls = model_calls(m)
    engine.fill(request(PREFIX))
    assert calls[0] == (1, len(first))  # the whole context once
    assert all(c == (1, 1) for c in calls[1:])  # then one committed slot per step
    calls.clear()
    seen = committed_rows(engine)
    result = engine.fill(request(grown))
    assert calls[0] == (1, new), calls  # only the typed tokens
    assert all(c == (1, 1) for c in calls[1:])
    calls.clear()
    engine.recent_fills.clear()  # (drafts from the last fill would take several slots a call)
    again = engine.fill(request(grown))  # the same document again: no context to run
    assert calls and all(c == (1, 1) for c in calls)
    fresh = engine_of(d, lookahead=0)
    fresh_seen = committed_rows(fresh)
    want = fresh.fill(request(grown))
    assert torch.equal(seen[0], fresh_seen[0]) and torch.equal(seen[1], fresh_seen[0])
    assert result.fills[0].text == want.fills[0].text == again.fills[0].text


def test_a_context_encoded_ahead_leaves_the_fill_that_moves_the_prefix_start_only_its_new_tokens(hf_dirs, monkeypatch):
    """Near the point where typing moves the prefix's sticky start (the whole context to encode
    again), encode_ahead encodes the context as it will start, up to its last line break; the fill
    that moves the start then runs only the tokens after that, and fills as a fresh engine does."""
    d = hf_dirs("causal-llama")
    engine = engine_of(d, lookahead=0, context_tokens=64)  # the start moves 8 tokens at a time
    m, tok = engine.model, engine.tokenizer
    lines = "".join(f"x{i} = {i}\n" for i in range(40))
    text = lines + "y = (a,"
    assert engine.encode_ahead(request("x = (a,", ""), grow=8) == 0  # a short prefix: its start never moves
    engine.fill(request(text, ""))
    start = engine.prepare(request(text, "")).segments[0]
    typed = next(text + " b" * k + "," for k in range(1, 16)
                 if engine.prepare(request(text + " b" * k + ",", "")).segments[0][:4] != start[:4])
    kept = engine.encode_ahead(request(text, ""), grow=len(tok.encode(typed)) - len(tok.encode(text)) + 1)
    context = engine.prepare(request(typed, "")).segments[0]
    assert 0 < kept < len(context) and tok.decode(context[:kept]).endswith("\n")
    assert engine.encode_ahead(request(text, ""), grow=len(tok.encode(typed)) - len(tok.encode(text)) + 1) == kept
    calls = model_calls(m)
    engine.recent_fills.clear()
    result = engine.fill(request(typed, ""))
    assert calls[0][1] == len(context) - kept, (calls, len(context), kept)  # the tokens after the kept line break
    assert result.fills[0].text == engine_of(d, lookahead=0, context_tokens=64).fill(request(typed, "")).fills[0].text

    class After:  # a fill waits after two model calls
        def is_set(self):
            return len(calls) >= 2

    monkeypatch.setattr("infill.engine.fill.AHEAD_CHUNK", 4)
    calls.clear()
    m.forget_contexts()
    assert engine.encode_ahead(request(text, ""), grow=len(tok.encode(typed)) - len(tok.encode(text)) + 1, stop=After()) == 8
    assert [n for _, n in calls] == [4, 4]


def test_typing_on_after_each_encode_ahead_no_start_move_encodes_the_whole_context(hf_dirs):
    """Typed on, a long prefix's start moves where the cut by characters moves and where the cut by
    tokens moves, at different points. With encode_ahead run after every keystroke (a typist who
    pauses), the fill at each move of either kind finds its context's start encoded already."""
    engine = engine_of(hf_dirs("causal-llama"), lookahead=0, context_tokens=64)  # by tokens every 8, by characters every 192
    # (this tokenizer's tokens are about a character each, so a move of the cut by characters
    # shifts where the cut by tokens falls)
    m, limit = engine.model, 64 * 12
    text = "".join(f"v{i} = {i}\n" for i in range(300))
    calls = model_calls(m)
    moves, before = {"characters": 0, "tokens": 0}, None
    for cur in range(740, 800):  # a character a keystroke; the cut by characters moves at 769
        req = request(text[:cur], "")
        context = engine.prepare(req).segments[0]
        calls.clear()
        engine.fill(req)
        if before is not None and context[:4] != before[0][:4]:
            moves["characters" if sticky_start(cur, limit, limit // 4) != before[1] else "tokens"] += 1
            assert calls[0][1] < len(context) // 2, (cur, calls[0], len(context))
        engine.encode_ahead(req, grow=16)
        before = context, sticky_start(cur, limit, limit // 4)
    assert moves["characters"] == 1 and moves["tokens"] >= 3, moves


def test_a_document_typed_in_keeps_one_row_in_the_prefix_cache(hf_dirs):
    """A keystroke's row takes the place of the row it grew from, so a document typed in for a while
    holds one row, not one per keystroke: with room for one row per document, the other documents'
    rows stay, and their next keystroke runs only its new tokens (kept as an LRU of every keystroke's
    row, the typed document's stale rows pushed the others out and they ran their whole context)."""
    engine = engine_of(hf_dirs("causal-llama"))
    m, tok = engine.model, engine.tokenizer
    docs = [PREFIX, LONGER, "import os\n\nx = os.path.join(a, b,"]
    typed = [" 1 +", " 2 +", " 3 +", " 4 +"]  # after an operator: each keystroke's tokens follow the last ones
    room = sum(len(tok.encode(d + "".join(typed))) + 2 for d in docs)  # one row per document, grown
    m.set_context_cache(room)
    for d in docs:
        engine.fill(request(d))
    for k in range(1, len(typed) + 1):  # the first document is typed in; the others wait
        engine.fill(request(docs[0] + "".join(typed[:k])))
    calls = model_calls(m)
    for d in docs[1:]:
        calls.clear()
        engine.recent_fills.clear()
        engine.fill(request(d + typed[0]))
        new = len(tok.encode(d + typed[0])) - len(tok.encode(d))
        assert calls[0][1] <= new + 1, (d, calls[0])  # the typed tokens (and a last token re-cut), not the document
    assert len(m._rows) == len(docs)


def test_contexts_that_join_together_run_in_one_call_as_they_would_one_by_one(hf_dirs):
    """A batch's new contexts (requests joining it) run their uncached tokens in one model call,
    padded to the longest, with the states and the cached rows that one call each makes; a context
    that repeats another (a request's candidate rows) is taken from it."""
    d = hf_dirs("causal-llama")
    one, batched = engine_of(d).model, engine_of(d).model
    tok = engine_of(d).tokenizer
    texts = [PREFIX, LONGER, "import os\n\nx = os.path.join(a, b,", PREFIX + " 1,"]
    contexts = [(torch.tensor(tok.encode(t)), torch.arange(len(tok.encode(t))) + 3) for t in texts]
    one.set_context_cache(1 << 20)
    batched.set_context_cache(1 << 20)
    one._encode_row(*contexts[0])
    batched._encode_row(*contexts[0])  # a cached row the last context grows from
    singles = [one._encode_row(*c) for c in contexts[1:]]
    calls = model_calls(batched)
    rows = batched._encode_rows(contexts[1:] + [contexts[1]])
    assert len(calls) == 1 and calls[0][0] == 3, calls  # three contexts to run, one call; the repeat taken
    assert rows[3] is rows[0]
    for a, b in zip(singles, rows):
        assert torch.equal(a.tokens, b.tokens)
        torch.testing.assert_close(a.hidden, b.hidden, atol=1e-4, rtol=1e-4)
        for (ka, va), (kb, vb) in zip(a.kv, b.kv):
            torch.testing.assert_close(ka, kb, atol=1e-4, rtol=1e-4)
            torch.testing.assert_close(va, vb, atol=1e-4, rtol=1e-4)
    assert len(batched._rows) == len(one._rows) == 3  # the grown row superseded the one it grew from


def test_the_engine_sizes_the_prefix_cache_and_it_keeps_its_size(hf_dirs):
    """EngineConfig.context_cache_tokens is the causal model's prefix cache: rows past it go, the
    oldest first, and the latest row stays even where it alone is larger."""
    d = hf_dirs("causal-llama")
    docs = [PREFIX, LONGER, "import os\n\nx = os.path.join(a, b,"]
    engine = engine_of(d)
    for doc in docs:
        engine.fill(request(doc))
    sizes = [len(r.tokens) for r in engine.model._rows.values()]
    assert len(sizes) == len(docs)
    room = sizes[1] + sizes[2]
    small = engine_of(d, context_cache_tokens=room)
    assert small.model.context_cache_tokens == room
    for doc in docs:
        small.fill(request(doc))
    assert [len(r.tokens) for r in small.model._rows.values()] == sizes[1:]
    small.model.set_context_cache(1)
    assert [len(r.tokens) for r in small.model._rows.values()] == sizes[2:]


# --------------------------------------------------------------------------- 4. stale slots


def meaningful(ids: torch.Tensor, mask_id: int) -> torch.Tensor:
    """[W] the slots whose predicting state is in place: the first, and those after a committed slot."""
    ok = torch.ones(ids.shape[-1], dtype=torch.bool)
    ok[1:] = ids[0, :-1] != mask_id
    return ok


def check_trace(m, tok, ref, trace, W):
    """window_hidden over ``trace`` (one bound context, step after step): at every step, the
    meaningful states equal a fresh bound context's and transformers' state of what precedes
    each slot (masked slots are not there)."""
    M = m.mask_id
    pre, bound, _, pos, valid = one_hole(m, tok, PREFIX, W)
    for step in trace:
        ids = torch.tensor([step])
        h = m.window_hidden(ids, pos, valid, bound)
        _, fresh_bound, *_ = one_hole(m, tok, PREFIX, W)
        want = m.window_hidden(ids, pos, valid, fresh_bound)
        ok = meaningful(ids, M)
        assert torch.allclose(h[0, ok], want[0, ok], atol=ATOL), (step, (h[0, ok] - want[0, ok]).abs().max())
        for j in ok.nonzero().flatten().tolist():
            before = [(p, i) for p, i in enumerate(step[:j]) if i != M]
            seq = pre + [i for _, i in before]
            positions = list(range(len(pre))) + [len(pre) + p for p, _ in before]
            r = ref.model(input_ids=torch.tensor([seq]), position_ids=torch.tensor([positions])).last_hidden_state[0, -1]
            assert torch.allclose(h[0, j], r, atol=ATOL), (step, j)


def trace_tokens(tok):
    t = tok.encode(" + b * c - d")
    assert len(t) >= 5
    return t, tok.encode(" x")[0]


def test_a_slot_changed_or_masked_again_is_fed_again(hf_models, hf_dirs):
    m, tok = hf_models("causal-llama")
    (t, x), M = trace_tokens(tok), m.mask_id
    check_trace(m, tok, reference(hf_dirs("causal-llama")), [
        [t[0], t[1], t[2], M, M, M],
        [t[0], x, t[2], t[3], M, M],  # slot 1 changed after being fed
        [t[0], x, t[2], t[3], t[4], M],
        [t[0], M, t[2], M, M, M],  # slot 1 masked again (a repair), slot 3 too
        [t[0], M, t[2], M, M, M],
    ], W=6)


def test_a_slot_committed_again_before_a_fed_slot_refeeds_it(hf_models, hf_dirs):
    m, tok = hf_models("causal-llama")
    (t, x), M = trace_tokens(tok), m.mask_id
    check_trace(m, tok, reference(hf_dirs("causal-llama")), [
        [t[0], t[1], t[2], t[3], M, M],  # left to right so far
        [t[0], M, t[2], M, M, M],  # a repair masks slots 1 and 3
        [t[0], x, t[2], M, M, M],  # the frontier commits slot 1 again: slot 3's prediction reads slot 2
    ], W=6)


def test_drafts_not_taken_are_run_again_from_the_first_that_changed(hf_models, hf_dirs):
    """Speculative drafts (fed past the frontier, then replaced): the states before the first
    changed slot are kept, the slots from it on run again, and only they."""
    m, tok = hf_models("causal-llama")
    (t, x), M = trace_tokens(tok), m.mask_id
    trace = [
        [t[0], x, x, M, M, M],  # slot 0 committed, drafts at slots 1 and 2
        [t[0], t[1], M, M, M, M],  # the draft at slot 1 not taken: slot 1 committed, slot 2 masked again
        [t[0], t[1], t[2], t[3], x, M],  # drafts at 2-4 (2 and 3 will be taken)
        [t[0], t[1], t[2], t[3], t[4], M],
    ]
    check_trace(m, tok, reference(hf_dirs("causal-llama")), trace, W=6)
    pre, bound, _, pos, valid = one_hole(m, tok, PREFIX, 6)
    m.window_hidden(torch.tensor([[M] * 6]), pos, valid, bound)  # the context alone
    real, ran = m._run, []
    m._run = lambda tokens, *a, **k: (ran.append(tokens.shape[1]), real(tokens, *a, **k))[1]
    try:
        for step in trace:
            m.window_hidden(torch.tensor([step]), pos, valid, bound)
    finally:
        del m._run
    assert ran == [3, 1, 3, 1]  # slots 0-2; slot 1 again; slots 2-4; slot 4 again


def test_speculative_steps_give_the_fill_of_one_slot_a_step(hf_dirs):
    """fp32: a step that commits guessed slots writes exactly the fill one slot a step writes."""
    from dataclasses import replace

    plain = Engine.load(EngineConfig(model_dir=hf_dirs("causal-llama"), device="cpu", precision="fp32", lookahead=0))
    fast = Engine(plain.model, plain.tokenizer, replace(plain.config, lookahead=4), plain.model_id)
    taken = 0
    for prefix in (PREFIX, LONGER, "aaaa aaaa aaaa ("):  # (after that, the random model loops: its guesses are taken)
        request = FillRequest(text=prefix + SUFFIX, holes=[Hole(len(prefix), len(prefix), 12)], language="python",
                              options=SamplingOptions(candidates=1, constrained=False))
        want, got = plain.fill(request), fast.fill(request)
        assert got.fills[0].text == want.fills[0].text, prefix
        taken += want.timings.steps - got.timings.steps
    assert taken > 0  # some guesses were right


# --------------------------------------------------------------------------- 5. token healing


HEALED = "x = {'a': 1}\n"  # ends at a bare line break: the fill writes that token again


def test_a_context_ending_at_a_line_break_is_healed(hf_dirs):
    engine = engine_of(hf_dirs("causal-llama"))
    tok = engine.tokenizer
    req = request(HEALED, "\n", max_tokens=6)
    whole = tok.encode(HEALED)
    assert tok.token_bytes(whole[-1]) == b"\n"
    p = engine.prepare(req)
    assert p.heals == [b"\n"]
    assert p.segments[0] == whole[:-1] and p.windows == [7]  # one token shorter, one slot longer
    seen = committed_rows(engine)
    result = engine.fill(req)
    ids = until_pad(seen[0], engine.model.pad_id)
    data = b"".join(tok.token_bytes(i) for i in ids)
    assert len(ids) > 1 and data.startswith(b"\n"), data  # the first token extends the healed bytes
    rest = data[1:].decode("utf-8", "replace")
    assert result.fills[0].text == rest  # the fill's text without them (nothing else cut here)
    assert tok.decode(ids) == "\n" + rest
    nl, word = tok.encode("\n")[0], tok.encode("x")[0]
    assert engine.text_of([nl, word], b"\n") == "x" and engine.text_of([nl, word]) == "\nx"
    double = tok.encode("\n\n")
    assert len(double) == 1 and engine.text_of(double, b"\n") == "\n"
    def healed(ids, after=""):  # the bytes of the tokens Engine.heal takes back
        k = engine.heal(ids, after)
        return b"".join(tok.token_bytes(t) for t in ids[len(ids) - k :])

    assert healed(tok.encode("x = (")) == b"" and healed([]) == b""
    assert healed(tok.encode("x = 1\n\n")) == b"\n\n"
    assert engine.prepare(request("x = (", "\n")).heals == [b""]
    cut = tok.encode("x = retu")  # a word cut at the hole is healed, where the text after it does not go on with it:
    # its tokens taken back together, as far as some token starts with them (" return")
    assert tok.token_bytes(cut[-1]) == b"u" and healed(cut) == b" retu" and healed(cut, "\n") == healed(cut)  # the whole word
    assert healed(cut, "r") == b"" and healed(cut, "_") == b""
    space = tok.encode("x = ")
    assert tok.token_bytes(space[-1]) == b" " and healed(space) == b" "  # a bare space too
    assert healed(tok.encode("x = '")) == b""
    for cut_at in ("std:", "a =", "x -", "a <"):  # an operator cut at the hole ("::", "==", "->", "<=")
        ids = tok.encode(cut_at)
        last = tok.token_bytes(ids[-1])
        assert last.strip() and healed(ids) == last and healed(ids, "\n") == last, cut_at
        assert healed(ids, ":") == b"" and healed(ids, "=") == b""  # the text after it goes on with it
    assert healed(tok.encode("x.")) == b"" and healed(tok.encode("f(x)")) == b""  # no operator


def test_the_healed_slot_takes_only_tokens_that_start_with_the_healed_bytes(hf_dirs):
    engine = engine_of(hf_dirs("causal-llama"))
    tok = engine.tokenizer
    prepared, lay, bound, state = engine_rows(engine, [request(HEALED, "\n", max_tokens=4)])
    assert state.only is not None and state.only[0, 0] == 0 and (state.only[0, 1:] == -1).all()
    allowed = state.only_sets[0].nonzero().flatten().tolist()
    assert allowed and all(tok.token_bytes(i).startswith(b"\n") for i in allowed)
    assert tok.encode("\n")[0] in allowed and tok.encode("x")[0] not in allowed
    sched = engine.schedule(prepared[0].request.options, sum(prepared[0].windows))
    steps = list(denoise_steps(engine.model, bound, state, sched))
    assert tok.token_bytes(int(steps[0].ids[0, 0])).startswith(b"\n")


def test_token_sets_are_the_vocabulary_scanned_and_only_the_latest_are_kept(hf_dirs, monkeypatch):
    from infill.engine import fill

    engine = engine_of(hf_dirs("causal-llama"))
    tok = engine.tokenizer
    vocab = [tok.token_bytes(i) for i in range(tok.vocab_size)]
    heads = sorted({b[:k] for b in vocab for k in (1, 2, 3) if len(b) >= k}) + [b"\n", b" ", b"zzzz-not-a-prefix"]
    monkeypatch.setattr(fill, "TOKEN_SETS", 4)
    for head in heads[:: max(1, len(heads) // 200)]:
        for anywhere in (False, True):
            got = set(engine.token_set(head, anywhere).nonzero().flatten().tolist())
            assert got == {i for i, b in enumerate(vocab) if (head in b if anywhere else b.startswith(head))}, head
        assert len(engine._token_sets) <= 4


def test_a_left_to_right_retry_may_not_start_as_the_invalid_first_round_did(hf_dirs):
    from infill.protocol import Fill, FillResult, Timings

    engine = engine_of(hf_dirs("causal-llama"))
    tok = engine.tokenizer
    text = "class S:\n    \n\nx = 1\n"  # a class's body is the hole: a header alone there has no body
    req = FillRequest(text=text, holes=[Hole(13, 13, 8)], language="python")
    p = engine.prepare(req)
    first = FillResult(fills=[Fill(text="def f(self", score=-1.0, valid=False)], timings=Timings(), model="m")
    ids = tok.encode(p.heals[0].decode() + p.indents[0] + "def f(self")
    lead = p.leads[0]
    assert ids[: len(lead)] == lead
    retry = engine.unlike(p, first)
    assert retry.bans == [(len(lead), ids[len(lead)])] and p.bans in ([], [None])
    _, _, _, state = engine_rows(engine, [], prepared=[retry])
    k = len(lead)  # the first slot after the lead may take any token but the first round's
    assert state.only is not None and int(state.only[0, k]) >= 0
    allowed = state.only_sets[int(state.only[0, k])]
    assert not allowed[ids[k]] and allowed[tok.encode("x")[0]]
    valid = FillResult(fills=[Fill(text="x = 1", score=-1.0, valid=True)], timings=Timings(), model="m")
    assert engine.unlike(p, valid) is p  # only an invalid first round is avoided
    # a fill that wrote its own indentation: that is kept, and its first word is banned (not a token of spaces)
    at = text.index("\n\n") + 1
    q = engine.prepare(FillRequest(text=text[:at] + text[at + 4 :], holes=[Hole(at, at, 8)], language="python"))
    retry = engine.unlike(q, FillResult(fills=[Fill(text="    def f(self", score=-1.0, valid=False)], timings=Timings(), model="m"))
    (k, banned), = retry.bans
    assert not tok.decode(retry.leads[0]).strip() and k == len(retry.leads[0]) and tok.decode([banned]).strip()
    assert tok.decode(retry.leads[0] + [banned]).startswith(q.heals[0].decode() + q.indents[0] + "    ")
    # a first round that wrote nothing: the retry's first slot may neither end the fill nor break its line
    for nothing in ("", "\n"):
        retry = engine.unlike(p, FillResult(fills=[Fill(text=nothing, score=-1.0, valid=False)], timings=Timings(), model="m"))
        assert retry.bans == [(len(lead), "ending")] and retry.leads == p.leads
    _, _, _, state = engine_rows(engine, [], prepared=[retry])
    allowed = state.only_sets[int(state.only[0, len(lead)])]
    breaks = engine.token_set(b"\n", anywhere=True)
    assert not allowed[engine.model.eos_id] and not (allowed & breaks).any() and allowed[tok.encode("x")[0]]
    assert int(state.only[0, len(lead) + 1]) < 0  # that slot alone


def test_a_causal_step_rule_is_one_slot_a_step_and_fewer_steps_end_the_fill_early(hf_dirs):
    """The step rule the scheduler lightens by (Engine.default_steps) is the schedule the engine
    runs, and a request's steps cap a causal fill: it ends when they are spent (a busy batch's
    elastic request does less work, as a diffusion model's takes fewer steps)."""
    engine = engine_of(hf_dirs("causal-llama"), lookahead=0)  # one token a step
    for slots in (1, 9, 32):
        assert engine.default_steps(slots) == slots == engine.schedule(SamplingOptions(), slots).steps
    assert engine.schedule(SamplingOptions(steps=3), 9).steps == 3 and engine.schedule(SamplingOptions(steps=40), 9).steps == 9
    full = engine.fill(request(PREFIX, max_tokens=12))
    short = engine.fill(request(PREFIX, max_tokens=12, steps=3))
    assert full.timings.tokens_filled > 3 and short.timings.steps <= 3 and short.timings.tokens_filled <= 3
    assert full.fills[0].text.startswith(short.fills[0].text)


# --------------------------------------------------------------------------- 6. said_all


def said(text: str, fill: str, min_tokens: int = 0) -> int | None:
    """Finisher.said_all of a fill of the one hole <FILL> of ``text``."""
    at = text.index("<FILL>")
    req = FillRequest(text=text.replace("<FILL>", ""), holes=[Hole(start=at, end=at, min_tokens=min_tokens)], language="python")
    return Finisher(None, None).said_all(0, req, 0, fill)


def test_said_all_rules():
    # the hole's line goes on after it: the first line only
    assert said("y = f(<FILL>)\nz = 2\n", "a, b\nc = 3\n") == len("a, b")
    # a blank line after code ends the fill; the blank line is not kept
    assert said("def f():\n    <FILL>\n", "x = 1\n\n") == len("x = 1\n")
    # a line indented less than the fill's first ends it (it belongs to the block around the hole)
    assert said("def f():\n    <FILL>\n", "x = 1\n    y = 2\nz = 3\n") == len("x = 1\n    y = 2\n")
    # a fill that copies the line after the hole is cut there
    src = "def f(a, b):\n    <FILL>\n    return total\n"
    assert said(src, "total = a + b\n    return total\n") == len("total = a + b\n")
    # goes on at the same indentation, or deeper: not said all yet
    assert said("def f():\n    <FILL>\n", "x = 1\n") is None
    assert said("def f():\n    <FILL>\n", "x = 1\n    y = 2\n") is None
    assert said("def f():\n    <FILL>\n", "if x:\n        y = 2\n") is None
    assert said("def f():\n    <FILL>\n\nprint(1)\n", "x = 1\n    y = [\n") is None
    # a cursor suggestion after code on its line ends with that line; an explicit hole there goes on
    assert said("def f():\n    x = <FILL>\n", "g(a,\n          b)\n") == len("g(a,")
    assert said("def f():\n    x = <FILL>\n", "g(a,\n          b)\n", min_tokens=1) is None
    # an insertion at a line's start, before code, inserts whole lines: the next line does not go on from it
    assert said("def f():\n<FILL>    return x\n", "    x = 1\n") is None
    assert said("def f():\n<FILL>    return x\n", "    x = 1\n    return x\n") == len("    x = 1\n")  # the copy cut
    assert said("def f():\n    y = <FILL>g(x)\n", "1 + \n") == len("1 + ")  # inside the line: it goes on


# --------------------------------------------------------------------------- 7. the frontier schedule


def test_a_request_with_several_holes_gets_its_greedy_fill_alone_unless_it_asks_for_more(hf_dirs):
    engine = engine_of(hf_dirs("causal-llama"), candidates=4)
    text = "def f(a, b):\n    x = a\n    y = b\n    return x\n"
    at = [text.index(" a\n"), text.index(" b\n")]
    two = FillRequest(text=text, holes=[Hole(start=i, end=i + 2, max_tokens=4) for i in at], language="python")
    assert engine.candidate_plan(two) == [(1.0, None)]  # draws are ranked for one hole only
    one = FillRequest(text=text, holes=[Hole(start=at[0], end=at[0] + 2, max_tokens=4)], language="python")
    assert len(engine.candidate_plan(one)) == 4
    asked = msgspec_replace_candidates(two, 3)
    assert len(engine.candidate_plan(asked)) == 3
    assert engine.fill(two).timings.candidates == 1


def test_frontier_commits_one_slot_per_row_per_step_in_order(hf_dirs):
    engine = engine_of(hf_dirs("causal-llama"))
    text = "def f(a, b):\n    x = (a)\n    y = (b)\n    return x\n"
    at = [text.index("a)\n"), text.index("b)\n")]  # after "(": nothing healed, every slot the window's
    reqs = [FillRequest(text=text, holes=[Hole(start=i, end=i + 1, max_tokens=4) for i in at], language="python",
                        options=SamplingOptions(constrained=False)),
            request(LONGER, "\n", max_tokens=3)]
    prepared, lay, bound, state = engine_rows(engine, reqs)
    state.no_pad = state.valid.clone()  # no fill may end early: every slot is decided in turn
    sched = engine.schedule(reqs[0].options, sum(prepared[0].windows))
    assert sched.frontier and sched.steps == 8
    row_steps = torch.tensor([engine.schedule(p.request.options, sum(p.windows)).steps for p in prepared])
    masked_before = state.masked.clone()
    m, asked = engine.model, []
    real = m.logits
    m.logits = lambda hidden: (asked.append(hidden.shape[0]), real(hidden))[1]  # the slots proposed for
    n = 0
    for step in denoise_steps(m, bound, state, sched, row_steps=row_steps):
        n += 1
        live = masked_before & (masked_before.long().cumsum(1) == 1)  # each row's first masked slot: the
        assert asked[-1] == int(live.sum())  # first hole's to its end, then the next's (a later hole reads it whole)
        assert (live <= first_masked(state.hole, masked_before)).all()
        for r in range(2):
            if masked_before[r].any():
                assert int(step.committed[r].sum()) == 1, (n, r, step.committed[r])
                assert (step.committed[r] <= live[r]).all()  # each hole's first masked slot, in order
            else:
                assert not step.committed[r].any()
        masked_before = step.masked.clone()
    assert n == 8 and not state.masked.any()
    assert (state.ids[state.valid] != engine.model.pad_id).all()
    assert (state.ids[state.valid] != engine.model.mask_id).all()


def test_a_deadline_or_the_end_of_the_budget_pads_the_rest(hf_dirs):
    engine = engine_of(hf_dirs("causal-llama"))
    pad, mask = engine.model.pad_id, engine.model.mask_id
    for deadline, row_steps, real in [(time.monotonic() - 1, None, 1), (None, torch.tensor([3]), 3)]:
        prepared, lay, bound, state = engine_rows(engine, [request(PREFIX, max_tokens=6)])
        state.no_pad = state.valid.clone()
        sched = engine.schedule(prepared[0].request.options, 6)
        steps = list(denoise_steps(engine.model, bound, state, sched, deadline=deadline, row_steps=row_steps))
        assert len(steps) == real and not state.masked.any()
        ids = state.ids[0].tolist()
        assert pad not in ids[:real] and mask not in ids  # what was decided, in order
        assert ids[real:] == [pad] * (6 - real)  # the rest pad: no garbage


# --------------------------------------------------------------------------- 8. int8 weights


def test_int8_checkpoint_runs_int8_on_the_cpu_close_to_its_float_model(hf_models, hf_dirs, tmp_path):
    m, tok = hf_models("causal-llama-int8")
    layer = m.backbone.layers[0]
    linears = [layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj, layer.self_attn.o_proj,
               layer.mlp.gate_proj, layer.mlp.up_proj, layer.mlp.down_proj]
    assert all(isinstance(x, int8.Int8Linear) and x.weight.dtype == torch.int8 for x in linears)
    assert m.backbone.embed_tokens.weight.dtype == torch.float32  # the lookup's embedding dequantized,
    head = m.hf.lm_head  # and the head multiplies its int8 rows
    assert isinstance(head, int8.Int8Linear) and head.weight.dtype == torch.int8 and head.weight.shape == (m.vocab_size, 32)
    state = load_file(str(hf_dirs("causal-llama-int8") / "model.safetensors"))
    deq = C.causal_llama(tmp_path / "deq", state=C.dequantized_state(state))
    f, _ = load(deq)
    assert not any(isinstance(x, int8.Int8Linear) for x in f.modules())
    assert m.n_params == f.n_params  # int8 weights count as parameters
    ids = tok.encode(PREFIX + SUFFIX)
    a, b = causal_logits(m, ids), causal_logits(f, ids)
    scale = b.abs().max()
    assert (a - b).abs().max() <= 2e-2 * scale, (a - b).abs().max()  # the same weights, multiplied as int8 (bf16 activations)
    # and through the seam (the context, then one slot at a time): the float model's first prediction
    # (the tiny model's logits are too flat for a greedy fill to survive bf16 rounding unchanged)
    ea, eb = Engine(m, tok, EngineConfig(device="cpu", precision="fp32", suffix_lines=0)), engine_of(deq)
    first = []
    for e in (ea, eb):
        _, _, bound, state = engine_rows(e, [request(PREFIX)])
        first.append(e.model.raw_logits(e.model.window_hidden(state.ids, state.pos, state.valid, bound)[:, 0]).float())
    assert (first[0] - first[1]).abs().max() <= 2e-2 * first[1].abs().max()


def test_int8_linear_is_the_dequantized_matmul():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(48, 32, generator=g)
    q, s = int8.quantize(w)
    assert q.dtype == torch.int8 and q.abs().max() == 127 and s.shape == (48,)
    deq = int8.dequantize(q, s, torch.float32)
    layer = int8.Int8Linear(q, s, torch.float32)
    few = torch.randn(3, 5, 32, generator=g)  # through the int8 kernel, activations rounded to bf16
    assert 3 * 5 <= int8.KERNEL_ROWS and layer(few).dtype == torch.float32
    want = few @ deq.T
    assert (layer(few) - want).abs().max() <= 1e-2 * want.abs().max()
    many = torch.randn(4, int8.KERNEL_ROWS, 32, generator=g)  # weights converted: the dense product, exact
    assert torch.allclose(layer(many), many @ deq.T, atol=1e-4)
    assert (deq - w).abs().max() <= s.max() / 2 + 1e-6  # half a step per row


def test_a_4bit_grid_is_fitted_back_from_its_int8_rounding():
    g = torch.Generator().manual_seed(1)
    w = C.on_grid(torch.randn(64, 96, generator=g))
    q, s = int8.quantize(w)
    codes, step, zero, worst = int8.fit_grid(q, 32)
    assert codes.dtype == torch.int32 and codes.min() == 0 and codes.max() == 15 and step.shape == (64, 3)
    assert worst <= 1.0  # the int8 rounding, no more
    grid = ((codes.float().view(64, 3, 32) - 8) * step[..., None] + zero[..., None]).view(64, 96) * s[:, None]
    # nearer the 4-bit weights than their int8 rounding is: the fit averages the rounding out
    assert (grid - w).abs().mean() < 0.7 * (int8.dequantize(q, s, torch.float32) - w).abs().mean()
    # weights on no grid: a fitted one strays far from them
    assert int8.fit_grid(int8.quantize(torch.randn(64, 96, generator=g))[0], 32)[3] > 3 * int8.GRID_ERROR


def test_int8_linear_on_a_grid_multiplies_its_4bit_codes_a_few_rows_at_a_time():
    g = torch.Generator().manual_seed(2)
    w = C.on_grid(torch.randn(48, 64, generator=g))
    q, s = int8.quantize(w)
    layer = int8.Int8Linear(q, s, torch.float32, grid=32)
    plain = int8.Int8Linear(q, s, torch.float32)
    assert layer.grid == 32 and plain.grid is None
    few = torch.randn(2, 5, 64, generator=g)
    want = few @ w.T
    assert (layer(few) - want).abs().max() <= 1e-2 * want.abs().max()  # the grid's weights, bf16 activations
    assert (layer(few) - want).abs().mean() < (plain(few) - want).abs().mean()  # nearer than the int8 rounding
    many = torch.randn(2, int8.KERNEL_ROWS, 64, generator=g)  # the dense product keeps the int8 weights
    assert torch.equal(layer(many), plain(many))
    # a shape the 4-bit kernel cannot take runs the int8 kernel
    assert int8.Int8Linear(q[:40], s[:40], torch.float32, grid=32).grid is None
    with pytest.raises(int8.OffGrid, match="not on a 4-bit grid in groups of 32"):
        int8.Int8Linear(*int8.quantize(torch.randn(48, 64, generator=g)), torch.float32, grid=32)


def set_config(directory, **fields) -> None:
    path = directory / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **fields}))


def test_a_checkpoint_that_says_its_weights_lie_on_a_grid_is_run_on_it_and_checked(hf_dirs, tmp_path, monkeypatch):
    monkeypatch.setattr(int8, "grid_kernel_fast", lambda: True)  # (a CPU whose 4-bit kernel is vectorized)
    state = C.llama_state(dict(C.CAUSAL_LLAMA), tied=False, seed=6)
    grid = C.causal_llama(tmp_path / "grid", state=C.int8_state({k: C.on_grid(v) if v.ndim == 2 and v.shape[1] % 32 == 0 else v
                                                                  for k, v in state.items()}))
    claim = {"bits": 4, "group": 32, "prefix": "model.layers."}
    set_config(grid, quantization={"grid": claim})
    m, tok = load(grid)
    layer = m.backbone.layers[0]
    assert layer.self_attn.q_proj.grid == 32 and layer.mlp.gate_proj.grid == 32
    assert layer.mlp.down_proj.grid is None  # 48 inputs: not groups of 32, the int8 kernel
    assert m.hf.lm_head.grid is None  # outside the prefix
    plain = C.causal_llama(tmp_path / "plain", state=load_file(str(grid / "model.safetensors")))
    ids = tok.encode(PREFIX + SUFFIX)[:12]
    a, b = causal_logits(m, ids), causal_logits(load(plain)[0], ids)
    assert (a - b).abs().max() <= 2e-2 * b.abs().max()
    # a claim the weights belie, and a claim that is not one: one clear line each
    false = C.causal_llama(tmp_path / "false", variant="int8")
    set_config(false, quantization={"grid": claim})
    with pytest.raises(ModelLoadError, match=r"model.layers.0.[a-z_.]+.weight: its int8 weights are not on a 4-bit grid .* as config.json's quantization.grid claims"):
        load(false)
    set_config(false, quantization={"grid": {"bits": 3, "group": 32}})
    with pytest.raises(ModelLoadError, match=r"quantization.grid must be"):
        load(false)
    # where the CPU's 4-bit kernel is not vectorized, the int8 kernel runs (the claim unused)
    monkeypatch.setattr(int8, "grid_kernel_fast", lambda: False)
    assert load(grid)[0].backbone.layers[0].self_attn.q_proj.grid is None


@pytest.mark.parametrize("case, message", [
    ("no-scale", "model.layers.0.self_attn.q_proj.weight is int8 with no model.layers.0.self_attn.q_proj.weight_scale"),
    ("stray-scale", "model.norm.weight_scale scales no int8 weight"),
])
def test_int8_weights_and_scales_come_in_pairs(case, message, hf_dirs, tmp_path):
    state = load_file(str(hf_dirs("causal-llama-int8") / "model.safetensors"))
    if case == "no-scale":
        del state["model.layers.0.self_attn.q_proj.weight_scale"]
    else:
        state["model.norm.weight_scale"] = torch.ones(1)
    d = C.causal_llama(tmp_path / case, state=state)
    with pytest.raises(ModelLoadError) as e:
        load(d)
    assert message in str(e.value) and "\n" not in str(e.value), str(e.value)


# --------------------------------------------------------------------------- 9. import-gguf


GGUF_CFG = dict(C.SMALL, vocab_size=404, max_position_embeddings=2048, rms_norm_eps=1e-5)


def permute(w: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's converter's query/key row order."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_gguf(path, state: dict[str, torch.Tensor], cfg: dict = GGUF_CFG, layer_type: str = "F32") -> None:
    """A tiny llama GGUF file of ``state``, its layers' matrices stored as ``layer_type`` blocks."""
    import gguf
    from gguf.quants import quantize

    tok = json.loads(C.bpe_tokenizer(C.CAUSAL_SPECIALS).to_str())
    vocab = {**tok["model"]["vocab"], **{a["content"]: a["id"] for a in tok["added_tokens"]}}
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda x: x[1])]
    assert [vocab[t] for t in tokens] == list(range(404))
    merges = [" ".join(m) if isinstance(m, list) else m for m in tok["model"]["merges"]]
    types = [3 if i >= 400 else 1 for i in range(len(tokens))]
    H, K = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny-llama")
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(H)
    w.add_head_count_kv(K)
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_rope_freq_base(10000.0)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_merges(merges)
    w.add_token_types(types)
    w.add_bos_token_id(400)
    w.add_eos_token_id(400)
    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight"}
    layer = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm", "self_attn.q_proj": "attn_q",
             "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
             "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    for k, v in state.items():
        a = v.float().numpy()
        if k in names:
            name = names[k]
        else:
            _, _, i, *rest = k.split(".")
            part = ".".join(rest[:-1])
            name = f"blk.{i}.{layer[part]}.weight"
            if part == "self_attn.q_proj":
                a = permute(a, H)
            elif part == "self_attn.k_proj":
                a = permute(a, K)
        a = np.ascontiguousarray(a, dtype=np.float32)
        if name.startswith("blk.") and a.ndim == 2 and layer_type != "F32":
            kind = gguf.GGMLQuantizationType[layer_type]
            w.add_tensor(name, quantize(a, kind), raw_shape=quantize(a, kind).shape, raw_dtype=kind)
        else:
            w.add_tensor(name, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def llama_from(state: dict[str, torch.Tensor], shape: dict = GGUF_CFG):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(**shape, tie_word_embeddings=True, hidden_act="silu",
                      rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    model = LlamaForCausalLM(cfg).eval()
    model.load_state_dict({**state, "lm_head.weight": state["model.embed_tokens.weight"]})
    return model


def test_import_gguf_gives_the_pretrained_network(tmp_path, capsys):
    pytest.importorskip("gguf")
    from infill.cli import main

    state = C.llama_state(GGUF_CFG, tied=True, seed=11)
    src, out = tmp_path / "tiny.gguf", tmp_path / "imported"
    write_gguf(src, state)
    assert main(["import-gguf", str(src), str(out), "--languages", "python"]) == 0
    assert "wrote" in capsys.readouterr().out
    config = json.loads((out / "config.json").read_text())
    assert config["eos_token_id"] == 400 and config["mask_token_id"] == 403 and config["tie_word_embeddings"] is True
    m, tok = load(out)
    assert isinstance(m, CausalLM) and m.mask_id == 403 and m.eos_id == 400
    assert isinstance(m.backbone.layers[0].self_attn.q_proj, int8.Int8Linear)
    assert isinstance(m.hf.lm_head, int8.Int8Linear)  # the tied head multiplies the embedding's int8 rows
    assert m.n_params == sum(v.numel() for k, v in state.items() if k != "lm_head.weight")  # counted once
    assert tok.special_ids >= {400, 401, 402, 403} and tok.text_of(400) == "<|endoftext|>"
    ids = [266, 334, 276, 11, 264, 259, 257, 295, 271, 10, 42, 7, 99, 300, 12]
    got = causal_logits(m, ids)
    with torch.no_grad():
        want = llama_from(state)(torch.tensor([ids])).logits[0]
        stored = llama_from(as_imported(state))(torch.tensor([ids])).logits[0]
        wrong = llama_from({k: torch.from_numpy(permute(v.numpy(), 4 if "q_proj" in k else 2)) if "q_proj" in k or "k_proj" in k
                            else v for k, v in state.items()})(torch.tensor([ids])).logits[0]
    scale = want.abs().max()
    # what it stores, multiplied with bf16 activations (the int8 kernel's, a few rows at a time)
    assert (got - stored).abs().max() < 2e-2 * scale, (got - stored).abs().max()
    err, off = (got - want).abs().max(), (got - wrong).abs().max()
    assert err < 0.05 * scale, (err, scale)  # int8 weights, bf16 scales and norms: a few percent of the range
    assert off > 10 * err, (off, err)  # the query/key rows put back in Hugging Face's order matter
    assert int(got[-1].argmax()) == int(want[-1].argmax())


def test_import_gguf_of_4bit_blocks_runs_them_on_their_grid(tmp_path, monkeypatch):
    gguf = pytest.importorskip("gguf")
    monkeypatch.setattr(int8, "grid_kernel_fast", lambda: True)
    from gguf.quants import dequantize, quantize

    from infill.cli import main

    cfg = dict(GGUF_CFG, intermediate_size=64)  # every layer matrix in whole blocks of 32
    state = C.llama_state(cfg, tied=True, seed=12)
    src, out = tmp_path / "tiny.gguf", tmp_path / "imported"
    write_gguf(src, state, cfg, layer_type="Q4_1")
    assert main(["import-gguf", str(src), str(out), "--languages", "python"]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["quantization"]["grid"] == {"bits": 4, "group": 32, "prefix": "model.layers."}
    m, _ = load(out)
    assert all(x.grid == 32 for x in m.backbone.modules() if isinstance(x, int8.Int8Linear))
    q4 = gguf.GGMLQuantizationType.Q4_1  # the file's weights
    blocks = {k: torch.from_numpy(dequantize(quantize(v.numpy(), q4), q4).copy()) if k.startswith("model.layers.") and v.ndim == 2
              else v for k, v in state.items()}
    ids = [266, 334, 276, 11, 264, 259, 257, 295, 271, 10, 42, 7]
    with torch.no_grad():
        want = llama_from(blocks, cfg)(torch.tensor([ids])).logits[0]
    got = causal_logits(m, ids)
    assert (got - want).abs().max() < 0.05 * want.abs().max()
    # the same file's F32 import claims no grid
    write_gguf(src, state, cfg)
    assert main(["import-gguf", str(src), str(tmp_path / "f32"), "--languages", "python"]) == 0
    assert "grid" not in json.loads((tmp_path / "f32" / "config.json").read_text())["quantization"]


def as_imported(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The float tensors the importer's layout stands for: int8 matrices with bf16 per-row scales,
    bf16 vectors."""
    out = {}
    for k, v in state.items():
        if v.ndim == 2:
            q, s = int8.quantize(v)
            out[k] = int8.dequantize(q, s.to(torch.bfloat16), torch.float32)
        else:
            out[k] = v.to(torch.bfloat16).float()
    return out


# --------------------------------------------------------------------------- 10. the command line


def test_infill_fill_with_a_causal_checkpoint(hf_dirs, tmp_path, capsys):
    from infill.cli import main

    f = tmp_path / "m.py"
    f.write_text("def add(a, b):\n    return a<FILL>\n\n\ndef sub(a, b):\n    return a - b\n")
    rc = main(["fill", str(f), "--model", str(hf_dirs("causal-llama")), "--device", "cpu"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    name = str(f).lstrip("/")
    assert f"--- a/{name}" in out and f"+++ b/{name}" in out and "@@" in out, out
    assert "-    return a<FILL>\n" in out and "\n+    return a" in out  # the marker's line, filled
    assert "<FILL>" in f.read_text()  # a diff, not written


def test_the_prefix_cache_keeps_many_documents(hf_dirs):
    """Eight documents typed in turn keep their context states (an LRU of a few rows thrashed and
    re-ran every document's context at every keystroke)."""
    engine = engine_of(hf_dirs("causal-llama"), lookahead=0)  # (one window token a call: a context run stands out)
    m = engine.model
    docs = [f"def f{i}(a, b):\n    return a + b * {i} +" for i in range(8)]
    for d in docs:
        engine.fill(request(d))
    calls = model_calls(m)
    for d in docs:
        engine.fill(request(d))
    assert calls and all(n == 1 for _, n in calls)  # no document's context ran again


def test_a_slot_joining_a_running_batch_leaves_the_others_windows_as_they_were(hf_dirs, monkeypatch):
    """infill serve's stepper with a causal model: when a request joins (or leaves) the batch, the
    rows already running keep their window states (CausalBound.take and join): the next call runs
    only their newly committed slot, not their whole window again; and every fill is the one its
    request gets alone."""
    from infill.engine.stepper import Stepper

    engine = engine_of(hf_dirs("causal-llama"), lookahead=0)  # one window token a row a call
    first, second, third = request(PREFIX, max_tokens=12), request(LONGER, max_tokens=12), request("import os\n\nx = (", max_tokens=12)
    alone = [engine.fill(r).fills[0].text for r in (first, second, third)]
    fed = []
    real = CausalLM._feed

    def counting(self, st, ids, pos, new):
        fed.append(new.sum(1).tolist())
        return real(self, st, ids, pos, new)

    monkeypatch.setattr(CausalLM, "_feed", counting)
    stepper = Stepper(engine)
    a = stepper.add(first)
    for _ in range(3):
        stepper.step()
    fed.clear()
    b = stepper.add(second)
    stepper.step()
    assert fed[0][0] <= 1, fed  # the running row's next slot alone; its window is not run again
    st = stepper._rows.ctx.state  # the joined rows, written into a buffer that was not zeroed first
    for r in range(st.key_ok.shape[0]):
        L = int(st.key_ok[r].sum())
        assert bool(st.key_ok[r, :L].all()) and all(bool((k[r, :, L : st.key_ok.shape[1]] == 0).all()) for k, _ in st.kv)
    c = stepper.add(third)
    for _ in range(100):
        if not stepper.slots:
            break
        stepper.step()
    assert [s.error for s in (a, b, c)] == [None, None, None]
    assert [s.result.fills[0].text for s in (a, b, c)] == alone


def test_requests_joining_leaving_and_cancelled_at_random_each_get_their_fill_alone(hf_dirs):
    """Churn through infill serve's stepper with a causal model (window states carried across
    joins, rows narrowed as they finish, drafts, several candidates): every request that is not
    cancelled gets exactly the fill it gets alone, and nothing is left running."""
    import random
    import threading

    from infill.engine.stepper import Stepper

    engine = engine_of(hf_dirs("causal-llama"), candidates=2)
    prefixes = [PREFIX, LONGER, "import os\n\nx = (", "def f(a):\n    return (a,", "class A:\n    def g(self):\n        return"]
    requests = [request(p, max_tokens=n) for p in prefixes for n in (4, 10)]
    alone = [engine.fill(r).fills[0].text for r in requests]
    rng = random.Random(7)
    stepper, waiting, slots = Stepper(engine), list(range(len(requests))), {}
    for _ in range(400):
        if waiting and rng.random() < 0.5:
            i = waiting.pop(rng.randrange(len(waiting)))
            flag = threading.Event()
            slots[i] = (stepper.add(requests[i], cancel=flag), flag, rng.random() < 0.2)
        for slot, flag, cancel in slots.values():
            if cancel and not slot.done and rng.random() < 0.3:
                flag.set()
        stepper.step()
        if not waiting and not stepper.slots:
            break
    assert not stepper.slots and not waiting
    for i, (slot, flag, cancel) in slots.items():
        if not flag.is_set():
            assert slot.error is None and slot.result.fills[0].text == alone[i], (i, slot.error)


# --------------------------------------------------------------------------- 9. ranked draws


@torch.no_grad()
def likelihood(ref, context: list[int], continuation: list[int]) -> float:
    """transformers' summed log-probability of ``continuation`` after ``context``."""
    ids = torch.tensor([context + continuation])
    logp = torch.log_softmax(ref(ids).logits[0].float(), dim=-1)
    return float(sum(logp[len(context) - 1 + i, t] for i, t in enumerate(continuation)))


def test_continuation_logprob_is_the_checkpoints_likelihood(hf_dirs):
    engine = engine_of(hf_dirs("causal-llama"))
    tok, ref = engine.tokenizer, reference(hf_dirs("causal-llama"))
    context = tok.encode(PREFIX)
    conts = [tok.encode(" b\n" + SUFFIX[1:]), tok.encode(" a * 2"), tok.encode(" b")]
    got = engine.model.continuation_logprob(context, conts)
    want = [likelihood(ref, context, c) for c in conts]
    assert np.allclose(got, want, atol=1e-3), (got, want)  # the context's states from the cache, the rest in one batch
    assert engine.model.continuation_logprob(context, [conts[1]])[0] == pytest.approx(want[1], abs=1e-3)  # alone: the same
    assert got[0] < got[2] < 0  # more tokens, less likely


def test_a_greedy_row_among_draws_takes_the_argmax_and_a_rows_draws_are_its_own():
    from infill.decode.sampler import Schedule, propose, row_noise

    g = torch.Generator().manual_seed(0)
    logp = torch.log_softmax(torch.randn(3, 50, generator=g), dim=-1)
    sched = Schedule(steps=1, temperature=5.0, policy="left-to-right")  # hot: draws seldom the argmax
    draws = [propose(logp, sched, row_noise([None, torch.Generator().manual_seed(s), torch.Generator().manual_seed(s + 1)],
                                             [1, 1, 1], 50))[0] for s in range(20)]
    assert all(int(d[0]) == int(logp[0].argmax()) for d in draws)  # the greedy row
    assert len({int(d[1]) for d in draws}) > 3  # the sampled rows draw
    alone = row_noise([torch.Generator().manual_seed(3)], [2], 50)
    together = row_noise([None, torch.Generator().manual_seed(3), torch.Generator().manual_seed(9)], [1, 2, 1], 50)
    assert torch.equal(alone, together[1:3])  # a row's noise does not depend on the rows beside it


def test_candidates_are_the_greedy_fill_and_draws_ranked_by_the_text_after_the_hole(hf_dirs):
    engine = engine_of(hf_dirs("causal-llama"), candidates=4)
    tok, ref = engine.tokenizer, reference(hf_dirs("causal-llama"))
    seen, scored = committed_rows(engine), []
    real = engine.model.continuation_logprob
    engine.model.continuation_logprob = lambda ctx, conts: scored.append((ctx, conts, real(ctx, conts))) or scored[-1][2]
    req = request(PREFIX, max_tokens=6)
    result = engine.fill(req)
    assert result.timings.candidates == 4 and len(seen) == 4 and result.timings.rank_ms > 0
    want = greedy(engine.model, ref, tok.encode(PREFIX), 6)
    assert until_pad(seen[0], engine.model.pad_id) == [t for t in want if t != engine.model.pad_id]  # the first row greedy
    assert len({tuple(s.tolist()) for s in seen}) > 1  # the others draws
    (ctx, conts, scores), = scored  # one ranking, over the distinct fills, with the text after the hole
    assert ctx == tok.encode(PREFIX) and len(conts) >= 2
    after = SUFFIX  # its first lines of code (four: all of it here)
    texts = [tok.decode(c) for c in conts]
    assert all(t.endswith(after) for t in texts)
    best = texts[int(np.argmax(scores))]
    assert result.fills[0].text == best[: len(best) - len(after)]
    assert np.allclose(scores, [likelihood(ref, ctx, c) for c in conts], atol=1e-3)
    engine.model.continuation_logprob = real
    one = engine_of(hf_dirs("causal-llama"), candidates=4).fill(msgspec_replace_candidates(req, 1))
    assert one.timings.candidates == 1  # a request that asks for one row gets the greedy fill, unranked


def test_left_behind_names_the_draws_far_under_a_finished_row_of_their_request():
    from infill.engine.fill import left_behind

    rows, seeds = [0, 0, 0, 1, 1], [None, 1, 2, None, 1]  # two requests, each a greedy row (seed None) and draws
    scores, writing = [-1.0, -30.0, -5.0, -50.0, -90.0], [False, True, True, True, True]
    assert left_behind(scores, writing, rows, seeds, 20.0, {0}) == [1]  # request 1 has no finished row yet
    assert left_behind(scores, writing, rows, seeds, 20.0, set()) == []  # a finished row that does not count (blank)
    assert left_behind([-30.0, -1.0, -5.0], [True, False, True], [0, 0, 0], [None, 1, 2], 20.0, {1}) == []  # greedy
    assert left_behind([-1.0, -21.0], [False, True], [0, 0], [None, 1], 20.0, {0}) == []  # exactly the gap under


def test_draws_far_under_a_finished_candidate_stop_and_are_no_candidates(hf_dirs):
    """EngineConfig.drop_behind: a draw whose committed tokens score that far under a finished row
    of its request stops there and is never finished or ranked; the rows kept write what they
    write with every row run to its end, and infill serve's stepper drops the same rows."""
    from infill.engine.stepper import Stepper

    req = request(LONGER, max_tokens=16)
    full = engine_of(hf_dirs("causal-llama"), candidates=8, drop_behind=None)
    everyone = committed_rows(full)
    want = full.fill(req)
    cut = engine_of(hf_dirs("causal-llama"), candidates=8, drop_behind=0.0)  # any draw under a finished row stops
    kept, dropped, real = committed_rows(cut), [], cut.drop_behind

    def spy(state, rows, prepared, seeds, ends, behind):
        real(state, rows, prepared, seeds, ends, behind)
        dropped.append(set(behind.dropped))

    cut.drop_behind = spy
    got = cut.fill(req)
    gone = dropped[-1]
    assert gone and 0 not in gone, "some draw was dropped, never the greedy row"
    assert len(kept) == 8 - len(gone) and got.timings.candidates == 8
    stay = [r for r in range(8) if r not in gone]
    pad = cut.model.pad_id
    assert all(until_pad(k, pad) == until_pad(everyone[r], pad) for k, r in zip(kept, stay)), "kept rows wrote the same"
    assert got.timings.steps <= want.timings.steps
    stepper = Stepper(cut)
    kept.clear()
    slot = stepper.add(req)
    while stepper.slots:
        stepper.step()
    assert slot.error is None and slot.behind.dropped == gone and slot.result.fills[0].text == got.fills[0].text
    assert len(kept) == 8 - len(gone)


def msgspec_replace_candidates(req: FillRequest, n: int) -> FillRequest:
    import msgspec

    return msgspec.structs.replace(req, options=msgspec.structs.replace(req.options, candidates=n))


# --------------------------------------------------------------------------- 10. echo branches


def test_a_ranked_whole_line_fill_that_echoes_the_next_line_branches_off_it(hf_dirs):
    from infill.protocol import Fill, FillResult, Timings

    engine = engine_of(hf_dirs("causal-llama"), candidates=4)
    tok = engine.tokenizer
    text = "def f(a):\n    x = a\n    return x\n"
    at = text.index("    return")
    req = FillRequest(text=text, holes=[Hole(start=at, end=at, max_tokens=8, min_tokens=1)], language="python")
    p = engine.prepare(req)
    echo = tok.encode(p.heals[0].decode() + "    return x\n")  # after the healed line break, as a fill writes it
    k0 = next(i for i, t in enumerate(echo) if tok.decode([t]).strip())
    for fill in ("    ", "    return", ""):  # blank, or the next line cut short: an echo
        branches = engine.echo_branches(p, FillResult([Fill(text=fill, score=-1.0, valid=True)], Timings(), "m"))
        assert [b.leads[0] for b in branches] == [echo[: k0 + j] for j in range(len(branches))] and len(branches) >= 2
        assert [b.bans[0] for b in branches] == [(k0 + j, echo[k0 + j]) for j in range(len(branches))]
        assert all(b.request.options.candidates == 1 for b in branches)  # each the greedy fill of its branch
    for fill in ("    y = 2\n", "    return x\n"):  # other code, or a whole line: no echo to branch off
        assert engine.echo_branches(p, FillResult([Fill(text=fill, score=-1.0, valid=True)], Timings(), "m")) == []
    one = engine_of(hf_dirs("causal-llama"), candidates=1)  # unranked: nothing to choose with
    assert one.echo_branches(one.prepare(req), FillResult([Fill(text="", score=-1.0, valid=True)], Timings(), "m")) == []
    mid = FillRequest(text=text, holes=[Hole(start=at + 4, end=at + 4, min_tokens=1)], language="python")  # code after it
    assert engine.echo_branches(engine.prepare(mid), FillResult([Fill(text="", score=-1.0, valid=True)], Timings(), "m")) == []
    # a branch's banned token is ruled out at its slot, its lead committed before it
    b = engine.echo_branches(p, FillResult([Fill(text="", score=-1.0, valid=True)], Timings(), "m"))[1]
    prepared, lay, bound, state = engine_rows(engine, [b.request], prepared=[b])
    slot = int((state.hole[0] == 0).nonzero()[k0 + 1])
    assert state.ids[0, slot - 1] == echo[k0] and not state.masked[0, slot - 1]
    allowed = state.only_sets[state.only[0, slot]]
    assert not allowed[echo[k0 + 1]] and int(allowed.sum()) == engine.model.vocab_size - 1
    # and through fill: the branches' fills are ranked with the first one
    result = engine.fill(req)
    assert result.fills[0].valid is not False


def test_a_ranked_fill_that_leaves_its_document_broken_branches_into_one_that_mends_it(hf_dirs):
    from infill.protocol import Fill, FillResult, Timings

    engine = engine_of(hf_dirs("causal-llama"), candidates=4)
    tok = engine.tokenizer
    text = "function f(x) {\n  if (x) {\n    a();\n  }\n    b();\n  }\n  return 1;\n}\n"  # `else {` cut after `}`
    at = text.index("  }\n    b") + 3
    req = FillRequest(text=text, holes=[Hole(start=at, end=at, max_tokens=8)], language="javascript")
    p = engine.prepare(req)

    def result(fill):
        return FillResult([Fill(text=fill, score=-1.0, valid=True)], Timings(), "m")

    b, fresh = engine.mend_branch(p, result(" else"))  # valid, but the stray '}' stays: the line goes on from it
    assert tok.decode(b.leads[0]) == p.heals[0].decode() + " else" and b.bans == [None]
    assert b.shape.mends and not p.shape.mends  # it may not end or break its line before it opens the block again
    # and a line of its own that may not start as " else" did: its leading whitespace kept, its first word banned
    toks = tok.encode(p.heals[0].decode() + " else")
    k0 = next(k for k, t in enumerate(toks) if tok.decode([t]).strip())
    assert fresh.leads == [toks[:k0]] and fresh.shape.mends and fresh.bans == [(k0, toks[k0])]
    assert engine.first_word(p, " else") == (toks[:k0], (k0, toks[k0]))
    assert b.request.options.candidates == 1
    assert engine.mend_branch(p, result(" else {")) == []  # it mends the document: nothing to branch
    # a hole where a whole line stood (`if (x) {` cut): the fresh line keeps the indentation moved into
    # the hole and bans the fill's first word, not its indentation (a ban there only shifts the line)
    cut = "function f(x) {\n  a();\n\n    b();\n  }\n  return 1;\n}\n"
    line = engine.prepare(FillRequest(text=cut, holes=[Hole(start=cut.index("\n\n") + 1, end=cut.index("\n\n") + 1, max_tokens=8)],
                                      language="javascript"))
    branches = engine.mend_branch(line, result("b();"))
    # a fill that broke its line first (`\n  b();`): its first line of code is the hole's line the branches take
    broke = engine.mend_branch(line, result("\n    b();"))
    assert tok.decode(broke[0].leads[0]) == tok.decode(branches[0].leads[0]) == line.heals[0].decode() + line.indents[0] + "b();"
    # (and lines begun as the words that open such a block: the language's example `if (x) {` mends it)
    assert "if" in [tok.decode(f.leads[0]).strip() for f in branches if f.bans[0] is None]
    (fresh,) = [f for f in branches if f.bans[0] is not None]
    assert tok.decode(fresh.leads[0]) == line.heals[0].decode() + line.indents[0]
    assert tok.decode([fresh.bans[0][1]]).strip() and fresh.bans[0][0] == len(fresh.leads[0])
    # an invalid fill branches too where the text after its hole is a block's body whose opening line the cut took
    invalid = FillResult([Fill(text=")", score=-1.0, valid=False)], Timings(), "m")
    assert [tok.decode(x.leads[0]) for x in engine.mend_branch(p, invalid)][0] == p.heals[0].decode() + ")"
    broken = "function f(x) {\n  let y = ;\n  return 1;\n}\n"  # broken elsewhere: no bracket a fill could open
    at2 = broken.index("return 1;") + len("return 1;")
    other = engine.prepare(FillRequest(text=broken, holes=[Hole(start=at2, end=at2, max_tokens=8)], language="javascript"))
    assert engine.mend_branch(other, result(" // one")) == []
    assert engine.mend_branch(other, invalid) == []  # nor an invalid fill there: no body lost its opening line
    # an invalid fill where a line that closed a block and opened the next was cut (a try owes its
    # catch): one branch, begun by closing the block the text after the hole closes, that must open one
    java = "class A {\n  void f() {\n    try {\n      g();\n    \n      h();\n    }\n  }\n}\n"
    jat = java.index("    \n      h") + 4
    jp = engine.prepare(FillRequest(text=java, holes=[Hole(start=jat, end=jat, max_tokens=8)], language="java"))
    (reopen,) = engine.mend_branch(jp, FillResult([Fill(text="h();", score=-1.0, valid=False)], Timings(), "m"))
    assert tok.decode(reopen.leads[0]) == jp.heals[0].decode() + jp.indents[0] + "}" and reopen.shape.mends
    # a callback's opening line cut (`run(() => {`): a branch whose fill the model writes before the
    # document's own such lines' end, read after the hole and put into the fill (Shape.opener)
    cb = "function f() {\n  run(() => {\n    a();\n  });\n  \n    b();\n  });\n}\n"
    cat = cb.index("\n  \n") + 3
    cp = engine.prepare(FillRequest(text=cb, holes=[Hole(start=cat, end=cat, max_tokens=8)], language="javascript"))
    tails = [x for x in engine.mend_branch(cp, FillResult([Fill(text="b();", score=-1.0, valid=False)], Timings(), "m")) if x.shape.opener]
    # (the document's own first; then the language's example that it has no line of)
    assert [x.shape.opener for x in tails] == ["(() => {", "(function () {"]
    tail = tails[0]
    assert not tail.shape.mends and tail.leads == cp.leads
    # the text after the hole, as far as the context holds it, reads the tail first (in the same budget)
    assert tok.decode(tail.segments[-1]).startswith("(() => {") and len(tail.segments[-1]) == len(cp.segments[-1]) > 0
    assert tail.segments[:-1] == cp.segments[:-1] and tail.request.options.candidates == 1
    got = [None]
    with torch.inference_mode():
        engine._fill_prepared([tail], [0], got, None, None, None)
    assert got[0].fills[0].text.endswith("(() => {")  # the tail goes into the fill (judged with it)
    one = engine_of(hf_dirs("causal-llama"), candidates=1)  # unranked: nothing to choose with
    assert one.mend_branch(one.prepare(req), result(" else")) == []
    got = [None]  # (the random model's branch writes junk on its line, which opens nothing: it adds no error, but
    # the block's `}` stays stray, so the fill is reported invalid: SyntaxConstraint.strays)
    with torch.inference_mode():
        engine._fill_prepared([b], [0], got, None, None, None)
    assert got[0].fills[0].text.startswith(" else") and got[0].fills[0].valid is False
    result_ = engine.fill(req)  # valid only where it mends the document (the random model's seldom does)
    from infill.syntax.constraint import is_clean

    assert result_.fills[0].valid is (is_clean("javascript", text, [(at, at)], [result_.fills[0].text]) is True)
