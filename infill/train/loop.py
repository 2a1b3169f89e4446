"""`infill train`: train a diffusion network of our own end to end (corpus, tokenizer, training,
export). The default model is not trained here: it is imported (infill/train/import_gguf.py).

Stages, each skipped when its output already exists in the run directory:
  1. corpus     Python source of the installed packages (corpus.py) -> RUN/corpus/
  2. tokenizer  byte-level BPE on the train split (tokenizer.py)    -> RUN/tokenizer.json
  3. train      the diffusion objective (objective.py), AdamW with warmup-stable-decay;
                bf16 + torch.compile on CUDA, bf16 autocast on CPUs with native bf16 (else fp32);
                checkpoints every --ckpt-every
                steps in RUN/checkpoint/ (safetensors + JSON, no pickles, files of at most --shard-mib),
                resumable; --weights-only keeps bf16 weights alone (small enough to commit)
  4. export     RUN/model/: config.json (with training facts), the weights (in files of at
                most --shard-mib), tokenizer.json, and loss.png

Runs deterministically for a seed: the data of step k is drawn from Random(seed, k), so a
resumed run sees the same rows as an uninterrupted one. Not here: the objective's math
(objective.py), the network (model.py), evaluation (bench/quality.py).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import platform
import random
import shutil
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch

from infill.train import model_card
from infill.train.corpus import CorpusConfig, build_corpus, iter_documents, split_file
from infill.errors import InputError, ModelLoadError
from infill.model import shards
from infill.model.network import DiffusionLM, ModelConfig, load_model, read_config, save_model
from infill.train.objective import ObjectiveConfig, collate, diffusion_loss, make_row
from infill.model.tokenizer import Tokenizer, train_tokenizer

log = logging.getLogger(__name__)

PRESETS = {
    # name: (model sizes, objective sizes, batch size, steps, checkpoints)
    "tiny": (dict(d_model=32, n_layers=2, n_heads=2, d_ff=64, max_context=128), dict(seq_len=128, max_window=32), 4, 20, {}),
    "cpu": (dict(d_model=256, n_layers=4, n_heads=4, d_ff=704, max_context=384), dict(seq_len=384), 16, 100_000, {}),
    # A lent GPU takes at most 64 MiB each way: a packed corpus of at most 48 MiB in, weights in 16 MiB files out.
    "gpu": (dict(d_model=512, n_layers=8, n_heads=8, d_ff=1408, max_context=1024), dict(seq_len=1024), 64, 20000,
            dict(weights_only=True, shard_mib=16.0)),
}


@dataclass(frozen=True)
class TrainConfig:
    run_dir: Path = Path("runs/default")
    corpus_dir: Path | None = None  # None: RUN/corpus, built from this machine's packages
    tokenizer: Path | None = None  # None: RUN/tokenizer.json, trained on the corpus
    vocab_size: int = 8192
    tokenizer_sample_bytes: int = 60_000_000  # of train text used to learn the BPE merges
    model: ModelConfig = ModelConfig()
    objective: ObjectiveConfig = ObjectiveConfig()
    batch_size: int = 16
    steps: int = 4000
    lr: float = 1e-3
    min_lr_ratio: float = 0.05
    warmup: int = 100
    decay_fraction: float = 0.25  # final share of steps with the learning rate decaying (WSD)
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    eval_every: int = 250
    eval_batches: int = 6
    ckpt_every: int = 250
    log_every: int = 10
    seed: int = 0
    device: str = "auto"
    max_minutes: float | None = None  # training time budget: the schedule decays and stops by it
    precision: str = "auto"  # auto | fp32 | bf16 (autocast; auto = bf16 where it is native, as the engine picks)
    max_doc_chars: int = 20_000  # a file's sampling weight is its length, capped here
    init_from: Path | None = None  # start from this exported model's weights (fresh optimizer and schedule)
    shard_mib: float = 16.0  # checkpoint and exported weights in files of at most this many MiB of tensors
    weights_only: bool = False  # checkpoints hold bf16 weights alone (small enough to commit); a resume warms up again


def progress(step: int, seconds: float, cfg: TrainConfig) -> float:
    """How far training is, 0..1: by steps, or by time when --max-minutes comes first."""
    by_steps = step / max(cfg.steps, 1)
    if cfg.max_minutes is None:
        return by_steps
    return max(by_steps, seconds / (cfg.max_minutes * 60))


def lr_at(step: int, done: float, cfg: TrainConfig, since: int = 0) -> float:
    """Warmup (steps from ``since``: a run resumed without its optimizer's moments warms up
    again), constant, then a linear decay to min_lr_ratio over the last decay_fraction."""
    if step - since < cfg.warmup:
        return cfg.lr * (step - since + 1) / cfg.warmup
    frac = min(1.0, max(0.0, (done - (1 - cfg.decay_fraction)) / cfg.decay_fraction))
    return cfg.lr * (1 - frac * (1 - cfg.min_lr_ratio))


# ----------------------------------------------------------------------------------------------
# Data.


class Documents:
    """Source files of a corpus split, sampled by length (capped), reproducibly."""

    def __init__(self, path: Path, max_chars: int):
        self.texts = [d["text"] for d in iter_documents(path) if d["text"].strip()]
        if not self.texts:
            raise InputError(f"{path}: the corpus split is empty")
        self.weights = [min(len(t), max_chars) for t in self.texts]
        self.cum = list(_accumulate(self.weights))

    def sample(self, rng: random.Random) -> str:
        return rng.choices(self.texts, cum_weights=self.cum, k=1)[0]


def _accumulate(xs):
    total = 0
    for x in xs:
        total += x
        yield total


def draw_batch(docs: Documents, tok: Tokenizer, cfg: TrainConfig, rng: random.Random):
    rows = []
    while len(rows) < cfg.batch_size:
        row = make_row(docs.sample(rng), tok, cfg.objective, rng)
        if row is not None:
            rows.append(row)
    return collate(rows, cfg.objective.seq_len, tok.pad_id, tok.mask_id, rng)


# ----------------------------------------------------------------------------------------------
# Checkpoints: weights (and optimizer moments, unless weights only) in safetensors shards, the rest in JSON.


def save_checkpoint(directory: Path, model: DiffusionLM, opt: torch.optim.Optimizer, state: dict, cfg: TrainConfig) -> None:
    """The run's state in ``directory``, replaced whole (written beside it, then renamed): the
    weights in files of at most ``cfg.shard_mib`` MiB, in bf16 where ``cfg.weights_only`` (then
    without the optimizer's moments), and state.json."""
    limit = int(cfg.shard_mib * (1 << 20))
    tmp = directory.with_name(directory.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    save_model(model, tmp, shard_bytes=limit, dtype=torch.bfloat16 if cfg.weights_only else None)
    if not cfg.weights_only:
        moments = {f"{i}.{k}": v.detach().to("cpu").contiguous().reshape(v.shape)
                   for i, st in opt.state_dict()["state"].items() for k, v in st.items()}
        shards.write(moments, tmp / "optimizer", limit)
    (tmp / "state.json").write_text(json.dumps(state, indent=1))
    if directory.exists():
        old = directory.with_name(directory.name + ".old")
        directory.rename(old)
        tmp.rename(directory)
        shutil.rmtree(old)
    else:
        tmp.rename(directory)


def load_checkpoint(directory: Path, model: DiffusionLM, opt: torch.optim.Optimizer, device) -> dict:
    """The state a checkpoint holds, its weights loaded into ``model`` and, where it has them, its
    moments into ``opt``; without them (weights only) ``warm_from`` is the step it resumes at."""
    cfg, _ = read_config(directory)
    if cfg != model.cfg:
        raise ModelLoadError(f"{directory}: checkpoint is of another architecture ({cfg} != {model.cfg})")
    trained = load_model(directory, device=str(device))
    model.load_state_dict(trained.state_dict())
    state = json.loads((directory / "state.json").read_text())
    if not (directory / "optimizer").is_dir():
        state["warm_from"] = state["step"]
        return state
    sd = opt.state_dict()
    moments: dict = {}
    for key, v in shards.read(directory / "optimizer").items():
        i, name = key.split(".", 1)
        moments.setdefault(int(i), {})[name] = v.to(device) if name != "step" else v
    sd["state"] = moments
    opt.load_state_dict(sd)
    return state


def init_weights(model: DiffusionLM, source: Path, device) -> dict:
    """Load an exported model's weights into ``model`` (same architecture) for continued training.

    Returns what the card needs to report the whole history: the source's path and its training facts.
    """
    src_cfg, data = read_config(source)
    if src_cfg != model.cfg:
        raise ModelLoadError(f"{source}: --init-from model is of another architecture ({src_cfg} != {model.cfg})")
    model.load_state_dict(load_model(source, device=str(device)).state_dict())
    prior = data.get("training", {})
    return {"path": str(source), "name": data.get("name"),
            **{k: prior.get(k) for k in ("steps", "tokens_seen", "window_slots_seen", "train_seconds", "final_valid_loss", "init_from")},
            "config": {k: prior.get("config", {}).get(k) for k in ("max_minutes", "steps", "lr", "seed", "batch_size", "objective")}}


# ----------------------------------------------------------------------------------------------
# The stages.


def ensure_corpus(cfg: TrainConfig) -> Path:
    corpus = cfg.corpus_dir or cfg.run_dir / "corpus"
    if not split_file(corpus, "train").is_file():
        log.info("building the corpus in %s", corpus)
        build_corpus(CorpusConfig(seed=cfg.seed), corpus)
    return corpus


def ensure_tokenizer(cfg: TrainConfig, corpus: Path) -> Tokenizer:
    """The run's tokenizer: the one given, the run's own, the initial model's, or one trained here."""
    path = cfg.tokenizer or cfg.run_dir / "tokenizer.json"
    if cfg.init_from is not None:
        path = _init_tokenizer(cfg.init_from, cfg.tokenizer)
    if path.is_file():
        return Tokenizer.from_file(path)
    log.info("training a %d-token BPE tokenizer", cfg.vocab_size)
    rng = random.Random(cfg.seed)
    texts, total = [], 0
    docs = [d["text"] for d in iter_documents(split_file(corpus, "train"))]
    rng.shuffle(docs)
    for t in docs:
        if total >= cfg.tokenizer_sample_bytes:
            break
        texts.append(t)
        total += len(t)
    if not texts:
        raise InputError(f"{corpus}: the corpus is empty; nothing to train a tokenizer on")
    tok = train_tokenizer(texts, vocab_size=cfg.vocab_size)
    path.parent.mkdir(parents=True, exist_ok=True)
    tok.save(path)
    return tok


def _init_tokenizer(init_from: Path, given: Path | None) -> Path:
    """Weights continued from a model mean its token ids: train with its tokenizer, never another."""
    own = init_from / "tokenizer.json"
    if not own.is_file():
        raise InputError(f"{init_from}: no tokenizer.json beside the weights to continue from")
    if given is not None and (not given.is_file() or given.read_bytes() != own.read_bytes()):
        raise InputError(f"--tokenizer {given} is not the tokenizer {init_from} was trained with ({own})")
    return own


def evaluate(model: DiffusionLM, batches: list, device) -> float:
    model.eval()
    with torch.no_grad():
        losses = [float(diffusion_loss(model, _to(b, device))) for b in batches]
    model.train()
    return sum(losses) / len(losses)


def _to(batch, device):
    if device.type == "cpu":
        return batch
    return replace(batch, **{k: getattr(batch, k).to(device, non_blocking=True) for k in ("ids", "pos", "seg", "is_win", "target", "weight")})


def train(cfg: TrainConfig) -> Path:
    """Run every stage; return the exported model directory."""
    from infill.model.device import resolve_device, resolve_dtype

    cfg.run_dir.mkdir(parents=True, exist_ok=True)
    corpus = ensure_corpus(cfg)
    tok = ensure_tokenizer(cfg, corpus)
    vocab = 64 * math.ceil(tok.vocab_size / 64)
    mcfg = replace(cfg.model, vocab_size=vocab, pad_id=tok.pad_id, mask_id=tok.mask_id, eos_id=tok.eos_id)
    device = resolve_device(cfg.device)
    torch.manual_seed(cfg.seed)
    model = DiffusionLM(mcfg).to(device)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=cfg.lr, betas=(0.9, 0.95), eps=1e-8,
    )
    ckpt = cfg.run_dir / "checkpoint"
    state = {"step": 0, "tokens_seen": 0, "window_slots_seen": 0, "train_seconds": 0.0, "history": []}
    if (ckpt / "state.json").is_file():
        state = load_checkpoint(ckpt, model, opt, device)
        log.info("resumed from step %d", state["step"])
    elif cfg.init_from is not None:
        state["init_from"] = init_weights(model, cfg.init_from, device)
        log.info("initialised from %s", cfg.init_from)
    train_docs = Documents(split_file(corpus, "train"), cfg.max_doc_chars)
    valid_docs = Documents(split_file(corpus, "valid"), cfg.max_doc_chars)
    valid = [draw_batch(valid_docs, tok, cfg, random.Random(10_000 + i)) for i in range(cfg.eval_batches)]
    def step_fn(model, batch):
        return diffusion_loss(model, batch, cfg.objective.context_weight, cfg.objective.context_stride)

    bf16 = resolve_dtype(cfg.precision, device) == torch.bfloat16  # autocast where bf16 is native
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16)
    if device.type == "cuda":
        step_fn = torch.compile(step_fn)
    model.train()
    log.info("model %.2fM parameters; %d train files; device %s; bf16 %s", mcfg.n_params() / 1e6, len(train_docs.texts), device, bf16)
    t_seg = time.time()
    seconds_before = state["train_seconds"]
    while progress(state["step"], state["train_seconds"], cfg) < 1.0:
        step = state["step"]
        done = progress(step, state["train_seconds"], cfg)
        batch = _to(draw_batch(train_docs, tok, cfg, random.Random(cfg.seed * 1_000_003 + step)), device)
        for g in opt.param_groups:
            g["lr"] = lr_at(step, done, cfg, state.get("warm_from", 0))
        with autocast:
            loss = step_fn(model, batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        state["step"] = step + 1
        state["tokens_seen"] += int(((batch.seg >= 0) | batch.is_win).sum())
        state["window_slots_seen"] += batch.n_window_slots
        state["train_seconds"] = seconds_before + time.time() - t_seg
        record = {"step": step + 1, "loss": loss.item(), "lr": opt.param_groups[0]["lr"], "grad_norm": float(gnorm),
                  "seconds": round(state["train_seconds"], 1), "tokens": state["tokens_seen"]}
        finished = progress(state["step"], state["train_seconds"], cfg) >= 1.0
        if (step + 1) % cfg.eval_every == 0 or finished:
            record["valid_loss"] = evaluate(model, valid, device)
        if (step + 1) % cfg.log_every == 0 or "valid_loss" in record:
            rate = state["tokens_seen"] / max(state["train_seconds"], 1e-9)
            log.info("step %d loss %.4f %s lr %.2e %.0f tok/s", step + 1, record["loss"],
                     f"valid {record['valid_loss']:.4f}" if "valid_loss" in record else "", record["lr"], rate)
        state["history"].append(record)
        if (step + 1) % cfg.ckpt_every == 0 or finished:
            save_checkpoint(ckpt, model, opt, state, cfg)
    return export(cfg, model, tok, state, corpus, device)


def export(cfg: TrainConfig, model: DiffusionLM, tok: Tokenizer, state: dict, corpus: Path, device) -> Path:
    out = cfg.run_dir / "model"
    manifest_path = corpus / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    valid = [r["valid_loss"] for r in state["history"] if "valid_loss" in r]
    facts = {
        "name": f"infill-diffusion-{model.cfg.n_params() / 1e6:.1f}M",
        "training": {
            "steps": state["step"],
            "tokens_seen": state["tokens_seen"],
            "window_slots_seen": state["window_slots_seen"],
            "train_seconds": round(state["train_seconds"], 1),
            "device": str(device) if device.type == "cpu" else torch.cuda.get_device_name(device),
            "machine": f"{platform.machine()} {platform.processor() or ''} {torch.get_num_threads()} threads".strip(),
            "torch": torch.__version__,
            "final_valid_loss": valid[-1] if valid else None,
            "config": json.loads(json.dumps(asdict(cfg), default=str)),
            "corpus": {k: manifest.get(k) for k in ("totals", "python") if k in manifest},
            "init_from": state.get("init_from"),
        },
    }
    save_model(model, out, extra=facts, shard_bytes=int(cfg.shard_mib * (1 << 20)),
               dtype=torch.bfloat16 if cfg.weights_only else None)
    tok.save(out / "tokenizer.json")
    (cfg.run_dir / "history.json").write_text(json.dumps(state["history"]))
    model_card.plot_losses(model_card.run_chain(state.get("init_from"), state["history"], cfg.run_dir), out / "loss.png")
    model_card.write(out, manifest_path)
    log.info("exported %s", out)
    return out


# ----------------------------------------------------------------------------------------------
# Command line.


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run-dir", type=Path, default=Path("runs/default"), help="where every stage writes (default: runs/default)")
    p.add_argument("--preset", choices=sorted(PRESETS), default="cpu", help="model and batch sizes (tiny: a smoke test)")
    p.add_argument("--corpus", type=Path, help="use an existing corpus directory (train.jsonl, valid.jsonl, or packed: "
                   "their .xz forms, infill corpus pack)")
    p.add_argument("--tokenizer", type=Path, help="use an existing tokenizer.json")
    p.add_argument("--vocab-size", type=int, default=8192)
    p.add_argument("--steps", type=int, help="training steps (default: the preset's)")
    p.add_argument("--batch-size", type=int, help="rows per step (default: the preset's)")
    p.add_argument("--seq-len", type=int, help="tokens per row (default: the preset's)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="auto")
    p.add_argument("--max-minutes", type=float, help="training time budget: the learning rate decays and training ends by then")
    p.add_argument("--precision", choices=("auto", "fp32", "bf16"), default="auto")
    p.add_argument("--context-stride", type=int, default=1,
                   help="count the context tokens' next-token loss at every n-th position (default 1: all)")
    p.add_argument("--init-from", type=Path, help="continue training an exported model (its weights; a fresh optimizer and schedule)")
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--ckpt-every", type=int, default=250)
    p.add_argument("--shard-mib", type=float, help="checkpoint and exported weights in files of at most this many MiB "
                   "(default: the preset's; 16)")
    p.add_argument("--weights-only", action=argparse.BooleanOptionalAction, default=None,
                   help="checkpoints hold bf16 weights alone, small enough to commit; a resumed run warms its "
                   "learning rate up again (default: the preset's; the gpu preset's are)")


def config_from_args(a: argparse.Namespace) -> TrainConfig:
    msizes, osizes, batch, steps, ckpt = PRESETS[a.preset]
    objective = replace(ObjectiveConfig(**osizes), context_stride=max(1, a.context_stride),
                        **({"seq_len": a.seq_len} if a.seq_len else {}))
    return TrainConfig(
        run_dir=a.run_dir, corpus_dir=a.corpus, tokenizer=a.tokenizer, vocab_size=a.vocab_size,
        model=ModelConfig(**msizes), objective=objective, batch_size=a.batch_size or batch,
        steps=a.steps or steps, lr=a.lr, seed=a.seed, device=a.device, max_minutes=a.max_minutes, precision=a.precision,
        eval_every=a.eval_every, ckpt_every=a.ckpt_every, init_from=a.init_from,
        warmup=min(100, max(1, (a.steps or steps) // 10)),
        shard_mib=a.shard_mib or ckpt.get("shard_mib", TrainConfig.shard_mib),
        weights_only=a.weights_only if a.weights_only is not None else ckpt.get("weights_only", False),
    )


def main(a: argparse.Namespace) -> int:
    out = train(config_from_args(a))
    print(out)
    return 0
