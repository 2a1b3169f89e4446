"""A causal model's window adapter (infill/model/hf/adapter.py): on for the window and the context
token before it, off for the context; a fill runs what the training recipe
(infill/train/window_adapter.py) trained; loading refuses a broken one with one line; the engine
shows an adapted model the lines further down; ``infill adapt`` trains and resumes in pieces.
Tiny random checkpoints (hf_checkpoints.py), fp32 on the CPU."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors.torch import save_file

import hf_checkpoints as C
from infill.engine.fill import Engine, EngineConfig
from infill.errors import ModelLoadError
from infill.model import registry
from infill.model.hf import adapter as window_adapter
from infill.protocol import FillRequest, Hole
from infill.train import window_adapter as recipe

ATOL = 1e-4
PREFIX = "def add(a, b):\n    total = a + b\n    return max(a,"
TARGET = " b) + total\n"


def adapted_dir(base, directory, rank=4, suffix_lines=3, scale_b=0.5, seed=0, **entry):
    """A copy of checkpoint ``base`` with a random adapter (B not zero, so it changes states)."""
    shutil.copytree(base, directory)
    data = json.loads((directory / "config.json").read_text())
    cfg = window_adapter.AdapterConfig(rank=rank, alpha=2.0 * rank, suffix_lines=suffix_lines)
    g = torch.Generator().manual_seed(seed)
    tensors = {}
    for i in range(data["num_hidden_layers"]):
        for name in cfg.projections:
            inner = data["intermediate_size"] if name == "down_proj" else data["hidden_size"]
            heads = data["num_attention_heads"]
            kv = data["num_key_value_heads"] * data["hidden_size"] // heads
            outer = {"k_proj": kv, "v_proj": kv, "gate_proj": data["intermediate_size"],
                     "up_proj": data["intermediate_size"]}.get(name, data["hidden_size"])
            tensors[f"layers.{i}.{name}.A"] = torch.randn(rank, inner, generator=g) / inner ** 0.5
            tensors[f"layers.{i}.{name}.B"] = torch.randn(outer, rank, generator=g) * scale_b
    save_file(tensors, str(directory / cfg.file))
    data["adapter"] = {**cfg.to_json(), **entry}
    (directory / "config.json").write_text(json.dumps(data))
    return directory


def load(directory):
    return registry.load(directory, "cpu", torch.float32)


def slot_logits(model, tok, prefix: str, target: list[int]) -> torch.Tensor:
    """The model's logits for each target slot, fed the target slot by slot (a frontier fill)."""
    pre = tok.encode(prefix)
    W = len(target)
    ctx = model.join_segments([model.encode_segments([pre])])
    bound = model.bind_context(ctx, torch.arange(1), torch.arange(len(pre))[None])
    ids = torch.full((1, W), model.mask_id)
    pos = torch.arange(len(pre), len(pre) + W)[None]
    valid = torch.ones((1, W), dtype=torch.bool)
    out = []
    for j in range(W):
        h = model.window_hidden(ids, pos, valid, bound)
        out.append(model.raw_logits(h[:, j])[0])
        ids[0, j] = target[j]
    return torch.stack(out)


def test_a_fill_runs_what_the_recipe_trains(hf_dirs, tmp_path):
    """The states a fill reads (window_hidden, slot by slot) are the recipe's: the context but its
    last token pretrained, that token and the slots adapted."""
    m, tok = load(adapted_dir(hf_dirs("causal-llama"), tmp_path / "m"))
    assert m.adapter is not None and m.capabilities.suffix_lines == 3
    target = tok.encode(TARGET)
    got = slot_logits(m, tok, PREFIX, target)
    want, _ = recipe.target_logits(m, [recipe.Example(tok.encode(PREFIX), target, len(target))])
    torch.testing.assert_close(got, want[0, : len(target)], atol=ATOL, rtol=0)
    plain, _ = load(hf_dirs("causal-llama"))
    unadapted = slot_logits(plain, tok, PREFIX, target)
    assert (got - unadapted).abs().max() > 0.1  # the adapter does change what the window reads


def test_the_token_before_the_hole_runs_adapted_with_the_slots_drafted_in_the_first_call(hf_dirs, tmp_path):
    """A first call that feeds drafted slots runs the anchor in the same call: one call, the same states."""
    from test_causal import model_calls

    m, tok = load(adapted_dir(hf_dirs("causal-llama"), tmp_path / "m"))
    pre, target = tok.encode(PREFIX), tok.encode(TARGET)
    W = len(target)
    bound = m.bind_context(m.join_segments([m.encode_segments([pre])]), torch.arange(1), torch.arange(len(pre))[None])
    ids = torch.full((1, W), m.mask_id)
    ids[0, :3] = torch.tensor(target[:3])  # three slots drafted at the first step
    pos = torch.arange(len(pre), len(pre) + W)[None]
    calls = model_calls(m)
    h = m.window_hidden(ids, pos, torch.ones((1, W), dtype=torch.bool), bound)
    assert len(calls) == 2 and calls[1] == (1, 4)  # the context, then the anchor and the three slots in one
    want, _ = recipe.target_logits(m, [recipe.Example(pre, target, W)])
    torch.testing.assert_close(m.raw_logits(h[0, :4]), want[0, :4], atol=ATOL, rtol=0)


def test_a_keystroke_that_changes_only_the_token_before_the_hole_runs_it_adapted_alone(hf_dirs, tmp_path):
    """Where the kept context holds all but the last token (a keystroke changed only the token
    before the cursor), that token is not run unadapted first: the first window call runs it
    adapted with the slots, the states are the recipe's all the same, and the kept row stays the
    one without it, pretrained."""
    from test_causal import model_calls

    m, tok = load(adapted_dir(hf_dirs("causal-llama"), tmp_path / "m"))
    pre, target = tok.encode(PREFIX), tok.encode(TARGET)
    W = len(target)
    slot_logits(m, tok, PREFIX, target)  # the document before the keystroke: its context kept
    typed = pre[:-1] + [target[0]]  # the keystroke changed the last token
    assert typed != pre
    bound = m.bind_context(m.join_segments([m.encode_segments([typed])]), torch.arange(1), torch.arange(len(typed))[None])
    ids = torch.full((1, W), m.mask_id)
    pos = torch.arange(len(typed), len(typed) + W)[None]
    calls = model_calls(m)
    h = m.window_hidden(ids, pos, torch.ones((1, W), dtype=torch.bool), bound)
    assert calls == [(1, 1)]  # no context call first: the token before the hole alone, adapted
    want, _ = recipe.target_logits(m, [recipe.Example(typed, target, W)])
    torch.testing.assert_close(m.raw_logits(h[0, :1]), want[0, :1], atol=ATOL, rtol=0)
    (row,) = m._rows.values()
    assert row.tokens.tolist() == pre  # the row before the keystroke (it holds the new one's first tokens), unchanged
    plain, _ = load(hf_dirs("causal-llama"))
    with torch.inference_mode():
        fresh = plain._encode_row(row.tokens, row.positions)
    torch.testing.assert_close(row.hidden, fresh.hidden, atol=ATOL, rtol=0)


def test_an_adapter_that_is_zero_changes_nothing_and_the_context_stays_pretrained(hf_dirs, tmp_path):
    zero, tok = load(adapted_dir(hf_dirs("causal-llama"), tmp_path / "z", scale_b=0.0))
    plain, _ = load(hf_dirs("causal-llama"))
    target = tok.encode(TARGET)
    torch.testing.assert_close(slot_logits(zero, tok, PREFIX, target), slot_logits(plain, tok, PREFIX, target), atol=ATOL, rtol=0)
    m, _ = load(adapted_dir(hf_dirs("causal-llama"), tmp_path / "a"))
    context, texts = tok.encode(PREFIX), [tok.encode(" b)\n"), tok.encode(" 0)\n")]
    assert m.continuation_logprob(context, texts) == pytest.approx(plain.continuation_logprob(context, texts), abs=1e-4)
    slot_logits(m, tok, PREFIX, target)  # a fill keeps its context's pretrained states for later fills
    (row,) = m._rows.values()
    (kept,) = plain._rows.values() if plain._rows else [None]
    fresh = plain._encode_row(row.tokens, row.positions)
    torch.testing.assert_close(row.hidden, fresh.hidden, atol=ATOL, rtol=0)


def test_int8_stacked_products_take_the_adapter_as_their_parts_do(hf_dirs, tmp_path):
    m, tok = load(adapted_dir(hf_dirs("causal-llama-int8"), tmp_path / "q"))
    assert m.stacked is not None
    target = tok.encode(TARGET)
    stacked = slot_logits(m, tok, PREFIX, target)
    m2, _ = load(tmp_path / "q")
    m2.stacked = None  # transformers' layers, the hooks on q/k/v and gate/up one by one
    torch.testing.assert_close(stacked, slot_logits(m2, tok, PREFIX, target), atol=1e-3, rtol=0)


@pytest.mark.parametrize("damage, message", [
    ("missing", "window adapter that config.json names is missing"),
    ("corrupt", "corrupt adapter"),
    ("shape", "the network needs"),
    ("names", "do not match its config"),
])
def test_a_broken_adapter_is_one_clear_error(damage, message, hf_dirs, tmp_path):
    d = adapted_dir(hf_dirs("causal-llama"), tmp_path / damage)
    path = d / window_adapter.FILE
    if damage == "missing":
        path.unlink()
    elif damage == "corrupt":
        path.write_bytes(path.read_bytes()[:100])
    else:
        data = json.loads((d / "config.json").read_text())
        data["adapter"]["rank" if damage == "shape" else "projections"] = 8 if damage == "shape" else ["q_proj"]
        (d / "config.json").write_text(json.dumps(data))
    with pytest.raises(ModelLoadError, match=message):
        load(d)


def test_the_engine_shows_an_adapted_model_the_lines_further_down(hf_dirs, tmp_path):
    m, tok = load(adapted_dir(hf_dirs("causal-llama"), tmp_path / "m", suffix_lines=2))
    text = "x = 1\ny = \nz = 3\nw = 4\nv = 5\n"
    req = FillRequest(text=text, holes=[Hole(10, 10, 8)], language="python", path="a.py")
    engine = Engine(m, tok, EngineConfig(device="cpu", precision="fp32"))
    head = tok.decode(engine.snippet_tokens(req))
    assert head == "# a.py (further down)\nz = 3\nw = 4\n\n"
    none = Engine(m, tok, EngineConfig(device="cpu", precision="fp32", suffix_lines=0))
    assert none.snippet_tokens(req) == []


# --------------------------------------------------------------------------- the recipe


def corpus(directory, docs):
    directory.mkdir(parents=True, exist_ok=True)
    for split, rows in docs.items():
        (directory / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return directory


PY = "".join(f"def f{i}(a, b):\n    c = a + {i}\n    return c * b\n\n" for i in range(12))


def test_examples_are_laid_out_as_the_engine_lays_out_a_fill(hf_dirs):
    """An example's context is the engine's snippet of the lines further down, then the text
    before the hole; its target the hole's text, then (where the hole's text is whole) the first
    tokens after it."""
    import random

    m, tok = load(hf_dirs("causal-llama"))
    engine = Engine(m, tok, EngineConfig(device="cpu", precision="fp32", suffix_lines=2))
    rng = random.Random(3)
    doc = {"text": PY, "language": "python", "path": "pkg/mod.py", "package": "pkg"}
    config = recipe.CutConfig(suffix_lines=2, prefix_tokens=40, fill_tokens=6, after_tokens=3)
    kinds = set()
    for _ in range(60):
        ex = recipe.cut(doc, rng, tok, config)
        if ex is None:
            continue
        start, end = ex.hole
        request = FillRequest(text=PY[:start] + PY[end:], holes=[Hole(start, start, 8)], language="python", path="pkg/mod.py")
        head = engine.snippet_tokens(request)
        assert ex.context[: len(head)] == head
        kinds.add("snippet" if head else "no snippet (nothing further down)")
        prefix = tok.encode(PY[:start])[-40:]
        k = engine.heal(prefix, PY[end : end + 1])
        if k and ex.context[len(head):] == prefix[:-k]:  # healed (at a bare line break, every other time)
            healed = b"".join(tok.token_bytes(t) for t in prefix[-k:])
            prefix, hole_text = prefix[:-k], healed.decode() + PY[start:end]
            kinds.add("healed")
        else:
            hole_text = PY[start:end]
        assert ex.context[len(head):] == prefix
        whole = tok.encode(hole_text)
        fill = whole[:6]
        # the text after the hole follows a whole fill, never one cut at fill_tokens
        assert ex.target == fill + (tok.encode(PY[end:])[:3] if fill == whole else []) and ex.fill == len(fill)
        kinds.add("whole fill" if fill == whole else "fill cut")
        kinds.add(("line start" if PY[start - 1] in " \n" else "in a line", "lines" if "\n" in PY[start:end] else "one line"))
    assert len(kinds) >= 7 and {"snippet", "healed", "whole fill", "fill cut"} <= kinds


def test_held_out_packages_are_never_drawn(hf_dirs, tmp_path):
    _, tok = load(hf_dirs("causal-llama"))
    import random

    rows = [{"package": "toolz", "language": "python", "path": "a.py", "text": "SECRET = 1\n" * 20},
            {"package": "golang-1.22", "language": "go", "path": "a.go", "text": "var SECRET = 1\n" * 20},
            {"package": "mine", "language": "python", "path": "b.py", "text": PY}]
    c = corpus(tmp_path / "c", {"train": rows})
    batches = recipe.Batches(c / "train.jsonl", tok, recipe.CutConfig())
    assert batches.languages == ["python"]
    for ex in batches.draw(random.Random(0), 20):
        assert "SECRET" not in tok.decode(ex.context + ex.target)


def test_infill_adapt_trains_in_pieces_and_the_model_loads_with_it(hf_dirs, tmp_path):
    from infill.cli import main

    d = tmp_path / "m"
    shutil.copytree(hf_dirs("causal-llama"), d)
    docs = [{"package": f"p{i}", "language": "python", "path": f"m{i}.py", "text": PY} for i in range(4)]
    c = corpus(tmp_path / "c", {"train": docs, "valid": docs[:1]})
    args = ["adapt", "--model", str(d), "--corpus", str(c), "--minutes", "0.02", "--valid-examples", "4", "--rank", "4",
            "--suffix-lines", "5", "--device", "cpu", "-q"]
    assert main(args) == 0
    first = json.loads((d / "config.json").read_text())["adapter"]
    assert first["rank"] == 4 and first["suffix_lines"] == 5 and first["trained"]["steps"] > 0
    assert first["trained"]["pieces"][0]["device"] == "cpu"
    assert (d / window_adapter.FILE).is_file()
    assert main(args) == 0  # the second piece goes on from the first
    second = json.loads((d / "config.json").read_text())["adapter"]["trained"]
    assert second["steps"] > first["trained"]["steps"] and len(second["pieces"]) == 2
    m, _ = load(d)
    assert m.adapter is not None and m.capabilities.suffix_lines == 5
    assert any(float(b.abs().max()) > 0 for b in m.adapter.B)  # trained: no longer the zero update


@pytest.mark.skipif(torch.cuda.is_available(), reason="tests the error a machine without CUDA gives")
def test_infill_adapt_on_a_gpu_it_does_not_have_is_one_clear_error(hf_dirs, tmp_path, capsys):
    from infill.cli import main

    d = tmp_path / "m"
    shutil.copytree(hf_dirs("causal-llama"), d)
    docs = [{"package": "p", "language": "python", "path": "m.py", "text": PY}]
    c = corpus(tmp_path / "c", {"train": docs, "valid": docs})
    before = (d / "config.json").read_text()
    assert main(["adapt", "--model", str(d), "--corpus", str(c), "--minutes", "0.01", "--device", "cuda", "-q"]) != 0
    assert "CUDA is not available" in capsys.readouterr().err
    assert (d / "config.json").read_text() == before and not (d / window_adapter.FILE).exists()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_infill_adapt_trains_on_a_gpu_and_the_model_loads_on_the_cpu(hf_dirs, tmp_path):
    from infill.cli import main

    d = tmp_path / "m"
    shutil.copytree(hf_dirs("causal-llama"), d)
    docs = [{"package": f"p{i}", "language": "python", "path": f"m{i}.py", "text": PY} for i in range(4)]
    c = corpus(tmp_path / "c", {"train": docs, "valid": docs[:1]})
    assert main(["adapt", "--model", str(d), "--corpus", str(c), "--minutes", "0.02", "--valid-examples", "4",
                 "--rank", "4", "--device", "cuda", "-q"]) == 0
    trained = json.loads((d / "config.json").read_text())["adapter"]["trained"]
    assert trained["steps"] > 0 and trained["pieces"][0]["device"] == torch.cuda.get_device_name(0)
    m, _ = load(d)
    assert m.adapter is not None and any(float(b.abs().max()) > 0 for b in m.adapter.B)
