"""`infill bench calibrate`: precision against coverage of the fill score, and the threshold to stay quiet.

A suggestion is *shown* where its fill is judged valid, is not blank, and scores (Fill.score:
the log-probability of the whole fill, its tokens and its end) at least the threshold; it is *right* where it passes
its tests (`infill bench quality` records) or equals the hidden text, whitespace aside
(`infill bench validity` records, their constrained fills; one language's directories from
several seeds pool into one set, and with several languages all of them pool into one more,
``real code: all languages``). For each set of records:
coverage = shown / requests, precision = right / shown, at every threshold.

The threshold is chosen on one set (the calibration set: the first given, or ``--calibrate-on``
NAME): the lowest score at which precision there is at least ``--target`` (more coverage, as long
as the target holds); or it is given (``--threshold``: what a model's ``min_score`` does on sets it
was not chosen on). The other
sets report what that threshold gives on samples it was not chosen on. Given real code of several
runs (seeds), each run is also held out in turn (``held_out``): the threshold chosen on the others
and read on it, which says how far the target is likely to hold on a fresh seed. ``--write-config DIR``
stores it as DIR/config.json's ``min_score`` (what the language server uses by default).

Reads result files only: it runs no model. It does not choose per language.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from infill.errors import InputError

GRID = (-0.1, -0.25, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -5.0, -6.0, -8.0, -10.0, -15.0, float("-inf"))  # (a whole fill's log-probability)


def read_set(path: Path) -> tuple[str, list[dict]]:
    """(name, [{score, shown_ok, right}]) of one results directory (or results.jsonl file)."""
    path = Path(path)
    file = path if path.is_file() else path / "results.jsonl"
    if not file.is_file():
        raise InputError(f"{path}: no results.jsonl")
    rows = []
    for line in file.read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        if r.get("mode", "constrained") != "constrained":
            continue
        if "passed" in r:  # infill bench quality
            right = bool(r["passed"])
        else:  # infill bench validity
            right = bool(r.get("exact_stripped"))
        fill = r.get("fill") or ""
        rows.append({"score": r.get("score"), "ok": r.get("valid") is not False and r.get("engine_valid", True) is not False
                     and bool(fill.strip()) and r.get("score") is not None, "right": right})
    if not rows:
        raise InputError(f"{file}: no constrained records")
    name = file.parent.name if file.parent.name not in ("", ".") else file.name
    if not any("passed" in line for line in file.read_text(encoding="utf-8").splitlines()[:1]):
        name = f"real code: {name}"  # a validity run's language directory (seeds of one language pool)
    return name, rows


def curve(rows: list[dict], thresholds=GRID) -> list[dict]:
    """Coverage and precision of ``rows`` at each threshold."""
    out = []
    for t in thresholds:
        shown = [r for r in rows if r["ok"] and r["score"] >= t]
        out.append({"threshold": t, "coverage": len(shown) / len(rows),
                    "precision": sum(r["right"] for r in shown) / len(shown) if shown else None, "shown": len(shown)})
    return out


def choose(rows: list[dict], target: float) -> float | None:
    """The lowest score threshold whose precision on ``rows`` is at least ``target`` (None: none is)."""
    best = None
    for s in sorted({r["score"] for r in rows if r["ok"]}, reverse=True):
        shown = [r for r in rows if r["ok"] and r["score"] >= s]
        if sum(r["right"] for r in shown) / len(shown) >= target:
            best = s
    return best


def held_out(runs: dict[str, list[dict]], target: float) -> dict:
    """How a threshold chosen for ``target`` does on a run it was not chosen on: each run (one seed's
    records, every language pooled) held out in turn, the threshold chosen on the others pooled and
    read on it; and all held-out runs pooled (coverage and precision over their requests)."""
    per, shown, right, requests = {}, 0, 0, 0
    for name, rows in runs.items():
        rest = [r for other, rs in runs.items() if other != name for r in rs]
        t = choose(rest, target)
        at = curve(rows, [t])[0] if t is not None else {"coverage": 0.0, "precision": None, "shown": 0}
        per[name] = {"threshold": t, **at}
        shown += at["shown"]
        right += sum(r["right"] for r in rows if t is not None and r["ok"] and r["score"] >= t)
        requests += len(rows)
    return {"target_precision": target, "runs": per,
            "pooled": {"coverage": shown / requests if requests else 0.0, "precision": right / shown if shown else None,
                       "shown": shown, "requests": requests}}


def plot(sets: dict[str, list[dict]], chosen: float | None, path: Path, calibration: str | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.2, 4.8))
    colors = plt.get_cmap("tab20").colors
    for i, (name, rows) in enumerate(sets.items()):
        scores = sorted({r["score"] for r in rows if r["ok"]}, reverse=True)
        pts = [(c["coverage"], c["precision"]) for c in curve(rows, scores) if c["precision"] is not None]
        color = colors[(2 * i) % len(colors) + (i * 2 // len(colors)) % 2]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "-", color=color, label=name,
                linewidth=2.4 if name == calibration else 1.4 if i < 2 else 1.0)
        if chosen is not None:
            at = curve(rows, [chosen])[0]
            if at["precision"] is not None:
                ax.plot([at["coverage"]], [at["precision"]], "o", color=color)
    ax.set_xlabel("coverage (share of requests that get a suggestion)")
    ax.set_ylabel("precision (share of shown suggestions that are right)")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    title = "Staying quiet by score"
    if chosen is not None:
        title += f": dots at the default threshold {chosen:.3f}"
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


POOLED = "real code: all languages"


def run(results: list[Path], target: float, out: Path | None, write_config: Path | None, console: Console,
        calibrate_on: str | None = None, threshold: float | None = None) -> dict:
    sets: dict[str, list[dict]] = {}
    runs: dict[str, list[dict]] = {}  # real code by run (a language directory's parent: one seed's run)
    for p in results:  # sets of the same name (one language's holes under several seeds) pool
        name, rows = read_set(p)
        sets.setdefault(name, []).extend(rows)
        if name.startswith("real code: "):
            runs.setdefault(str(Path(p).resolve().parent), []).extend(rows)
    real = [name for name in sets if name.startswith("real code: ")]
    if len(real) > 1:
        sets[POOLED] = [r for name in real for r in sets[name]]
    first = calibrate_on or next(iter(sets))
    if first not in sets:
        raise InputError(f"--calibrate-on {first!r}: no such set (sets: {', '.join(sets)})")
    chosen = choose(sets[first], target) if threshold is None else threshold
    summary = {"calibration_set": first if threshold is None else None, "target_precision": target, "threshold": chosen,
               "sets": {name: {"requests": len(rows), "at_threshold": curve(rows, [chosen])[0] if chosen is not None else None,
                               "all_shown": curve(rows, [float("-inf")])[0], "curve": curve(rows)}
                        for name, rows in sets.items()}}
    how = f"chosen on {first} for precision >= {target}" if threshold is None else "given"
    table = Table(title=f"threshold {chosen} ({how})")
    for col in ("set", "requests", "coverage", "precision", "coverage (all)", "precision (all)"):
        table.add_column(col)
    for name, s in summary["sets"].items():
        at, every = s["at_threshold"] or {}, s["all_shown"]
        fmt = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
        table.add_row(name, str(s["requests"]), fmt(at.get("coverage")), fmt(at.get("precision")),
                      fmt(every["coverage"]), fmt(every["precision"]))
    console.print(table)
    if threshold is None and len(runs) > 1:
        summary["held_out"] = held_out(runs, target)
        ho = Table(title=f"each run held out: the threshold chosen on the others' real code for precision >= {target}")
        for col in ("held-out run", "threshold", "coverage", "precision"):
            ho.add_column(col)
        for name, r in summary["held_out"]["runs"].items():
            ho.add_row(Path(name).name, fmt(r["threshold"]), fmt(r["coverage"]), fmt(r["precision"]))
        pooled = summary["held_out"]["pooled"]
        ho.add_row("all held out, pooled", "", fmt(pooled["coverage"]), fmt(pooled["precision"]))
        console.print(ho)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
        try:
            plot(sets, chosen, out / "precision_coverage.png", first if threshold is None else None)
        except ImportError:
            console.print("matplotlib is not installed: no plot (pip install 'infill[plots]')")
    if write_config is not None and chosen is not None:
        path = write_config / "config.json"
        data = json.loads(path.read_text(encoding="utf-8"))
        data["min_score"] = round(chosen, 4)
        path.write_text(json.dumps(data, indent=1) + "\n")
    return summary


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", type=Path, nargs="+", metavar="RESULTS",
                        help="results directories of infill bench quality / validity (per language); the first calibrates")
    parser.add_argument("--target", type=float, default=0.5, help="the precision to reach on the calibration set")
    parser.add_argument("--calibrate-on", default=None, metavar="NAME",
                        help=f"the set that calibrates, by its name in the table (e.g. '{POOLED}'); default: the first given")
    parser.add_argument("--threshold", type=float, default=None,
                        help="report at this threshold (e.g. a model's min_score) instead of choosing one")
    parser.add_argument("--out", type=Path, default=None, help="write summary.json and precision_coverage.png here")
    parser.add_argument("--write-config", type=Path, default=None, metavar="MODEL_DIR",
                        help="store the threshold as MODEL_DIR/config.json's min_score")


def main(args: argparse.Namespace) -> int:
    if args.threshold is not None and args.write_config is not None:
        raise InputError("--threshold reports at a given threshold; --write-config stores a chosen one: not both")
    run(args.results, args.target, args.out, args.write_config, Console(), args.calibrate_on, args.threshold)
    return 0
