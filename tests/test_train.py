"""`infill train` end to end on a tiny configuration: rows of the objective, resuming, export, errors."""

import json
import random
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from infill.engine.fill import Engine, EngineConfig
from infill.errors import InputError, ModelLoadError
from infill.model.network import ModelConfig, load_model
from infill.train.objective import ObjectiveConfig, collate, infill_row, make_row, pick_span
from infill.protocol import FillRequest, Hole
from infill.model.tokenizer import train_tokenizer
from infill.train.loop import TrainConfig, load_checkpoint, lr_at, progress, train

TINY = dict(
    model=ModelConfig(d_model=32, n_layers=2, n_heads=2, d_ff=64, max_context=96),
    objective=ObjectiveConfig(seq_len=128, max_window=32),
    batch_size=4, vocab_size=400, eval_every=3, ckpt_every=3, warmup=2, log_every=1,
)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, stdlib_sources) -> Path:
    d = tmp_path_factory.mktemp("corpus")
    texts = stdlib_sources(150_000)
    with open(d / "train.jsonl", "w") as f:
        for i, t in enumerate(texts[:-1]):
            f.write(json.dumps({"package": "stdlib", "path": f"{i}.py", "text": t}) + "\n")
    (d / "valid.jsonl").write_text(json.dumps({"package": "held-out", "path": "v.py", "text": texts[-1]}) + "\n")
    return d


@pytest.fixture(scope="module")
def tok(stdlib_sources):
    return train_tokenizer(stdlib_sources(100_000), vocab_size=400)


def test_spans_are_real_code_units():
    text = "def f(x):\n    if x:\n        return 1\n    return 2\n"
    rng = random.Random(0)
    for _ in range(200):
        a, b = pick_span(text, rng)
        assert 0 <= a <= b <= len(text)


def test_infill_rows_put_the_span_in_a_longer_padded_window(tok):
    text = "import os\n\n\ndef main():\n    print(os.getcwd())\n    return 0\n" * 3
    cfg = ObjectiveConfig(seq_len=128, max_window=32)
    rng = random.Random(1)
    rows = [r for r in (infill_row(text, tok, cfg, rng, 1) for _ in range(50)) if r]
    assert rows
    for row in rows:
        kinds = [p[0] for p in row.pieces]
        assert kinds == ["ctx", "win", "ctx"]
        _, fill, n = row.pieces[1]
        assert len(fill) <= n <= 32
        # the pieces are the text, cut at character offsets and tokenized separately
        assert "".join(tok.decode(p[1]) for p in row.pieces) in text
    batch = collate(rows, 128, tok.pad_id, tok.mask_id, rng)
    assert batch.ids.shape == (len(rows), 128)
    masked = batch.weight > 0
    assert (batch.ids[masked] == tok.mask_id).all() and batch.is_win[masked].all()
    assert (batch.seg[batch.is_win] == -1).all()


def test_learning_rate_warms_up_then_decays():
    cfg = TrainConfig(steps=100, warmup=10, lr=1.0, decay_fraction=0.2, min_lr_ratio=0.1)
    assert lr_at(0, 0.0, cfg) == pytest.approx(0.1)
    assert lr_at(50, progress(50, 0, cfg), cfg) == 1.0
    assert lr_at(99, progress(100, 0, cfg), cfg) == pytest.approx(0.1)


def test_tiny_training_runs_resumes_and_exports_a_loadable_model(tmp_path, corpus):
    cfg = TrainConfig(run_dir=tmp_path / "run", corpus_dir=corpus, steps=4, **TINY)
    train(cfg)  # builds the tokenizer, trains 4 steps, checkpoints at 3 and 4, exports
    state = json.loads((cfg.run_dir / "checkpoint" / "state.json").read_text())
    assert state["step"] == 4 and state["tokens_seen"] > 0
    out = train(replace(cfg, steps=6))  # resumes from step 4
    history = json.loads((cfg.run_dir / "history.json").read_text())
    assert [r["step"] for r in history] == [1, 2, 3, 4, 5, 6]
    assert any("valid_loss" in r for r in history)
    facts = json.loads((out / "config.json").read_text())["training"]
    assert facts["steps"] == 6 and facts["tokens_seen"] > state["tokens_seen"]
    card = (out / "MODEL_CARD.md").read_text()
    assert "## Corpus" in card and "tokens seen" in card and (out / "loss.png").is_file()
    engine = Engine.load(EngineConfig(model_dir=out, device="cpu"))
    result = engine.fill(FillRequest(text="x = \n", holes=[Hole(4, 4, 8)]))
    assert len(result.fills) == 1


def test_resuming_is_deterministic(tmp_path, corpus, tok):
    tok_path = tmp_path / "tok.json"
    tok.save(tok_path)
    base = TrainConfig(corpus_dir=corpus, tokenizer=tok_path, **TINY)
    straight = train(replace(base, run_dir=tmp_path / "a", steps=4))
    train(replace(base, run_dir=tmp_path / "b", steps=2))
    resumed = train(replace(base, run_dir=tmp_path / "b", steps=4))
    a, b = load_model(straight).state_dict(), load_model(resumed).state_dict()
    for k in a:
        assert torch.allclose(a[k], b[k], atol=1e-5), k


def test_a_weights_only_checkpoint_is_bf16_in_bounded_files_and_a_run_resumes_from_it(tmp_path, corpus, tok):
    from safetensors.torch import load_file

    tok_path = tmp_path / "tok.json"
    tok.save(tok_path)
    limit = 16 << 10  # 16 KiB: the tiny network's weights take several files
    cfg = TrainConfig(run_dir=tmp_path / "r", corpus_dir=corpus, tokenizer=tok_path, steps=3, weights_only=True,
                      shard_mib=limit / (1 << 20), **TINY)
    train(cfg)
    ckpt = cfg.run_dir / "checkpoint"
    files = sorted(ckpt.glob("model-*.safetensors"))
    assert len(files) > 1 and not (ckpt / "optimizer").exists() and not (ckpt / "model.safetensors").exists()
    for f in files:
        tensors = load_file(str(f))
        assert sum(t.numel() * t.element_size() for t in tensors.values()) <= limit or len(tensors) == 1
        assert all(t.dtype == torch.bfloat16 for t in tensors.values() if t.is_floating_point())
    out = train(replace(cfg, steps=5))  # resumes at step 3 with a fresh optimizer, warming up again
    history = json.loads((cfg.run_dir / "history.json").read_text())
    assert [r["step"] for r in history] == [1, 2, 3, 4, 5]
    assert history[3]["lr"] == pytest.approx(cfg.lr / cfg.warmup)  # the first step after the resume warms up
    assert sorted(out.glob("model-*.safetensors")) and load_model(out).cfg.d_model == 32  # the export is sharded too
    full = replace(cfg, run_dir=tmp_path / "full", weights_only=False)
    train(full)
    assert sorted((full.run_dir / "checkpoint" / "optimizer").glob("model-*.safetensors"))  # moments kept, sharded


def test_a_packed_corpus_fits_its_limit_and_trains(tmp_path, corpus, tok):
    import lzma

    from infill.train.corpus import iter_documents, split_file
    from infill.train.pack import pack

    many = tmp_path / "many"  # the fixture's files cut into many documents
    many.mkdir()
    texts = [d["text"] for d in iter_documents(corpus / "train.jsonl")]
    with open(many / "train.jsonl", "w") as f:
        for i, t in enumerate(t[k : k + 3000] for t in texts for k in range(0, len(t), 3000)):
            f.write(json.dumps({"package": "stdlib", "path": f"{i}.py", "text": t}) + "\n")
    (many / "valid.jsonl").write_text((corpus / "valid.jsonl").read_text())
    corpus = many
    limit = 20 << 10
    facts = pack(corpus, tmp_path / "packed", limit, seed=1, chunk_bytes=8 << 10)
    files = list((tmp_path / "packed").iterdir())
    assert sum(f.stat().st_size for f in files) <= limit
    assert 0 < facts["train_documents"] < facts["train_documents_in_source"]  # the limit cut the training split
    packed = list(iter_documents(split_file(tmp_path / "packed", "train")))
    source = {d["path"]: d["text"] for d in iter_documents(corpus / "train.jsonl")}
    assert len(packed) == facts["train_documents"] and all(source[d["path"]] == d["text"] for d in packed)
    assert lzma.decompress((tmp_path / "packed" / "valid.jsonl.xz").read_bytes()).decode() == (corpus / "valid.jsonl").read_text()
    assert json.loads((tmp_path / "packed" / "manifest.json").read_text())["packed"]["limit_bytes"] == limit
    tok_path = tmp_path / "tok.json"
    tok.save(tok_path)
    train(TrainConfig(run_dir=tmp_path / "r", corpus_dir=tmp_path / "packed", tokenizer=tok_path, steps=2, **TINY))
    with pytest.raises(InputError, match="limit"):
        pack(corpus, tmp_path / "none", 1 << 10)


def test_empty_corpus_and_foreign_checkpoints_fail_clearly(tmp_path, corpus, tok):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "train.jsonl").write_text("")
    (empty / "valid.jsonl").write_text("")
    with pytest.raises(InputError, match="empty"):
        train(TrainConfig(run_dir=tmp_path / "r0", corpus_dir=empty, steps=1, **TINY))
    tok_path = tmp_path / "tok.json"
    tok.save(tok_path)
    cfg = TrainConfig(run_dir=tmp_path / "r1", corpus_dir=corpus, tokenizer=tok_path, steps=3, **TINY)
    train(cfg)
    bigger = replace(cfg, steps=4, model=replace(cfg.model, d_model=64))
    with pytest.raises(ModelLoadError, match="another architecture"):
        train(bigger)
    next((cfg.run_dir / "checkpoint").glob("model*.safetensors")).write_bytes(b"not a checkpoint")
    with pytest.raises(ModelLoadError, match="corrupt"):
        train(replace(cfg, steps=4))


def test_make_row_mixes_plain_and_infilling_rows(tok):
    text = "\n".join(f"value_{i} = compute({i}, {i + 1})" for i in range(60)) + "\n"
    cfg = ObjectiveConfig(seq_len=128, max_window=32, p_plain=0.5)
    rng = random.Random(3)
    rows = [r for r in (make_row(text, tok, cfg, rng) for _ in range(60)) if r]
    plain = [r for r in rows if r.pieces[-1] == ("ctx", []) and len(r.pieces) == 3 and len(r.pieces[1][1]) == r.pieces[1][2]]
    assert 0 < len(plain) < len(rows)


def test_init_from_continues_an_exported_model_and_records_its_history(tmp_path, corpus, tok):
    tok_path = tmp_path / "tok.json"
    tok.save(tok_path)
    base = TrainConfig(corpus_dir=corpus, tokenizer=tok_path, **TINY)
    first = train(replace(base, run_dir=tmp_path / "first", steps=3))
    second = train(replace(base, run_dir=tmp_path / "second", steps=2, init_from=first, seed=1))
    facts = json.loads((second / "config.json").read_text())["training"]
    assert facts["steps"] == 2 and facts["init_from"]["steps"] == 3 and facts["init_from"]["path"] == str(first)
    assert "Continued from" in (second / "MODEL_CARD.md").read_text()
    from infill.train.model_card import run_chain

    chain = run_chain(facts["init_from"], [{"step": 1, "loss": 1.0, "tokens": 10}], second.parent)
    assert [Path(name).name for name, _ in chain] == ["first", "second"] and len(chain[0][1]) == 3
    assert (second / "loss.png").stat().st_size > 1000
    before, after = load_model(first).state_dict(), load_model(second).state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)  # it trained on
    with pytest.raises(ModelLoadError, match="another architecture"):
        train(replace(base, run_dir=tmp_path / "third", steps=1, init_from=first,
                      model=replace(base.model, d_model=64)))
    # Continued weights keep their tokenizer: none is trained anew, and another one is refused.
    untold = train(replace(base, run_dir=tmp_path / "fourth", steps=1, init_from=first, tokenizer=None))
    assert (untold / "tokenizer.json").read_bytes() == (first / "tokenizer.json").read_bytes()
    assert not (tmp_path / "fourth" / "tokenizer.json").exists()  # none trained for the run
    other = tmp_path / "other.json"
    other.write_text(tok_path.read_text().replace('"<|pad|>"', '"<|PAD|>"'))
    with pytest.raises(InputError, match="not the tokenizer"):
        train(replace(base, run_dir=tmp_path / "fifth", steps=1, init_from=first, tokenizer=other))


def test_infill_card_adds_benchmark_results_and_notes(tmp_path, corpus, tok, capsys):
    from infill.cli import main

    tok_path = tmp_path / "tok.json"
    tok.save(tok_path)
    model = train(TrainConfig(corpus_dir=corpus, tokenizer=tok_path, run_dir=tmp_path / "run", steps=2,
                              **{**TINY, "objective": replace(TINY["objective"], context_stride=4)}))
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({"benchmark": "single-line", "n_tasks": 4, "settings": {"max_tokens": 32, "limit": 4},
                                   "metrics": {"pass@1": 0.25, "parse_rate": 0.75, "exact_match": 0.0}}))
    notes = tmp_path / "notes.md"
    notes.write_text("Trained for a test.\n")
    assert main(["card", str(model), "--quality", str(summary), "--notes", str(notes)]) == 0
    card = (model / "MODEL_CARD.md").read_text()
    assert "| single-line | 4 | 25.0% | 75.0% |" in card and card.endswith("Trained for a test.\n")
    assert "at every 4th position" in card and "--context-stride 4" in card
    assert main(["card", str(tmp_path / "nowhere")]) == 2


def test_context_stride_counts_every_nth_context_token(tok, monkeypatch):
    from infill.model.network import DiffusionLM
    from infill.train.objective import diffusion_loss, next_token_targets

    text = "\n".join(f"value_{i} = compute({i}, {i + 1})" for i in range(60)) + "\n"
    cfg = ObjectiveConfig(seq_len=128, max_window=32)
    rng = random.Random(4)
    batch = collate([r for r in (make_row(text, tok, cfg, rng) for _ in range(6)) if r], 128, tok.pad_id, tok.mask_id, rng)
    torch.manual_seed(0)
    model = DiffusionLM(ModelConfig(vocab_size=448, d_model=32, n_layers=1, n_heads=2, d_ff=64, max_context=128,
                                    pad_id=tok.pad_id, mask_id=tok.mask_id, eos_id=tok.eos_id))
    seen = []
    real_ce = torch.nn.functional.cross_entropy

    def counting_ce(logits, target, **kw):
        seen.append(len(target))
        return real_ce(logits, target, **kw)

    monkeypatch.setattr(torch.nn.functional, "cross_entropy", counting_ce)
    with torch.no_grad():
        dense = diffusion_loss(model, batch, 1.0, 1)
        sparse = diffusion_loss(model, batch, 1.0, 4)
    n_ctx = int(next_token_targets(batch).sum())
    assert seen[1] == n_ctx and abs(seen[3] - n_ctx / 4) <= batch.ids.shape[0]  # every 4th position of each row
    assert torch.isfinite(sparse) and abs(float(sparse) - float(dense)) < 0.5 * float(dense)
