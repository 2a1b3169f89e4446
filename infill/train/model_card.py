"""MODEL_CARD.md for an exported model: the facts `infill train` recorded, rendered as Markdown.

Reads the model directory's config.json (architecture, sizes, training facts), the corpus
manifest (packages, versions, licenses, splits) and, when given, `infill bench quality` summaries.
It measures nothing itself: every figure in the card comes from those files, and the loss plot
from the runs' history.json files.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

log = logging.getLogger(__name__)


def _row(*cells) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _runs(t: dict) -> list[dict]:
    """This run's training facts, then those of each run it continued (``--init-from``), newest first."""
    runs = [t]
    while runs[-1].get("init_from"):
        runs.append(runs[-1]["init_from"])
    return runs


def _history(t: dict) -> list[str]:
    """Lines on the runs this one continued, with the totals."""
    runs = _runs(t)
    chain = runs[1:]
    if not chain:
        return []
    out = ["", "Continued from " + "; from ".join(
        f"`{c.get('path')}` ({c.get('steps')} steps, {(c.get('tokens_seen') or 0) / 1e6:.1f}M tokens, "
        f"{(c.get('train_seconds') or 0) / 60:.1f} min, validation loss {c.get('final_valid_loss') or float('nan'):.3f})"
        for c in chain) + " (its weights; a fresh optimizer and schedule)."]
    out.append(f"In all: {sum(r.get('steps') or 0 for r in runs)} steps, "
               f"{sum(r.get('tokens_seen') or 0 for r in runs) / 1e6:.1f}M tokens, "
               f"{sum(r.get('train_seconds') or 0 for r in runs) / 60:.1f} min of training.")
    return out


def _command(cfg: dict, run_dir: str, init_from: str | None) -> str:
    budget = f"--max-minutes {cfg['max_minutes']:g}" if cfg.get("max_minutes") else f"--steps {cfg.get('steps')}"
    extra = "".join(f" --{k} {cfg[k]:g}" for k in ("lr", "seed") if cfg.get(k) is not None and cfg[k] != {"lr": 1e-3, "seed": 0}[k])
    stride = (cfg.get("objective") or {}).get("context_stride", 1)
    extra += f" --context-stride {stride}" if stride != 1 else ""
    init = f" --init-from {init_from}" if init_from else ""
    return f"`infill train --preset cpu{init} {budget}{extra} --run-dir {run_dir}`"


def _reproduce(t: dict) -> str:
    """The `infill train` commands that made this model, first run first."""
    runs = _runs(t)[::-1]
    cmds, previous = [], None
    for i, r in enumerate(runs):
        run_dir = f"runs/cpu-{i + 1}" if len(runs) > 1 else "runs/cpu"
        cmds.append(_command(r.get("config") or {}, run_dir, previous and f"{previous}/model"))
        previous = run_dir
    return ", then ".join(cmds)


def corpus_section(manifest: dict) -> list[str]:
    """The card's corpus lines: for a registry corpus (``infill corpus fetch``) the totals per
    language and per source and the licences; for the installed-packages corpus every package."""
    totals = manifest.get("totals", {})
    if manifest.get("kind") == "registries":
        out = [
            f"Source files from package registries (built {manifest.get('date')} by `infill corpus fetch`):",
            f"{totals.get('packages')} packages, {totals.get('files')} files, {totals.get('bytes', 0) / 1e6:.0f} MB after",
            "permissive-licence filtering (each package's own metadata, licence file or debian/copyright), file filters",
            f"and exact plus near-duplicate removal (MinHash, Jaccard >= {manifest.get('config', {}).get('near_threshold')}).",
            "Validation is held out by package. No benchmark data. Every package, its version, licence and",
            "where the licence was read are listed in the corpus's manifest.json.",
            "",
            _row("language", "files", "MB"),
            _row("---", "---", "---"),
        ]
        for lang, t in totals.get("languages", {}).items():
            out.append(_row(lang, t["files"], f"{t['bytes'] / 1e6:.1f}"))
        out += ["", _row("source", "packages", "excluded", "MB"), _row("---", "---", "---", "---")]
        for src, t in totals.get("sources", {}).items():
            out.append(_row(src, t.get("packages", 0), t.get("excluded", 0), f"{t.get('bytes', 0) / 1e6:.1f}"))
        counts: dict[str, int] = {}
        for p in manifest.get("packages", []):
            counts[p["license"]] = counts.get(p["license"], 0) + 1
        top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:12]
        out += ["", "Licences (packages): " + ", ".join(f"{lic} ({n})" for lic, n in top)
                + (", ..." if len(counts) > len(top) else "") + "."]
        return out
    out = [
        f"Python source installed on the training machine (Python {manifest.get('python')}, built {manifest.get('date')}):",
        f"{totals.get('files')} files, {totals.get('bytes', 0) / 1e6:.0f} MB after license filtering and",
        "deduplication by content. Validation is held out by package. No benchmark data.",
        "",
        _row("package", "version", "license", "files", "split"),
        _row("---", "---", "---", "---", "---"),
    ]
    for p in manifest.get("packages", []):
        out.append(_row(p["name"], p["version"], p["license"], p["files"], p["split"]))
    if manifest.get("excluded"):
        out += ["", "Excluded: " + "; ".join(f"{e['name']} ({e['reason']})" for e in manifest["excluded"]) + "."]
    return out


def render(model_dir: Path, manifest: dict, quality: list[dict] = (), notes: str = "") -> str:
    data = json.loads((Path(model_dir) / "config.json").read_text())
    m, t = data["model"], data.get("training", {})
    cfg = t.get("config", {})
    n_params = m["vocab_size"] * m["d_model"] + m["n_layers"] * (4 * m["d_model"] ** 2 + 3 * m["d_model"] * m["d_ff"] + 2 * m["d_model"]) + m["d_model"]
    out = [
        f"# {data.get('name', 'infill model')}",
        "",
        "A masked-diffusion language model for code infilling, trained by `infill train`.",
        "",
        "## Architecture",
        "",
        f"Transformer with the segment/window attention layout ({data['architecture']}): context segments are",
        "causal and see only themselves (so their keys and values are cached exactly across fills and keystrokes);",
        "fill windows see all context and each other bidirectionally. RoPE, RMSNorm, SwiGLU, tied embeddings.",
        "",
        _row("parameters", "d_model", "layers", "heads", "d_ff", "vocabulary", "context (trained)"),
        _row("---", "---", "---", "---", "---", "---", "---"),
        _row(f"{n_params / 1e6:.2f}M", m["d_model"], m["n_layers"], m["n_heads"], m["d_ff"], m["vocab_size"], m["max_context"]),
        "",
        "Tokenizer: byte-level BPE (`tokenizers`), special tokens `<|pad|>`=0, `<|mask|>`=1, `<|eos|>`=2;",
        "whitespace and indentation round-trip exactly.",
        "",
        "## Training",
        "",
        _row("steps", "tokens seen", "window slots seen", "train time", "device", "final validation loss"),
        _row("---", "---", "---", "---", "---", "---"),
        _row(t.get("steps"), f"{t.get('tokens_seen', 0) / 1e6:.1f}M", f"{t.get('window_slots_seen', 0) / 1e6:.1f}M",
             f"{t.get('train_seconds', 0) / 60:.1f} min", f"{t.get('device')} ({t.get('machine')})",
             f"{t['final_valid_loss']:.3f}" if t.get("final_valid_loss") is not None else "n/a"),
        *_history(t),
        "",
        f"Objective: masked diffusion (a mask ratio t ~ U(0.05, 1) per row, loss weighted 1/t) over fill windows,",
        f"mixed: {1 - cfg.get('objective', {}).get('p_plain', 0.2):.0%} infilling rows (a whole line, the rest of a line, a few lines,",
        "an indented block, a random span or nothing, in a window longer than the span, padded) with",
        f"{cfg.get('objective', {}).get('p_multi', 0.15):.0%} of them multi-hole, and plain-diffusion rows; plus the next-token loss of",
        f"the causal context segments (weight {cfg.get('objective', {}).get('context_weight', 0)}"
        + (f", at every {stride}th position" if (stride := cfg.get("objective", {}).get("context_stride", 1)) > 1 else "") + ").",
        f"Rows of {cfg.get('objective', {}).get('seq_len')} tokens, batch {cfg.get('batch_size')}, AdamW lr {cfg.get('lr')}",
        f"(warmup, constant, linear decay over the last {cfg.get('decay_fraction', 0.25):.0%}), precision {cfg.get('precision')}, torch {t.get('torch')}.",
        "",
        "![loss curves](loss.png)",
        "",
        "Reproduce: " + _reproduce(t) + " (the schedule is time-based, so a faster machine sees more tokens).",
        "",
        "## Corpus",
        "",
    ]
    out += corpus_section(manifest)
    out += ["", "## Evaluation", ""]
    if quality:
        out += [
            "HumanEval-Infilling, one greedy sample per task, execution-judged in a sandbox (`infill bench quality`).",
            "",
            _row("benchmark", "tasks", "pass@1", "parses", "exact match", "settings"),
            _row("---", "---", "---", "---", "---", "---"),
        ]
        for q in quality:
            met = q.get("metrics", q)
            st = q.get("settings", {})
            opts = {k: v for k, v in st.get("options", {}).items() if v is not None}
            settings = f"max_tokens {st.get('max_tokens')}, limit {st.get('limit')}, " + ", ".join(f"{k} {v}" for k, v in opts.items())
            out.append(_row(q.get("benchmark"), q.get("n_tasks"), f"{met.get('pass@1', 0):.1%}", f"{met.get('parse_rate', 0):.1%}",
                            f"{met.get('exact_match', 0):.1%}", settings))
    else:
        out.append("Not evaluated yet: run `infill bench quality single-line` and `multi-line`.")
    if notes:
        out += ["", notes.strip()]
    return "\n".join(out) + "\n"


def write(model_dir: Path, manifest_path: Path | None, quality_summaries: list[Path] = (), notes: str = "") -> Path:
    """Render and write MODEL_CARD.md into model_dir; returns its path."""
    manifest = json.loads(Path(manifest_path).read_text()) if manifest_path and Path(manifest_path).is_file() else {}
    quality = [json.loads(Path(q).read_text()) for q in quality_summaries]
    path = Path(model_dir) / "MODEL_CARD.md"
    path.write_text(render(model_dir, manifest, quality, notes))
    return path


def run_chain(init_from: dict | None, history: list[dict], run_dir: Path) -> list[tuple[str, list[dict]]]:
    """(run directory, loss history) of the runs a run continued (``--init-from``, as its training
    facts record them) whose history.json is still on disk, oldest first, then its own."""
    chain = []
    for source in _runs({"init_from": init_from})[1:]:
        path = Path(source.get("path") or "").parent / "history.json"
        if path.is_file():
            chain.append((str(path.parent), json.loads(path.read_text())))
    return chain[::-1] + [(str(run_dir), history)]


def plot_losses(runs: list[tuple[str, list[dict]]], path: Path) -> None:
    """Training and validation loss of one run or a chain of runs, against tokens seen."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log.warning("matplotlib is not installed: no loss plot")
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    offset = 0
    for i, (name, history) in enumerate(runs):
        if not history:
            continue
        x = [(offset + r["tokens"]) / 1e6 for r in history]
        loss = [r["loss"] for r in history]
        k = max(1, len(loss) // 100)
        smooth = [sum(loss[max(0, j - k) : j + 1]) / len(loss[max(0, j - k) : j + 1]) for j in range(len(loss))]
        last = i == len(runs) - 1
        ax.plot(x, loss, alpha=0.2, color="tab:blue", label="train: diffusion + context next-token (per step)" if last else None)
        ax.plot(x, smooth, color="tab:blue", label="train (smoothed)" if last else None)
        v = [((offset + r["tokens"]) / 1e6, r["valid_loss"]) for r in history if "valid_loss" in r]
        if v:
            ax.plot(*zip(*v), "o-", ms=3, color="tab:orange", label="validation: diffusion loss (held-out packages)" if last else None)
        if i:
            ax.axvline(offset / 1e6, color="gray", lw=0.8, ls="--")
            ax.text(offset / 1e6, 0.02, f" {Path(name).name}", transform=ax.get_xaxis_transform(), va="bottom", fontsize=8, color="gray")
        offset += history[-1]["tokens"]
    ax.set_xlabel("tokens seen (millions)" + (", runs continued from one another" if len(runs) > 1 else ""))
    ax.set_ylabel("loss (nats)")
    ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --- command line (wired by infill/cli.py as `infill card`) ----------------------------------------


def add_arguments(p) -> None:
    p.add_argument("model_dir", type=Path, metavar="MODEL_DIR", help="an exported model directory")
    p.add_argument("--manifest", type=Path, help="the corpus manifest.json (packages, licenses)")
    p.add_argument("--quality", type=Path, nargs="*", default=[], metavar="SUMMARY",
                   help="`infill bench quality` summary.json files for the evaluation table")
    p.add_argument("--notes", type=Path, help="a Markdown file appended after the evaluation")


def main(args) -> int:
    from infill.errors import InputError

    for path in [args.model_dir / "config.json", args.manifest, *args.quality, args.notes]:
        if path is not None and not Path(path).is_file():
            raise InputError(f"{path}: no such file")
    notes = args.notes.read_text(encoding="utf-8") if args.notes else ""
    history = args.model_dir.parent / "history.json"  # the run directory's, when the model is still in it
    if history.is_file():
        t = json.loads((args.model_dir / "config.json").read_text()).get("training", {})
        plot_losses(run_chain(t.get("init_from"), json.loads(history.read_text()), args.model_dir.parent),
                    args.model_dir / "loss.png")
    print(write(args.model_dir, args.manifest, args.quality, notes))
    return 0
