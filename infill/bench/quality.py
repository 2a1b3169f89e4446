"""Fill-quality benchmark: HumanEval-Infilling through the engine, judged by running the tests.

For each task the engine fills one hole between ``prompt`` and ``suffix``; the program
``prompt + fill + suffix + "\\n" + test + "\\n" + f"check({entry_point})"`` runs in the sandbox
(``infill.bench.sandbox``), exactly as OpenAI's harness builds it (no truncation or stripping of
the fill). Reported: pass@k (the unbiased estimator), exact match, parse rate (``ast.parse`` in
this process; it executes nothing), fill and reference lengths, and the engine's latency. Per-task
results go to ``results.jsonl`` and the rest to ``summary.json`` in the output directory.

It does not build the engine (the CLI does), train, or copy the data anywhere: HumanEval is
for evaluation only. Speed benchmarks live elsewhere.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import gzip
import hashlib
import importlib.metadata
import json
import logging
import math
import os
import platform
import random
import subprocess
import time
import typing
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol, Sequence

import msgspec
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from infill.errors import InfillError, InputError
from infill.protocol import FillRequest, FillResult, Hole, Policy, SamplingOptions
from infill.bench.sandbox import SandboxLimits, SandboxResult, run_python

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DATA_DIR = REPO_ROOT / "bench" / "data" / "human-eval-infilling"  # OpenAI's data (MIT), in the repository
DEFAULT_OUT_ROOT = Path("bench") / "results"

BENCHMARKS = {
    "single-line": "HumanEval-SingleLineInfilling.jsonl.gz",
    "multi-line": "HumanEval-MultiLineInfilling.jsonl.gz",
    "random-span": "HumanEval-RandomSpanInfilling.jsonl.gz",
    "random-span-light": "HumanEval-RandomSpanInfillingLight.jsonl.gz",
}
DEFAULT_MAX_TOKENS = {"single-line": 32, "multi-line": 128, "random-span": 128, "random-span-light": 128}
PASS_AT_K = (1, 10, 100)  # reported where every task has at least k samples


class FillEngine(Protocol):
    """What the benchmark needs from ``infill.engine.Engine`` (or any stand-in)."""

    model_id: str

    def fill_batch(self, requests: list[FillRequest]) -> list[FillResult]: ...


@dataclass(frozen=True)
class Task:
    task_id: str
    prompt: str
    suffix: str
    canonical_solution: str
    test: str
    entry_point: str

    def program(self, fill: str) -> str:
        """The program the reference harness runs for this fill."""
        return self.prompt + fill + self.suffix + "\n" + self.test + "\n" + f"check({self.entry_point})"


# --- data -----------------------------------------------------------------------------------


def data_file(benchmark: str, data_dir: Path | str | None = None) -> Path:
    if benchmark not in BENCHMARKS:
        raise InputError(f"unknown benchmark {benchmark!r}; choose one of {', '.join(BENCHMARKS)}")
    path = Path(data_dir or DEFAULT_DATA_DIR) / BENCHMARKS[benchmark]
    if not path.is_file():
        raise InputError(f"HumanEval-Infilling data not found: {path} (set --data-dir)")
    return path


def load_tasks(benchmark: str, data_dir: Path | str | None = None, limit: int | None = None,
               seed: int = 0) -> list[Task]:
    """All tasks of ``benchmark``, or a fixed random subset of ``limit`` of them in file order."""
    fields = Task.__dataclass_fields__
    with gzip.open(data_file(benchmark, data_dir), "rt", encoding="utf-8") as f:
        tasks = [Task(**{k: v for k, v in json.loads(line).items() if k in fields}) for line in f if line.strip()]
    if limit is not None and limit < len(tasks):
        keep = sorted(random.Random(seed).sample(range(len(tasks)), limit))
        tasks = [tasks[i] for i in keep]
    return tasks


def build_request(task: Task, max_tokens: int, options: SamplingOptions = SamplingOptions()) -> FillRequest:
    cursor = len(task.prompt)
    return FillRequest(text=task.prompt + task.suffix, holes=[Hole(cursor, cursor, max_tokens, min_tokens=1)],
                       language="python", options=options)


# --- metrics --------------------------------------------------------------------------------


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one task with ``c`` of ``n`` samples passing: 1 - C(n-c, k) / C(n, k)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def parses(source: str) -> bool:
    """Whether ``source`` is valid Python; compiles to an AST only, executes nothing."""
    try:
        ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


# --- the three phases -------------------------------------------------------------------------


def _progress(enabled: bool) -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=Console(stderr=True), disable=not enabled)


def generate(engine: FillEngine, requests: Sequence[FillRequest], batch_size: int = 8,
             progress: bool = True) -> list[FillResult | InfillError]:
    """``engine.fill_batch`` in chunks. A batch the engine refuses is retried one request at a time,
    and a request it still refuses yields its error in place of a result (the task then fails)."""
    results: list[FillResult | InfillError] = []
    with _progress(progress) as bar:
        job = bar.add_task("filling", total=len(requests))
        for i in range(0, len(requests), batch_size):
            chunk = list(requests[i:i + batch_size])
            try:
                out: list[FillResult | InfillError] = list(engine.fill_batch(chunk))
            except InfillError as exc:
                log.warning("batch %d failed (%s); retrying one by one", i // batch_size, exc)
                out = [_fill_one(engine, request) for request in chunk]
            if len(out) != len(chunk):
                raise RuntimeError(f"fill_batch returned {len(out)} results for {len(chunk)} requests")
            results.extend(out)
            bar.advance(job, len(chunk))
    return results


def _fill_one(engine: FillEngine, request: FillRequest) -> FillResult | InfillError:
    try:
        return engine.fill_batch([request])[0]
    except InfillError as exc:
        return exc


def execute(programs: Sequence[str], limits: SandboxLimits = SandboxLimits(), workers: int | None = None,
            progress: bool = True) -> list[SandboxResult]:
    """Run every program in its own sandboxed subprocess, ``workers`` at a time (default: CPU count)."""
    results: list[SandboxResult | None] = [None] * len(programs)
    with _progress(progress) as bar, ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
        job = bar.add_task("testing", total=len(programs))
        futures = {pool.submit(run_python, program, limits): i for i, program in enumerate(programs)}
        for future in as_completed(futures):
            results[futures[future]] = future.result()
            bar.advance(job)
    return results  # type: ignore[return-value]


# --- the benchmark --------------------------------------------------------------------------------


def run_quality(engine: FillEngine, benchmark: str, *, limit: int | None = None,
                data_dir: Path | str | None = None, out_dir: Path | str | None = None,
                options: SamplingOptions = SamplingOptions(), max_tokens: int | None = None,
                workers: int | None = None, samples: int = 1, batch_size: int = 8, timeout_s: float = 3.0,
                subset_seed: int = 0, progress: bool = True) -> dict:
    """Run one HumanEval-Infilling benchmark and write ``results.jsonl`` and ``summary.json``.

    ``samples`` fills per task use seeds ``options.seed + j`` (useful with temperature > 0).
    Returns the summary (also written), with ``out_dir`` set to where the files went.
    """
    if samples < 1 or batch_size < 1:
        raise InputError("samples and batch size must be at least 1")
    max_tokens = max_tokens or DEFAULT_MAX_TOKENS[benchmark]
    tasks = load_tasks(benchmark, data_dir, limit, subset_seed)
    if samples > 1 and options.temperature == 0:
        log.warning("%d samples per task at temperature 0 will mostly be identical", samples)
    runs = [(task, j) for task in tasks for j in range(samples)]
    requests = [build_request(task, max_tokens, msgspec.structs.replace(options, seed=options.seed + j))
                for task, j in runs]
    log.info("%s: %d tasks x %d samples, max_tokens=%d", benchmark, len(tasks), samples, max_tokens)

    t0 = time.monotonic()
    fills = generate(engine, requests, batch_size, progress)
    generate_s = time.monotonic() - t0

    texts = [r.fills[0].text if isinstance(r, FillResult) else "" for r in fills]
    todo = [i for i, r in enumerate(fills) if isinstance(r, FillResult)]
    t0 = time.monotonic()
    limits = SandboxLimits(timeout_s=timeout_s)
    executed = execute([runs[i][0].program(texts[i]) for i in todo], limits, workers, progress)
    execute_s = time.monotonic() - t0
    outcomes = [SandboxResult("failed", f"engine error: {r}", 0.0) for r in fills]  # replaced if run
    for i, outcome in zip(todo, executed):
        outcomes[i] = outcome

    records = [_record(task, j, result, text, outcome)
               for (task, j), result, text, outcome in zip(runs, fills, texts, outcomes)]
    model_id = getattr(engine, "model_id", None) or next(
        (r.model for r in fills if isinstance(r, FillResult)), "unknown")
    summary = {
        "benchmark": benchmark,
        "data_file": BENCHMARKS[benchmark],
        "data_sha256": _sha256(data_file(benchmark, data_dir))[:16],
        "n_tasks": len(tasks),
        "samples_per_task": samples,
        "model": model_id,
        "settings": {
            "limit": limit, "subset_seed": subset_seed, "max_tokens": max_tokens, "batch_size": batch_size,
            "workers": workers or os.cpu_count(), "timeout_s": timeout_s,
            "options": msgspec.to_builtins(options), "sandbox": asdict(limits),
        },
        "metrics": _metrics(records, samples, generate_s, execute_s),
        "machine": machine_info(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    out = Path(out_dir) if out_dir else DEFAULT_OUT_ROOT / f"quality-{benchmark}-{time.strftime('%Y%m%d-%H%M%S')}"
    write_results(out, records, summary)
    summary["out_dir"] = str(out)
    return summary


def _record(task: Task, sample: int, result: FillResult | InfillError, text: str, outcome: SandboxResult) -> dict:
    ok = isinstance(result, FillResult)
    return {
        "task_id": task.task_id,
        "sample": sample,
        "status": outcome.status,
        "passed": outcome.passed,
        "reason": outcome.reason,
        "exec_s": round(outcome.duration_s, 4),
        "fill": text,
        "reference": task.canonical_solution,
        "exact": ok and text == task.canonical_solution,
        "exact_stripped": ok and text.rstrip() == task.canonical_solution.rstrip(),
        "parses": ok and parses(task.prompt + text + task.suffix),
        "fill_chars": len(text),
        "reference_chars": len(task.canonical_solution),
        "latency_ms": result.timings.total_ms if ok else None,
        "tokens_filled": result.timings.tokens_filled if ok else None,
        "score": result.fills[0].score if ok else None,
        "valid": result.fills[0].valid if ok else None,
    }


def _mean(values: list) -> float | None:
    return sum(values) / len(values) if values else None


def _metrics(records: list[dict], samples: int, generate_s: float, execute_s: float) -> dict:
    passed_by_task: dict[str, int] = {}
    for r in records:
        passed_by_task[r["task_id"]] = passed_by_task.get(r["task_id"], 0) + r["passed"]
    metrics: dict = {
        f"pass@{k}": _mean([pass_at_k(samples, c, k) for c in passed_by_task.values()])
        for k in PASS_AT_K if k <= samples
    }
    latencies = [r["latency_ms"] for r in records if r["latency_ms"] is not None]
    metrics |= {
        "exact_match": _mean([r["exact"] for r in records]),
        "exact_match_stripped": _mean([r["exact_stripped"] for r in records]),
        "parse_rate": _mean([r["parses"] for r in records]),
        # the engine's own verdict: no new error node against the document as given (None: unchecked)
        "engine_valid_rate": _mean([r["valid"] is True for r in records]) if any(r.get("valid") is not None for r in records) else None,
        "mean_fill_chars": _mean([r["fill_chars"] for r in records]),
        "mean_reference_chars": _mean([r["reference_chars"] for r in records]),
        "mean_latency_ms": _mean(latencies),
        "timed_out": sum(r["status"] == "timed out" for r in records),
        "engine_errors": sum(r["latency_ms"] is None for r in records),
        "generate_s": round(generate_s, 3),
        "execute_s": round(execute_s, 3),
    }
    return metrics


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _git_commit() -> str | None:
    try:
        head = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None
    return head.stdout.strip() + ("-dirty" if dirty else "")


def _cpu_native_bf16() -> bool | None:
    try:
        import torch

        from infill.model.device import fast_bf16
    except ImportError:
        return None
    return fast_bf16(torch.device("cpu"))


def cpu_model() -> dict:
    """The CPU's model name and the vector and matrix extensions the speed figures hang on, read
    from /proc/cpuinfo where there is one (else what platform knows)."""
    name, flags = platform.processor() or platform.machine(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and value.strip():
                name = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
    except OSError:
        pass
    return {"name": name, "extensions": sorted(flags & {"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_int8"})}


def machine_info() -> dict:
    try:
        torch_version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch_version = None
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "cpu": cpu_model(),
        "torch": torch_version,
        "cpu_native_bf16": _cpu_native_bf16(),  # what precision "auto" picks on a CPU
        "git_commit": _git_commit(),
    }


def write_results(out: Path, records: list[dict], summary: dict) -> None:
    """Per-item JSON Lines and summary.json into out (shared by every benchmark)."""
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "results.jsonl", "w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    (out / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    log.info("wrote %s", out)


# --- command line (wired by infill/cli.py as `infill bench quality`) ------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the quality benchmark's arguments to ``parser`` (the model options are the CLI's)."""
    parser.add_argument("benchmark", choices=list(BENCHMARKS), help="which HumanEval-Infilling set")
    parser.add_argument("--limit", type=int, default=None, help="a fixed random subset of N tasks")
    parser.add_argument("--subset-seed", type=int, default=0, help="seed of the --limit subset")
    parser.add_argument("--data-dir", type=Path, default=None, help=f"default: {DEFAULT_DATA_DIR}")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"output directory (default: {DEFAULT_OUT_ROOT}/quality-<benchmark>-<time>)")
    parser.add_argument("--max-tokens", type=int, default=None,
                        help="fill window; default 32 for single-line, 128 otherwise")
    parser.add_argument("--samples", type=int, default=1, help="fills per task (seeds seed..seed+n-1)")
    parser.add_argument("--batch-size", type=int, default=8, help="requests per engine.fill_batch call")
    parser.add_argument("--workers", type=int, default=None, help="parallel test programs (default: CPUs)")
    parser.add_argument("--timeout", type=float, default=3.0, help="seconds per test program")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--threshold", type=float, default=None)
    parser.add_argument("--policy", choices=list(typing.get_args(Policy)), default="confidence")
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--candidates", type=int, default=0)
    parser.add_argument("--unconstrained", action="store_true", help="no syntax-checked selection")


def options_from_args(args: argparse.Namespace) -> SamplingOptions:
    return SamplingOptions(steps=args.steps, threshold=args.threshold, policy=args.policy,
                           temperature=args.temperature, seed=args.seed, candidates=args.candidates,
                           constrained=not args.unconstrained)


def main(args: argparse.Namespace, engine: FillEngine) -> int:
    """Run the benchmark the parsed ``args`` describe with ``engine`` and print a table; exit code."""
    summary = run_quality(engine, args.benchmark, limit=args.limit, data_dir=args.data_dir, out_dir=args.out,
                          options=options_from_args(args), max_tokens=args.max_tokens, workers=args.workers,
                          samples=args.samples, batch_size=args.batch_size, timeout_s=args.timeout,
                          subset_seed=args.subset_seed)
    print_summary(summary)
    return 0


def print_summary(summary: dict, console: Console | None = None) -> None:
    table = Table(title=f"{summary['benchmark']} · {summary['n_tasks']} tasks · {summary['model']}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for name, value in summary["metrics"].items():
        table.add_row(name, f"{value:.3f}" if isinstance(value, float) else str(value))
    console = console or Console()
    console.print(table)
    console.print(f"results: {summary['out_dir']}")
