"""`infill adapt`: train a causal model's window adapter (infill/model/hf/adapter.py) so that its
fills lead into the code below the hole, which it reads as the engine shows it.

A causal model never reads the text after its hole. The engine shows it the lines further down as a
snippet before its context ("FILE (further down)", infill/text/snippets.py); the pretrained network
reads that snippet as it reads any code above, and the adapter, on only for the fill window and the
context token before it, learns to write what leads into it. The context stays the pretrained
network's (no gradient flows there, so a step costs a forward pass over the context and a forward
and backward pass over the window only).

Examples are cut from a corpus's files (``infill corpus fetch``'s ``train.jsonl``), a language drawn
uniformly among those it holds, then a file, then a hole: whole lines (one to eight, from their
indentation), the rest of a line from a point in it, a span within a line, or the rest of a line
and the lines after it (:data:`HOLE_MIX`). The context is the snippet of the lines further down
(``suffix_lines`` lines, within ``snippet_tokens``) and at most ``prefix_tokens`` tokens before
the hole; the target is the fill (at most ``fill_tokens`` tokens) and, where the fill is whole,
the first ``after_tokens`` tokens of the text after it (a fill's end is scored as that text going
on: the engine's ``bind_ends``). A fill cut at ``fill_tokens`` is followed by nothing: the text
after the hole never follows the middle of a fill. The loss is the target's next-token cross
entropy.

The packages that ``infill bench validity`` cuts its holes from (bench/fetch_validity_sources.sh)
are never trained on (:data:`HELD_OUT`), and the corpus builder drops benchmark data.

Runs in pieces (``--minutes``): the adapter lives in the model directory (``adapter.safetensors``
in bf16, config.json's ``adapter`` entry with what it was trained on and how fast), and each piece
starts from it and writes it back atomically, its step count going on; the data of step k is drawn
from Random(seed, k), so pieces see what one long run would. The optimizer's moments start afresh
each piece (the checkpoint is weights only). A piece runs where ``--device`` says (a GPU where there
is one): the checkpoint is the same either way (9.4 MiB for the default model), and a packed corpus
(``infill corpus pack``, xz) is read as a plain one, so a piece can travel to a GPU machine and back
(README.md, the window adapter).
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import platform
import random
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from infill.args import device_name
from infill.errors import InputError
from infill.model.device import resolve_device
from infill.model.hf import adapter as window_adapter
from infill.model.hf.causal import _Appending
from infill.model.hf.model import _Record, additive_mask
from infill.syntax.languages import spec_for
from infill.text import healing, snippets
from infill.train.corpus import iter_documents, split_file

log = logging.getLogger("infill.adapt")

# Packages (as the corpus names them) that the validity benchmark's sources come from, or overlap:
# never trained on, so that benchmark stays code the model has not seen adapted.
HELD_OUT = frozenset({
    "express", "underscore", "commander", "rxjs", "@tanstack/query-core", "react-day-picker", "@tanstack/react-query",
    "react-native", "cordova-android", "newlib", "brotli", "boost", "googletest", "more-itertools", "toolz", "bottle",
    "marshmallow", "tomlkit", "rust-serde", "rust-serde-json", "rust-regex-syntax", "rust-itertools", "rust-anyhow",
    "rust-rand", "rust-hashbrown", "rust-bytes", "rust-syn",
})
HELD_OUT_PREFIXES = ("golang-1.", "boost1.")  # the Go standard library (any version), Boost


def held_out(package: str) -> bool:
    name = package.split("==")[0].lower()
    return name in HELD_OUT or name.startswith(HELD_OUT_PREFIXES)


@dataclass(frozen=True)
class CutConfig:
    suffix_lines: int = 24
    snippet_tokens: int = 256  # the engine's room for snippets: min(related_tokens, half the budget)
    prefix_tokens: int = 512
    fill_tokens: int = 96
    after_tokens: int = 8


# How holes are cut (cut_hole): each kind's share, and the line counts a multi-line kind draws from.
# From step 1,834 on, whole lines and lines after a line's rest are more, and longer, than
# the first pieces' (0.4 of whole lines from (1, 1, 1, 2, 2, 3, 4, 6, 8); 0.1 of a rest and
# (1, 2, 3) lines): the shipped adapter wrote multi-line fills shorter than their references 72 times
# in 100 (HumanEval multi-line, subset seed 1019). 386 steps of it (to step 2,220) changed neither
# that nor the pass rate measurably (BENCHMARKS.md v2.33); the shipped adapter predates it.
HOLE_MIX = {"lines": 0.45, "rest": 0.30, "span": 0.12, "rest_and_lines": 0.13}
WHOLE_LINES = (1, 1, 2, 2, 3, 4, 5, 6, 8)
LINES_AFTER = (1, 2, 3, 4, 6)


@dataclass(frozen=True)
class Example:
    context: list[int]  # the snippet, then the text before the hole (at least one token)
    target: list[int]  # the fill, then the first tokens after it
    fill: int  # how many of target's tokens are the fill's
    hole: tuple[int, int] = (0, 0)  # where in its document it was cut (start, end)


def cut_hole(text: str, rng: random.Random) -> tuple[int, int] | None:
    """(start, end) of a hole in ``text``: whole lines from their start, the rest of a line,
    a span within a line, or the rest of a line and the lines after it; None where the text has
    too few lines."""
    lines = text.splitlines(keepends=True)
    if len(lines) < 8:
        return None
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    for _ in range(8):
        i = rng.randrange(2, len(lines) - 1)
        body = lines[i].rstrip("\n")
        if not body.strip():
            continue
        indent = len(body) - len(body.lstrip())
        kind = rng.choices(list(HOLE_MIX), weights=list(HOLE_MIX.values()))[0]
        if kind == "lines":  # whole lines, from the first one's start (where the engine moves a hole after its indentation)
            k = min(rng.choice(WHOLE_LINES), len(lines) - 1 - i)
            return starts[i], starts[i + k - 1] + len(lines[i + k - 1].rstrip("\n"))
        at = starts[i] + rng.randrange(indent, len(body))
        end_of = starts[i] + len(body)
        if kind == "rest":  # the rest of the line
            return at, end_of
        if kind == "span":  # a span within the line
            return at, rng.randrange(at, end_of + 1)
        k = min(rng.choice(LINES_AFTER), len(lines) - 1 - i)  # the rest of the line and the lines after it
        return at, starts[i + k] + len(lines[i + k].rstrip("\n"))
    return None


_vocab = functools.lru_cache(maxsize=2)(healing.vocabulary)  # a tokenizer's, read once


def cut(doc: dict, rng: random.Random, tokenizer, config: CutConfig) -> Example | None:
    """One example from a corpus document (``text``, ``language``, ``path``), laid out as the engine
    lays out a causal fill with ``suffix_lines``; None where no hole could be cut. A context whose
    last tokens the engine heals (infill/text/healing.py) gives those tokens to the fill, as the
    engine does; at a bare line break only every other time (the engine commits a line's
    indentation instead where a language's hooks know it: Python's line starts)."""
    encode = tokenizer.encode
    text = doc["text"]
    hole = cut_hole(text, rng)
    if hole is None:
        return None
    start, end = hole
    after = text[end:]
    spec = spec_for(doc.get("language"))
    comment = spec.line_comment[0] if spec is not None and spec.line_comment else None
    below = snippets.further_down(after, config.suffix_lines)
    head = (snippets.lay_out(encode, [(snippets.further_down_name(doc.get("path")), below)], comment, config.snippet_tokens)
            if below.strip() else [])
    prefix = encode(text[max(0, start - config.prefix_tokens * 8) : start])[-config.prefix_tokens :]
    healed = b""
    if len(prefix) > 1:
        last = tokenizer.token_bytes(prefix[-1])
        k = healing.heal_tokens(prefix[1:], tokenizer.token_bytes, text[end : end + 1], _vocab(tokenizer))
        if k and (last.strip(b" \t") or rng.random() < 0.5):
            healed, prefix = b"".join(tokenizer.token_bytes(t) for t in prefix[-k:]), prefix[:-k]
    whole = encode(healed.decode("utf-8", "replace") + text[start:end])
    fill = whole[: config.fill_tokens]
    follow = encode(after[:400])[: config.after_tokens] if len(fill) == len(whole) else []
    context = head + prefix
    if not context or not fill and not follow:
        return None
    return Example(context, fill + follow, len(fill), hole)


class Batches:
    """Examples drawn for each step from a corpus split: a language uniformly, then one of its files."""

    def __init__(self, path: Path, tokenizer, config: CutConfig, languages: set[str] | None = None):
        self.by_language: dict[str, list[dict]] = {}
        for doc in iter_documents(path):
            if held_out(doc.get("package", "")) or (languages and doc.get("language") not in languages):
                continue
            self.by_language.setdefault(doc["language"], []).append(doc)
        if not self.by_language:
            raise InputError(f"{path}: no documents to train on (after leaving out the benchmark's packages)")
        self.languages = sorted(self.by_language)
        self.tokenizer, self.config = tokenizer, config

    def draw(self, rng: random.Random, n: int) -> list[Example]:
        out: list[Example] = []
        while len(out) < n:
            docs = self.by_language[rng.choice(self.languages)]
            ex = cut(docs[rng.randrange(len(docs))], rng, self.tokenizer, self.config)
            if ex is not None:
                out.append(ex)
        return out


def target_logits(model, examples: list[Example], adapted: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """(logits [B, W, V], labels [B, W]: -100 past each target) of the examples' targets: each
    context but its last token run by the pretrained network (no gradient), then that token and
    the target with the adapter on (``adapted``), as CausalLM runs a fill (the context left-padded,
    positions counted from each row's first real token)."""
    dev, dtype = model.device, model.dtype
    B = len(examples)
    C = max(len(e.context) for e in examples) - 1
    W = 1 + max(len(e.target) for e in examples)
    ctx = torch.full((B, C), model.pad_id, dtype=torch.long)
    ctx_ok = torch.zeros((B, C), dtype=torch.bool)
    win = torch.full((B, W), model.pad_id, dtype=torch.long)
    labels = torch.full((B, W), -100, dtype=torch.long)
    for b, e in enumerate(examples):
        n = len(e.context) - 1
        if n:
            ctx[b, C - n :] = torch.tensor(e.context[:-1])
            ctx_ok[b, C - n :] = True
        win[b, 0] = e.context[-1]
        win[b, 1 : 1 + len(e.target)] = torch.tensor(e.target)
        labels[b, : len(e.target)] = torch.tensor(e.target)
    ctx, ctx_ok, win, labels = (t.to(dev) for t in (ctx, ctx_ok, win, labels))
    ctx_pos = (ctx_ok.cumsum(1) - 1).clamp_min(0)
    win_pos = ctx_ok.sum(1, keepdim=True) + torch.arange(W, device=dev)[None]
    record = _Record(len(model.backbone.layers))
    if C:
        with torch.no_grad(), model.adapter.on(False):
            model._run(ctx, ctx_pos, additive_mask(ctx_ok, C, dtype, 0, ctx_pos, ctx_pos), record)
    key_ok = torch.cat([ctx_ok, torch.ones((B, W), dtype=torch.bool, device=dev)], 1)
    mask = additive_mask(key_ok, W, dtype, C, torch.cat([ctx_pos, win_pos], 1), win_pos)
    with model.adapter.on(adapted):
        h = model._run(win, win_pos, mask, _Appending(record.kv) if C else None)
    return model.hf.lm_head(h).float(), labels


def loss_of(model, examples: list[Example], adapted: bool = True) -> tuple[torch.Tensor, int]:
    """The summed cross entropy of the examples' targets (:func:`target_logits`) and how many tokens it sums."""
    logits, labels = target_logits(model, examples, adapted)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), reduction="sum")
    return loss, int((labels != -100).sum())


def evaluate(model, examples: list[Example], batch: int = 8) -> dict:
    """Mean cross entropy per target token and per fill token, adapter on and off."""
    out = {}
    for adapted in (False, True):
        total = tokens = fill_total = fill_tokens = 0.0
        with torch.no_grad():
            for i in range(0, len(examples), batch):
                part = examples[i : i + batch]
                loss, n = loss_of(model, part, adapted)
                total, tokens = total + float(loss), tokens + n
                fills = [Example(e.context, e.target[: e.fill], e.fill) for e in part if e.fill]
                if fills:
                    loss, n = loss_of(model, fills, adapted)
                    fill_total, fill_tokens = fill_total + float(loss), fill_tokens + n
        key = "adapted" if adapted else "pretrained"
        out[key] = {"target": round(total / max(1, tokens), 4), "fill": round(fill_total / max(1, fill_tokens), 4)}
    return out


def load_base(model_dir: Path, config: window_adapter.AdapterConfig, resume: bool, threads: int | None,
              device: torch.device = torch.device("cpu")):
    """The model's network dense in bf16 on ``device`` (int8 weights dequantized: gradients flow
    through them), frozen, with a trainable adapter of ``config`` (float32, on the same device): the
    directory's tensors where ``resume``, else a fresh one (which changes nothing until trained)."""
    from infill.model import network
    from infill.model.hf import loader

    if threads:
        torch.set_num_threads(threads)
    data = network.read_config_json(model_dir)
    model, tokenizer = loader.load(model_dir, data, device, torch.bfloat16, dense=True, adapter=False)
    if not model.capabilities.left_to_right:
        raise InputError(f"{model_dir}: a window adapter is for a causal model")
    model.requires_grad_(False)
    layers = list(model.backbone.layers)
    adapter = window_adapter.WindowAdapter(layers, config, torch.float32).to(device)
    if resume:
        from safetensors.torch import load_file

        adapter.load_tensors(load_file(str(model_dir / config.file)), str(model_dir / config.file))
    else:
        adapter.init_for_training(torch.Generator().manual_seed(0))
    adapter.attach(layers)
    model.adapter = adapter
    return model, tokenizer


def save(model_dir: Path, data: dict, adapter: window_adapter.WindowAdapter, trained: dict) -> None:
    """The adapter (bf16) and config.json's ``adapter`` entry, each written to a temporary file and renamed."""
    from safetensors.torch import save_file

    config = window_adapter.AdapterConfig.from_json({**adapter.config.to_json(), "trained": trained})
    tmp = model_dir / (config.file + ".tmp")
    save_file(adapter.tensors(torch.bfloat16), str(tmp))
    os.chmod(tmp, 0o644)
    os.replace(tmp, model_dir / config.file)
    data = {**data, "adapter": config.to_json()}
    tmp = model_dir / "config.json.tmp"
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, model_dir / "config.json")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", type=Path, default=None, help="the model directory (default: the bundled model); its "
                   "adapter is trained from where it is, or from nothing, and written back")
    p.add_argument("--corpus", type=Path, required=True, help="a corpus directory (infill corpus fetch): train.jsonl, valid.jsonl")
    p.add_argument("--minutes", type=float, default=150.0, help="this piece's training time (default 150)")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--warmup", type=int, default=20, help="steps of linear warm-up at the start of each piece")
    p.add_argument("--save-every", type=float, default=20.0, help="minutes between checkpoints (default 20)")
    p.add_argument("--valid-examples", type=int, default=96, help="held-out examples evaluated at the start and the end")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--device", type=device_name, default="auto", help="auto | cpu | cuda[:N]: where the network and "
                   "the adapter train (default: a GPU where there is one)")
    p.add_argument("--rank", type=int, default=16, help="a fresh adapter's rank (an existing one keeps its own)")
    p.add_argument("--suffix-lines", type=int, default=24, help="a fresh adapter's lines further down (an existing one keeps its own)")


def main(args: argparse.Namespace) -> int:
    import infill.model

    model_dir = args.model or Path(infill.model.__file__).resolve().parent / "default_model"
    for split in ("train", "valid"):
        split_file(args.corpus, split)  # a clear error where the corpus lacks one
    data = json.loads((model_dir / "config.json").read_text())
    resume = bool(data.get("adapter"))
    if resume:
        config = window_adapter.AdapterConfig.from_json(data["adapter"])
    else:  # a fresh adapter takes the recipe's shape
        config = window_adapter.AdapterConfig(rank=args.rank, alpha=2.0 * args.rank, suffix_lines=args.suffix_lines)
    device = resolve_device(args.device)
    model, tokenizer = load_base(model_dir, config, resume, args.threads, device)
    adapter = model.adapter
    trained = dict(config.trained)
    step0 = int(trained.get("steps", 0))
    cut_config = CutConfig(suffix_lines=config.suffix_lines)
    train = Batches(split_file(args.corpus, "train"), tokenizer, cut_config)
    valid = Batches(split_file(args.corpus, "valid"), tokenizer, cut_config).draw(random.Random(12345), args.valid_examples)
    before = evaluate(model, valid)
    log.info("start at step %d; held-out cross entropy %s", step0, before)
    params = list(adapter.parameters())
    for p in params:
        p.requires_grad_(True)
    opt = torch.optim.AdamW(params, lr=args.lr, betas=(0.9, 0.99), weight_decay=0.0)
    t0 = last_save = time.time()
    step, examples, target_tokens, recent = step0, 0, 0, []
    while time.time() - t0 < args.minutes * 60:
        batch = train.draw(random.Random(f"{args.seed}-{step}"), args.batch)
        for group in opt.param_groups:
            group["lr"] = args.lr * min(1.0, (step - step0 + 1) / max(1, args.warmup))
        loss, n = loss_of(model, batch)
        (loss / n).backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        step, examples, target_tokens = step + 1, examples + len(batch), target_tokens + n
        recent.append(float(loss.detach()) / n)
        if step % 25 == 0:
            log.info("step %d: loss %.3f (last 25), %.2f examples/s", step, sum(recent[-25:]) / len(recent[-25:]),
                     examples / (time.time() - t0))
        if time.time() - last_save > args.save_every * 60:
            save(model_dir, data, adapter, _facts(trained, step, examples, target_tokens, time.time() - t0, args, train, device))
            last_save = time.time()
    seconds = time.time() - t0
    after = evaluate(model, valid)
    facts = _facts(trained, step, examples, target_tokens, seconds, args, train, device)
    facts["held_out_cross_entropy"] = {"examples": len(valid), "before_piece": before, "after_piece": after}
    save(model_dir, data, adapter, facts)
    log.info("step %d: held-out cross entropy %s (was %s); %.2f examples/s", step, after, before, examples / seconds)
    return 0


def _facts(before: dict, step: int, examples: int, tokens: int, seconds: float, args, train: Batches,
           device: torch.device) -> dict:
    """What config.json records of the adapter's training, the earlier pieces' totals carried on."""
    pieces = list(before.get("pieces", []))
    pieces.append({"steps": step - int(before.get("steps", 0)), "examples": examples, "target_tokens": tokens,
                   "seconds": round(seconds), "examples_per_s": round(examples / max(seconds, 1e-9), 3),
                   "target_tokens_per_s": round(tokens / max(seconds, 1e-9), 1), "batch": args.batch, "lr": args.lr,
                   "threads": torch.get_num_threads(), "machine": platform.processor() or platform.machine(),
                   "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
                   "torch": torch.__version__})
    return {"steps": step, "examples": int(before.get("examples", 0)) + examples, "seed": args.seed,
            "corpus": str(args.corpus.name), "languages": train.languages, "recipe": "infill adapt (infill/train/window_adapter.py)",
            "pieces": pieces}
