"""`infill bench overhead`: what the syntax constraint costs, timed in pairs.

The same HumanEval-Infilling requests are filled with the constraint off and on, batch by batch in
turn within one process (each mode first in every other batch), so the machine's drift (which
moves separate runs by up to 1.5x on a shared CPU) and what a batch's first fill warms (the
tokenizer's cache) fall on both modes alike. Each fill starts from a cold context cache: neither mode
reuses the other's encodings. Reported: generation seconds of each mode and their ratio (the
issue's target: at most 1.3x), CPython's parse rate and the engine's validity of each mode's
fills, and how many constrained fills took the retry round. Nothing is executed (pass@1 is
`infill bench quality`'s).

It does not time anything but ``fill_batch``; it does not judge fills beyond parsing. A request
the engine refuses fails its task in that mode (as in `infill bench quality`), not the run.
"""

from __future__ import annotations

import argparse
import datetime
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from infill.protocol import FillResult, SamplingOptions
from infill.bench.quality import (BENCHMARKS, DEFAULT_MAX_TOKENS, DEFAULT_OUT_ROOT, _progress, build_request, generate, load_tasks,
                      machine_info, parses, write_results)

MODES = {"unconstrained": False, "constrained": True}
TARGET_RATIO = 1.3


def run_overhead(engine, benchmark: str, *, limit: int | None = None, data_dir: Path | str | None = None,
                 out_dir: Path | str | None = None, max_tokens: int | None = None, batch_size: int = 8,
                 subset_seed: int = 0, progress: bool = True) -> dict:
    """Fill every task's hole in both modes, batch by batch in turn; write and return the summary."""
    max_tokens = max_tokens or DEFAULT_MAX_TOKENS[benchmark]
    tasks = load_tasks(benchmark, data_dir, limit, subset_seed)
    seconds = dict.fromkeys(MODES, 0.0)
    results: dict[str, list] = {mode: [] for mode in MODES}
    clear = getattr(getattr(engine, "context_cache", None), "clear", None)
    with _progress(progress) as bar:
        job = bar.add_task("filling off and on", total=len(tasks))
        for i in range(0, len(tasks), batch_size):
            order = list(MODES.items())[:: -1 if (i // batch_size) % 2 else 1]  # either mode first in turn
            for mode, constrained in order:
                batch = [build_request(t, max_tokens, SamplingOptions(constrained=constrained)) for t in tasks[i:i + batch_size]]
                if clear is not None:
                    clear()
                t0 = time.perf_counter()
                results[mode] += generate(engine, batch, len(batch), progress=False)  # an error fails its task only
                seconds[mode] += time.perf_counter() - t0
            bar.advance(job, len(tasks[i:i + batch_size]))
    records = []
    for j, task in enumerate(tasks):
        rec = {"task_id": task.task_id}
        for mode in MODES:
            r = results[mode][j]
            if isinstance(r, FillResult):
                rec[mode] = {"fill": r.fills[0].text, "parses": parses(task.prompt + r.fills[0].text + task.suffix),
                             "valid": r.fills[0].valid, "rounds": r.timings.rounds}
            else:
                rec[mode] = {"fill": "", "parses": False, "valid": None, "rounds": 0, "error": str(r)}
        records.append(rec)
    n = max(len(tasks), 1)
    metrics = {
        **{f"{mode}_s": seconds[mode] for mode in MODES},
        "ratio": seconds["constrained"] / max(seconds["unconstrained"], 1e-9),
        **{f"{mode}_parse_rate": sum(r[mode]["parses"] for r in records) / n for mode in MODES},
        "constrained_valid_rate": sum(r["constrained"]["valid"] is True for r in records) / n,
        "constrained_retried": sum(r["constrained"]["rounds"] > 1 for r in records),
    }
    summary = {
        "benchmark": benchmark, "n_tasks": len(tasks), "model": getattr(engine, "model_id", "unknown"),
        "settings": {"limit": limit, "subset_seed": subset_seed, "max_tokens": max_tokens, "batch_size": batch_size},
        "metrics": metrics, "targets": {"ratio": {"measured": metrics["ratio"], "target": f"<= {TARGET_RATIO}",
                                                  "met": metrics["ratio"] <= TARGET_RATIO}},
        "machine": machine_info(), "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    out = Path(out_dir) if out_dir else DEFAULT_OUT_ROOT / f"overhead-{benchmark}-{time.strftime('%Y%m%d-%H%M%S')}"
    write_results(out, records, summary)
    summary["out_dir"] = str(out)
    return summary


# --- command line (wired by infill/cli.py as `infill bench overhead`) -----------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("benchmark", choices=list(BENCHMARKS), help="which HumanEval-Infilling set")
    parser.add_argument("--limit", type=int, default=None, help="a fixed random subset of N tasks")
    parser.add_argument("--subset-seed", type=int, default=0)
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--max-tokens", type=int, default=None, help="default 32 for single-line, 128 otherwise")
    parser.add_argument("--batch-size", type=int, default=8)


def main(args: argparse.Namespace, engine) -> int:
    summary = run_overhead(engine, args.benchmark, limit=args.limit, data_dir=args.data_dir, out_dir=args.out,
                           max_tokens=args.max_tokens, batch_size=args.batch_size, subset_seed=args.subset_seed)
    table = Table(title=f"constraint overhead · {summary['benchmark']} · {summary['n_tasks']} tasks · {summary['model']}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for name, value in summary["metrics"].items():
        table.add_row(name, f"{value:.3f}" if isinstance(value, float) else str(value))
    Console().print(table)
    Console().print(f"results: {summary['out_dir']}")
    return 0
