"""Speed benchmark: latency and tokens/s of the engine on realistic synthetic requests.

Requests are cut from real Python source (large standard-library modules read from disk): a
line is chosen, the hole replaces it from its indentation to its end, and the context around it
is trimmed by the engine to exactly the target number of tokens (a view of the engine with
``EngineConfig(context_tokens=C)``; where C exceeds the model's trained context this is noted).

Sections (each a list of rows in ``summary.json``, a table on the terminal):

- ``grid``: windows (16/32/64/128 slots) x contexts (256/1k/2k tokens), the engine's default
  schedule: latency p50/p95 over repeated runs after warm-up, tokens/s (non-pad tokens filled
  per second) and slots/s (window slots per second).
- ``steps``: one window and context, steps = W, W/2, W/4, W/8.
  (This section and ``decoding`` compare schedules: their fills get no retry round.)
- ``decoding``: one token per step (the autoregressive-equivalent schedule of the same model)
  against k tokens per step and confidence thresholds.
- ``constrained``: ``SamplingOptions.constrained`` off and on.
- ``batch``: ``fill_batch`` with 1..16 requests; ``concurrency``: N threads calling ``fill`` at once.
- ``frontier``: given quality summaries (``infill bench quality`` runs at different settings),
  the speed of each run's sampling options here, beside its pass@1.

On CUDA the GPU's bf16 matmul rate and copy bandwidth are measured first, and every row carries
its physical floor: the FLOPs of the steps taken over that rate (and the bytes over that bandwidth;
see ``infill.bench.floor``).
Everything goes to ``bench/results/speed-<device>-<time>/``: ``summary.json``, ``results.jsonl``
(one line per timed run) and PNG plots.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import logging
import math
import random
import statistics
import sysconfig
import threading
import time
import typing
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Sequence

import msgspec
from rich.console import Console
from rich.table import Table

from infill.bench.floor import fill_bytes, fill_flops, measure_gpu
from infill.bench.quality import DEFAULT_OUT_ROOT, _progress, machine_info, write_results
from infill.errors import InputError
from infill.protocol import FillRequest, FillResult, Hole, Policy, SamplingOptions

log = logging.getLogger(__name__)

SECTIONS = ("grid", "steps", "decoding", "constrained", "batch", "concurrency", "frontier")
FULL = dict(contexts=(256, 1024, 2048), windows=(16, 32, 64, 128), repeats=20, warmup=3, sweep_window=64,
            sweep_context=1024, batch_sizes=(1, 2, 4, 8, 16), concurrency=(1, 2, 4, 8), thresholds=(0.9, 0.7, 0.5))
QUICK = dict(contexts=(256,), windows=(16, 32), repeats=5, warmup=1, sweep_window=32,
             sweep_context=256, batch_sizes=(1, 2, 4), concurrency=(1, 2), thresholds=(0.9,))
# Large, ordinary modules of the standard library: the source of the synthetic requests.
SOURCE_FILES = ("_pydecimal.py", "typing.py", "inspect.py", "argparse.py", "tarfile.py", "subprocess.py",
                "difflib.py", "dataclasses.py", "enum.py", "configparser.py", "pathlib.py", "logging/__init__.py")
LEFT_TO_RIGHT = "left-to-right"


# --- statistics ------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation between ranks (numpy's default)."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} is outside 0..100")
    xs = sorted(values)
    at = (len(xs) - 1) * q / 100
    lo = math.floor(at)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (at - lo)


def summarize(records: list[dict], slots: int) -> dict:
    """Latency percentiles and throughput of timed runs, each of ``slots`` window slots per request."""
    wall = [r["wall_ms"] for r in records]
    total_s = sum(wall) / 1000
    requests = sum(r.get("requests", 1) for r in records)
    tokens = sum(r["tokens_filled"] for r in records)
    out = {
        "runs": len(records),
        "p50_ms": percentile(wall, 50),
        "p95_ms": percentile(wall, 95),
        "mean_ms": statistics.fmean(wall),
        "min_ms": min(wall),
        "tokens_per_s": tokens / total_s if total_s else 0.0,
        "slots_per_s": slots * requests / total_s if total_s else 0.0,
        "mean_tokens_filled": tokens / requests,
        "mean_steps": statistics.fmean(r["steps"] for r in records),
        "mean_context_tokens": statistics.fmean(r["context_tokens"] for r in records),
        "mean_context_ms": statistics.fmean(r["context_ms"] for r in records),
        "mean_denoise_ms": statistics.fmean(r["denoise_ms"] for r in records),
        "mean_constrain_ms": statistics.fmean(r["constrain_ms"] for r in records),
    }
    checked = [v for r in records for v in r["valid"] if v is not None]
    out["valid_rate"] = sum(checked) / len(checked) if checked else None
    return out


# --- requests --------------------------------------------------------------------------------


def load_sources(names: Sequence[str] = SOURCE_FILES, root: Path | None = None) -> list[str]:
    """The text of the standard-library modules ``names`` that exist under ``root``."""
    root = Path(root or sysconfig.get_paths()["stdlib"])
    texts = [(root / n).read_text(encoding="utf-8") for n in names if (root / n).is_file()]
    if not texts:
        raise InputError(f"no Python sources found under {root} to build requests from")
    return texts


def cut_request(text: str, line_start: int, window: int, options: SamplingOptions) -> FillRequest | None:
    """A request whose hole replaces the line at ``line_start`` from its indentation to its end."""
    end = text.find("\n", line_start)
    end = len(text) if end < 0 else end
    line = text[line_start:end]
    if not line.strip():
        return None
    start = line_start + len(line) - len(line.lstrip())
    return FillRequest(text=text, holes=[Hole(start, end, window)], language="python", options=options)


def make_requests(engine, sources: list[str], n: int, window: int, options: SamplingOptions,
                  seed: int = 0) -> list[FillRequest]:
    """``n`` distinct requests whose context the engine (view) trims to exactly its budget.

    Cuts are drawn at random (fixed seed) from the middle of the sources; a cut with too little
    text on either side for the budget is skipped.
    """
    rng = random.Random(seed)
    budget = engine.budget()
    out: list[FillRequest] = []
    for _ in range(200 * n):
        if len(out) == n:
            break
        text = rng.choice(sources)
        at = rng.randrange(len(text) // 5, len(text) * 4 // 5)
        line_start = text.rfind("\n", 0, at) + 1
        request = cut_request(text, line_start, window, options)
        if request is None:
            continue
        if sum(len(s) for s in engine.prepare(request).segments) == budget:
            out.append(request)
    if len(out) < n:
        raise InputError(f"could not cut {n} requests with {budget} tokens of context from the sources")
    return out


def engine_for_context(engine, context_tokens: int):
    """A view of ``engine`` (same model and tokenizer) whose context budget is ``context_tokens``."""
    from infill.engine.fill import Engine

    config = dataclasses.replace(engine.config, context_tokens=context_tokens)
    return Engine(engine.model, engine.tokenizer, config, model_id=engine.model_id)


def left_to_right_supported() -> bool:
    return LEFT_TO_RIGHT in typing.get_args(Policy)


# --- timing ------------------------------------------------------------------------------------


def _record(result: FillResult, wall_ms: float) -> dict:
    t = result.timings
    return {"wall_ms": wall_ms, "engine_ms": t.total_ms, "tokens_filled": t.tokens_filled, "steps": t.steps,
            "context_tokens": t.context_tokens, "context_ms": t.context_ms, "denoise_ms": t.denoise_ms,
            "constrain_ms": t.constrain_ms, "candidates": t.candidates,
            "valid": [f.valid for f in result.fills]}


def time_single(engine, requests: list[FillRequest], repeats: int, warmup: int, tick: Callable[[], None]) -> list[dict]:
    for i in range(warmup):
        engine.fill(requests[i % len(requests)])
        tick()
    records = []
    for i in range(repeats):
        t0 = time.perf_counter()
        result = engine.fill(requests[i % len(requests)])
        records.append(_record(result, (time.perf_counter() - t0) * 1000))
        tick()
    return records


def time_batch(engine, requests: list[FillRequest], size: int, repeats: int, warmup: int,
               tick: Callable[[], None]) -> list[dict]:
    """One record per ``fill_batch`` call of ``size`` requests (its wall time and summed tokens)."""
    def batch(i: int) -> list[FillRequest]:
        return [requests[(i * size + j) % len(requests)] for j in range(size)]

    for i in range(warmup):
        engine.fill_batch(batch(i))
        tick()
    records = []
    for i in range(repeats):
        t0 = time.perf_counter()
        results = engine.fill_batch(batch(i))
        records.append(_merge([_record(r, 0.0) for r in results], (time.perf_counter() - t0) * 1000))
        tick()
    return records


def time_concurrent(engine, requests: list[FillRequest], threads: int, repeats: int, warmup: int,
                    tick: Callable[[], None]) -> tuple[list[dict], list[float]]:
    """One record per round of ``threads`` simultaneous ``fill`` calls; also every call's latency."""
    calls: list[float] = []
    lock = threading.Lock()

    def one(request: FillRequest) -> dict:
        t0 = time.perf_counter()
        result = engine.fill(request)
        ms = (time.perf_counter() - t0) * 1000
        with lock:
            calls.append(ms)
        return _record(result, ms)

    records = []
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for i in range(warmup + repeats):
            batch = [requests[(i * threads + j) % len(requests)] for j in range(threads)]
            if i == warmup:
                calls.clear()
            t0 = time.perf_counter()
            done = list(pool.map(one, batch))
            wall = (time.perf_counter() - t0) * 1000
            if i >= warmup:
                records.append(_merge(done, wall))
            tick()
    return records, calls


def _merge(records: list[dict], wall_ms: float) -> dict:
    return {"wall_ms": wall_ms, "requests": len(records),
            "engine_ms": max(r["engine_ms"] for r in records),
            "tokens_filled": sum(r["tokens_filled"] for r in records),
            **{k: statistics.fmean(r[k] for r in records)
               for k in ("steps", "context_tokens", "context_ms", "denoise_ms", "constrain_ms", "candidates")},
            "valid": [v for r in records for v in r["valid"]]}


# --- the benchmark --------------------------------------------------------------------------------


@dataclasses.dataclass
class _Case:
    section: str
    label: str
    context: int
    window: int
    options: SamplingOptions
    kind: str = "single"  # single | batch | concurrent
    size: int = 1  # requests per batch or threads
    extra: dict = dataclasses.field(default_factory=dict)


def _plan(sections, contexts, windows, sweep_window, sweep_context, batch_sizes, concurrency, thresholds,
          base: SamplingOptions, quality: list[dict]) -> list[_Case]:
    W, C = sweep_window, sweep_context
    o = lambda **kw: msgspec.structs.replace(base, **kw)  # noqa: E731
    cases: list[_Case] = []
    if "grid" in sections:
        cases += [_Case("grid", f"C={c} W={w}", c, w, base) for c in contexts for w in windows]
    if "steps" in sections:
        for s in sorted({max(1, W // d) for d in (1, 2, 4, 8)}, reverse=True):
            cases.append(_Case("steps", f"steps={s}", C, W, o(steps=s, threshold=None, retry=False), extra={"steps": s}))
    if "decoding" in sections:
        ltr = left_to_right_supported()
        cases.append(_Case("decoding", "1/step left-to-right" if ltr else "1/step (emulated)", C, W,
                           o(steps=W, threshold=None, policy=LEFT_TO_RIGHT if ltr else "confidence", retry=False),
                           extra={"schedule": "one-per-step", "emulated": not ltr}))
        for k in (2, 4, 8):
            if k < W:
                cases.append(_Case("decoding", f"{k}/step", C, W, o(steps=max(1, W // k), threshold=None, retry=False),
                                   extra={"schedule": f"k={k}", "tokens_per_step": k}))
        for t in thresholds:
            cases.append(_Case("decoding", f"conf>={t}", C, W, o(steps=W, threshold=t, retry=False),
                               extra={"schedule": f"threshold={t}", "threshold": t}))
    if "constrained" in sections:
        for flag in (False, True):
            cases.append(_Case("constrained", "constrained" if flag else "unconstrained", C, W,
                               o(constrained=flag), extra={"constrained": flag}))
    if "batch" in sections:
        cases += [_Case("batch", f"batch={b}", C, W, base, "batch", b, {"batch": b}) for b in batch_sizes]
    if "concurrency" in sections:
        cases += [_Case("concurrency", f"threads={n}", C, W, base, "concurrent", n, {"threads": n})
                  for n in concurrency]
    if "frontier" in sections:
        for q in quality:
            opts = msgspec.convert(q["settings"]["options"], SamplingOptions)
            w = int(q["settings"]["max_tokens"])
            cases.append(_Case("frontier", q["label"], C, w, opts,
                               extra={"quality_summary": q["path"], "quality_model": q.get("model"),
                                      "benchmark": q.get("benchmark"), "pass@1": q["metrics"].get("pass@1"),
                                      "quality_steps": opts.steps}))
    return cases


def load_quality_summaries(paths: Sequence[Path | str]) -> list[dict]:
    """Read ``summary.json`` of ``infill bench quality`` runs (a path may be the run's directory)."""
    out = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            path = path / "summary.json"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            data["settings"]["options"], data["settings"]["max_tokens"], data["metrics"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise InputError(f"--quality-summary {p}: not a quality summary ({e})") from None
        o = data["settings"]["options"]
        label = (f"steps={o.get('steps') or 'default'}" if o.get("threshold") is None
                 else f"threshold={o['threshold']}")
        data |= {"path": str(path), "label": f"{data.get('benchmark', '?')} {label}"}
        out.append(data)
    return out


def run_speed(engine, *, quick: bool = False, sections: Sequence[str] = SECTIONS,
              contexts: Sequence[int] | None = None, windows: Sequence[int] | None = None,
              repeats: int | None = None, warmup: int | None = None, sweep_window: int | None = None,
              sweep_context: int | None = None, batch_sizes: Sequence[int] | None = None,
              concurrency: Sequence[int] | None = None, thresholds: Sequence[float] | None = None,
              options: SamplingOptions = SamplingOptions(candidates=1),
              quality_summaries: Sequence[Path | str] = (), out_dir: Path | str | None = None,
              plots: bool = True, progress: bool = True, seed: int = 0, gpu: dict | None = None) -> dict:
    """Run the speed benchmark on a local ``infill.engine.Engine``; write and return the summary.

    Unset sizes come from the full plan, or the quick one with ``quick``. ``options`` are the
    base sampling options of every case (by default one candidate row per request, so a figure
    is one stream's). The ``frontier`` section runs only when quality summaries are given.
    ``gpu`` (rates as ``measure_gpu`` returns them) is measured on CUDA when not given; with it,
    every row gets its physical floor.
    """
    preset = QUICK if quick else FULL
    pick = lambda value, key: preset[key] if value is None else value  # noqa: E731
    contexts, windows = list(pick(contexts, "contexts")), list(pick(windows, "windows"))
    repeats, warmup = pick(repeats, "repeats"), pick(warmup, "warmup")
    sweep_window, sweep_context = pick(sweep_window, "sweep_window"), pick(sweep_context, "sweep_context")
    batch_sizes, concurrency = list(pick(batch_sizes, "batch_sizes")), list(pick(concurrency, "concurrency"))
    thresholds = list(pick(thresholds, "thresholds"))
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        raise InputError(f"unknown sections {sorted(unknown)}; choose from {', '.join(SECTIONS)}")
    if repeats < 1 or warmup < 0 or min([*contexts, *windows, sweep_window, sweep_context, *batch_sizes,
                                          *concurrency], default=1) < 1:
        raise InputError("repeats, sizes and counts must be positive")
    quality = load_quality_summaries(quality_summaries)
    sections = [s for s in SECTIONS if s in sections and (s != "frontier" or quality)]

    import torch

    model = engine.model
    cfg = getattr(model, "cfg", None)  # our network's config: its FLOP and byte floors; other models have none
    dtype = model.dtype
    device = engine.device
    notes: list[str] = []
    if gpu is None and device.type == "cuda":
        gpu = measure_gpu(device)
    cases = _plan(sections, contexts, windows, sweep_window, sweep_context, batch_sizes, concurrency, thresholds,
                  options, quality)
    for c in sorted({c.context for c in cases}):
        if c > model.max_context:
            notes.append(f"context {c} exceeds the model's trained context ({model.max_context}): "
                         f"EngineConfig(context_tokens={c}) set explicitly (positions beyond training)")
    if any(c.extra.get("emulated") for c in cases):
        notes.append("1/step (emulated) is steps=W in confidence order: the sampler has no left-to-right "
                     "policy yet; the cost of a step is the same")
    for q in quality:
        if q.get("model") not in (None, engine.model_id):
            notes.append(f"{q['path']}: quality measured with model {q.get('model')!r}, speed with {engine.model_id!r}")
    for n in notes:
        log.info("%s", n)

    sources = load_sources()
    views: dict[int, object] = {}
    rows: list[dict] = []
    raw: list[dict] = []
    timed_calls = sum((warmup + repeats) for _ in cases)
    with _progress(progress) as bar:
        job = bar.add_task("speed", total=timed_calls)
        for case in cases:
            bar.update(job, description=f"{case.section} {case.label}")
            tick = lambda: bar.advance(job)  # noqa: E731
            view = views.get(case.context) or views.setdefault(case.context, engine_for_context(engine, case.context))
            pool = max(1, min(repeats + warmup, 8)) * case.size
            requests = make_requests(view, sources, pool, case.window, case.options, seed=seed + case.window)
            calls = None
            if case.kind == "batch":
                records = time_batch(view, requests, case.size, repeats, warmup, tick)
            elif case.kind == "concurrent":
                records, calls = time_concurrent(view, requests, case.size, repeats, warmup, tick)
            else:
                records = time_single(view, requests, repeats, warmup, tick)
            row = {"section": case.section, "label": case.label, "context": case.context, "window": case.window,
                   "options": msgspec.to_builtins(case.options), **case.extra, **summarize(records, case.window)}
            if calls:
                row |= {"call_p50_ms": percentile(calls, 50), "call_p95_ms": percentile(calls, 95)}
            per_request = row["mean_steps"], row["mean_context_tokens"], max(r["candidates"] for r in records)
            steps_, ctx_, rows_ = per_request
            n_req = case.size if case.kind != "single" else 1
            flops = n_req * fill_flops(cfg, round(ctx_), case.window, round(rows_), steps_) if cfg is not None else None
            row["flops"] = flops
            row["achieved_flops_per_s"] = flops / (row["mean_ms"] / 1000) if flops else None
            if gpu and flops:
                bytes_ = n_req * fill_bytes(cfg, round(ctx_), case.window, round(rows_), steps_, dtype.itemsize)
                row["floor_ms"] = flops / gpu["bf16_matmul_flops"] * 1000
                row["floor_bw_ms"] = bytes_ / gpu["copy_bytes_per_s"] * 1000
            rows.append(row)
            raw += [{"section": case.section, "label": case.label, **r} for r in records]

    _add_speedups(rows)
    summary = {
        "benchmark": "speed",
        "model": engine.model_id,
        "model_config": dataclasses.asdict(cfg) if cfg is not None else None,
        "n_params": model.n_params,
        "device": str(device),
        "dtype": str(dtype).removeprefix("torch."),
        "gpu": gpu,
        "engine_config": {k: str(v) if isinstance(v, Path) else v
                          for k, v in dataclasses.asdict(engine.config).items()},
        "settings": {"quick": quick, "sections": sections, "contexts": contexts, "windows": windows,
                     "repeats": repeats, "warmup": warmup, "sweep_window": sweep_window,
                     "sweep_context": sweep_context, "batch_sizes": batch_sizes, "concurrency": concurrency,
                     "thresholds": thresholds, "options": msgspec.to_builtins(options), "seed": seed,
                     "quality_summaries": [q["path"] for q in quality],
                     "left_to_right_policy": left_to_right_supported(),
                     "torch_threads": torch.get_num_threads()},
        "notes": notes,
        "rows": rows,
        "targets": _targets(rows, gpu is not None),
        "machine": machine_info(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    dev = device.type
    out = Path(out_dir) if out_dir else DEFAULT_OUT_ROOT / f"speed-{dev}-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    summary["plots"] = []
    if plots:
        try:
            from infill.bench import plots as plotting
        except ImportError as e:  # matplotlib is only needed for the PNGs
            notes.append(f"no plots: {e}")
        else:
            summary["plots"] = plotting.speed_plots(summary, out, quality)
    write_results(out, raw, summary)
    summary["out_dir"] = str(out)
    return summary


def _add_speedups(rows: list[dict]) -> None:
    """Decoding rows: how much faster each schedule is than one token per step (latency, tokens/s)."""
    base = next((r for r in rows if r["section"] == "decoding" and r.get("schedule") == "one-per-step"), None)
    if base is None:
        return
    for r in rows:
        if r["section"] == "decoding":
            r["speedup_latency"] = base["p50_ms"] / r["p50_ms"] if r["p50_ms"] else None
            r["speedup_tokens_per_s"] = r["tokens_per_s"] / base["tokens_per_s"] if base["tokens_per_s"] else None


def _targets(rows: list[dict], gpu: bool) -> dict:
    """The issue's targets, recorded (never asserted): what was measured against what was asked."""
    out: dict = {}
    decoding = [r for r in rows if r["section"] == "decoding" and r.get("schedule") != "one-per-step"]
    best = max((r.get("speedup_tokens_per_s") or 0 for r in decoding), default=None)
    if best is not None:
        out["parallel_over_one_per_step_tokens_per_s"] = {"measured": best, "target": ">= 4"}
    cell = next((r for r in rows if r["section"] == "grid" and r["window"] == 64 and r["context"] == 1024), None)
    if gpu and cell:
        out["gpu_64_tokens_at_1k_p50_ms"] = {"measured": cell["p50_ms"], "target": "<= 10",
                                            "floor_ms": cell.get("floor_ms")}
        out["gpu_one_stream_tokens_per_s"] = {"measured": cell["tokens_per_s"], "target": ">= 5000"}
    return out


# --- output -------------------------------------------------------------------------------------

_TITLES = {"grid": "window x context (default schedule)", "steps": "steps sweep", "decoding":
           "one token per step vs parallel decoding", "constrained": "constrained vs unconstrained",
           "batch": "fill_batch sweep", "concurrency": "concurrent engine.fill calls",
           "frontier": "speed of the quality runs' settings"}


def print_summary(summary: dict, console: Console | None = None) -> None:
    console = console or Console()
    gpu = summary.get("gpu")
    head = f"{summary['model']} · {summary['device']} ({summary['dtype']})"
    if gpu:
        head += f" · {gpu['name']}: bf16 matmul {gpu['bf16_matmul_flops'] / 1e12:.0f} TFLOP/s, " \
                f"copy {gpu['copy_bytes_per_s'] / 1e9:.0f} GB/s"
    console.print(head)
    for section in summary["settings"]["sections"]:
        rows = [r for r in summary["rows"] if r["section"] == section]
        if not rows:
            continue
        grid = section == "grid"
        title = _TITLES[section] if grid else f"{_TITLES[section]} · context {rows[0]['context']}"
        if section not in ("grid", "frontier"):
            title += f", window {rows[0]['window']}"
        table = Table(title=title)
        cols = ["case"] + (["ctx", "W"] if grid else []) + ["steps", "p50 ms", "p95 ms", "tok/s", "slots/s"]
        if section == "decoding":
            cols += ["x lat", "x tok/s"]
        if section == "concurrency":
            cols += ["call p50", "call p95"]
        if section == "frontier":
            cols += ["W", "pass@1"]
        if gpu:
            cols += ["floor ms", "bw floor"]
        for c in cols:
            table.add_column(c, justify="left" if c == "case" else "right", no_wrap=c == "case")
        for r in rows:
            cells = [r["label"]] + ([str(r["context"]), str(r["window"])] if grid else [])
            cells += [f"{r['mean_steps']:.1f}", f"{r['p50_ms']:.1f}", f"{r['p95_ms']:.1f}",
                      f"{r['tokens_per_s']:.0f}", f"{r['slots_per_s']:.0f}"]
            if section == "decoding":
                cells += [_fmt(r.get("speedup_latency"), "x"), _fmt(r.get("speedup_tokens_per_s"), "x")]
            if section == "concurrency":
                cells += [f"{r['call_p50_ms']:.1f}", f"{r['call_p95_ms']:.1f}"]
            if section == "frontier":
                cells += [str(r["window"]), _fmt(r.get("pass@1"))]
            if gpu:
                cells += [f"{r['floor_ms']:.3f}", f"{r['floor_bw_ms']:.3f}"]
            table.add_row(*cells)
        console.print(table)
    for n in summary["notes"]:
        console.print(f"note: {n}")
    console.print(f"results: {summary['out_dir']}")


def _fmt(value, suffix: str = "") -> str:
    return "-" if value is None else f"{value:.2f}{suffix}"


# --- command line (wired by infill/cli.py as `infill bench speed`) --------------------------------


def _ints(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def _floats(text: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


def _sections(text: str) -> list[str]:
    names = [x.strip() for x in text.split(",") if x.strip()]
    bad = [n for n in names if n not in SECTIONS]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown sections {bad}; choose from {', '.join(SECTIONS)}")
    return names


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the speed benchmark's arguments to ``parser`` (the model options, --device included, are the CLI's)."""
    parser.add_argument("--quick", action="store_true", help="a fast smoke run (small sizes, few repeats)")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"output directory (default: {DEFAULT_OUT_ROOT}/speed-<device>-<time>)")
    parser.add_argument("--sections", type=_sections, default=list(SECTIONS),
                        help=f"comma-separated subset of {','.join(SECTIONS)} (default: all)")
    parser.add_argument("--contexts", type=_ints, default=None, help="context tokens (default 256,1024,2048)")
    parser.add_argument("--windows", type=_ints, default=None, help="window slots (default 16,32,64,128)")
    parser.add_argument("--repeats", type=int, default=None, help="timed runs per case (default 20)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed runs first (default 3)")
    parser.add_argument("--sweep-window", type=int, default=None, help="window of the sweeps (default 64)")
    parser.add_argument("--sweep-context", type=int, default=None, help="context of the sweeps (default 1024)")
    parser.add_argument("--batch-sizes", type=_ints, default=None, help="default 1,2,4,8,16")
    parser.add_argument("--concurrency", type=_ints, default=None, help="threads (default 1,2,4,8)")
    parser.add_argument("--thresholds", type=_floats, default=None, help="confidence thresholds (default .9,.7,.5)")
    parser.add_argument("--candidates", type=int, default=1,
                        help="candidate rows per request (default 1: one stream; 0 = the engine's default)")
    parser.add_argument("--quality-summary", type=Path, nargs="+", default=[],
                        help="summary.json (or run directories) of `infill bench quality` runs: the frontier")
    parser.add_argument("--no-plots", action="store_true", help="write no PNG plots")
    parser.add_argument("--seed", type=int, default=0, help="seed of the request cuts")


def main(args: argparse.Namespace, engine) -> int:
    """Run the benchmark the parsed ``args`` describe with ``engine`` and print tables; exit code."""
    summary = run_speed(
        engine, quick=args.quick, sections=args.sections, contexts=args.contexts, windows=args.windows,
        repeats=args.repeats, warmup=args.warmup, sweep_window=args.sweep_window, sweep_context=args.sweep_context,
        batch_sizes=args.batch_sizes, concurrency=args.concurrency, thresholds=args.thresholds,
        options=SamplingOptions(candidates=args.candidates), quality_summaries=args.quality_summary,
        out_dir=args.out, plots=not args.no_plots, seed=args.seed)
    print_summary(summary)
    return 0
