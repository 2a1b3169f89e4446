"""Simulated editors typing against one ``infill serve`` (``infill bench serve``).

The benchmark starts ``python -m infill.cli serve`` as a subprocess (the default model unless
``--model``), then for each number of editors (default 1, 4, 16, 64) runs that many typists at
once for ``--duration`` seconds, each over its own websocket connection:

- each editor types into its own document, cut from a real standard-library module as
  ``infill bench lsp`` cuts them (infill/bench/keystrokes.py: about ``--context-tokens`` of context
  around the cursor, the cursor on an indented, empty line; each keystroke is one character, or
  Enter with the next line's indentation);
- after each keystroke it sends one fill request at the cursor (the language server's defaults:
  ``--max-tokens`` 32, constrained, no retry round, one candidate, the engine's steps, the model's
  floor (its config.json's ``min_score``: a fill under it stops there); priority interactive) and
  waits for the result (the request is elastic, as the language server's inline fills are: joining
  a busy batch it does less work, infill.lsp.scheduler.lighten; ``--rigid``: never); the next keystroke comes when the result is there, or ``--interval-ms``
  after the previous keystroke if that is later (a closed loop: an overloaded server slows its
  typists down instead of piling up requests);
- latency is keystroke -> result (the request's send to its Result frame); requests/s counts
  results; the mean batch size (requests and candidate rows per model call) is read from the
  server's /metrics before and after the phase. ``--warmup`` untimed keystrokes per editor come
  first.

``--lsp N,N``: the same typists, each against its own ``infill lsp`` process (stdio, its own
model, through infill/bench/keystrokes.py's session), for comparison; that runs ``--lsp-keystrokes``
keystrokes per editor instead of a duration (the processes load their models first).

Output: a table, and ``bench/results/serve-<time>/`` (or ``--out``) with ``summary.json``,
``results.jsonl`` (one line per timed request), ``server.log`` and ``serve.png`` (latency and
throughput against editors).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from infill.bench.quality import DEFAULT_OUT_ROOT, machine_info, write_results
from infill.errors import InputError
from infill.model.declared import declared_min_score
from infill.protocol import SamplingOptions

TARGET_RATIO_16 = 2.0  # 16 editors' p95 within 2x one editor's (issue 27)


def lsp_options(model_dir: Path) -> SamplingOptions:
    """The language server's fills at the cursor (lsp/options.py: no retry round, cursor_candidates 1,
    and the model's own floor, config.json's min_score, under which a fill stops: FillResult.below_floor)."""
    return SamplingOptions(retry=False, candidates=1, min_score=declared_min_score(model_dir))


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    i = min(len(values) - 1, max(0, round(q * (len(values) - 1))))
    return values[i]


def start_server(cmd: list[str], log_path: Path, timeout_s: float = 600) -> tuple[subprocess.Popen, str]:
    """The server process and its ws:// URL (read from its first stderr line)."""
    log = open(log_path, "w", encoding="utf-8")
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    found: dict = {}
    ready = threading.Event()

    def pump() -> None:
        for line in proc.stderr:
            log.write(line)
            log.flush()
            m = re.search(r"on (ws://\S+)", line)
            if m and "url" not in found:
                found["url"] = m.group(1)
                ready.set()
        ready.set()

    threading.Thread(target=pump, daemon=True).start()
    ready.wait(timeout_s)
    if "url" not in found:
        proc.kill()
        raise InputError(f"infill serve did not start (see {log_path})")
    return proc, found["url"]


def scrape(url: str) -> dict[str, float]:
    """Every sample of the server's /metrics; a labelled one is also summed under its bare name
    (``infill serve --ray`` labels each replica's figures with ``replica``)."""
    http = url.replace("ws://", "http://").rstrip("/") + "/metrics"
    text = urllib.request.urlopen(http, timeout=30).read().decode()
    out: dict[str, float] = {}
    summed: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
            if "{" in name:
                bare = name.split("{", 1)[0]
                summed[bare] = summed.get(bare, 0.0) + float(value)
    for bare, value in summed.items():
        out.setdefault(bare, value)
    return out


def summarize(records: list[dict], wall_s: float, before: dict, after: dict, editors: int) -> dict:
    ok = [r["latency_ms"] for r in records if r["ok"]]

    def delta(name: str) -> float:
        return after.get(name, 0.0) - before.get(name, 0.0)

    calls = delta("infill_batch_rows_count")
    return {
        "editors": editors,
        "requests": len(ok),
        "below_floor": sum(bool(r.get("below_floor")) for r in records),  # stopped under the model's floor
        "errors": len(records) - len(ok),
        "wall_s": wall_s,
        "requests_per_s": len(ok) / wall_s if wall_s > 0 else None,
        "p50_ms": _quantile(ok, 0.5),
        "p95_ms": _quantile(ok, 0.95),
        "mean_ms": statistics.fmean(ok) if ok else None,
        "model_calls": calls,
        "mean_batch_requests": delta("infill_batch_requests_sum") / calls if calls else None,
        "mean_batch_rows": delta("infill_batch_rows_sum") / calls if calls else None,
        "mean_step_ms": 1000 * delta("infill_step_seconds_sum") / calls if calls else None,
        "server_rss_mib": after["process_resident_memory_bytes"] / 2**20 if "process_resident_memory_bytes" in after else None,
    }


def run_lsp_comparison(model_dir, editors: int, *, keystrokes: int, context_tokens: int, max_tokens: int,
                       interval_ms: float, warmup: int, threads: int | None, device: str, out: Path) -> dict:
    """``editors`` separate ``infill lsp`` processes, one typist each, all at once."""
    from infill.bench import keystrokes as ks
    from infill.engine.fill import DEFAULT_MODEL_DIR
    resolved = Path(model_dir) if model_dir else DEFAULT_MODEL_DIR
    tokenizer = ks.counting_tokenizer(resolved)
    init = {"maxTokens": max_tokens, "debounceMs": 0, "device": device}

    async def all_sessions():
        sessions = []
        for i in range(editors):
            cmd = ks.server_command(Path(model_dir) if model_dir else None, device, threads, out / f"lsp-{editors}-{i}.log", "auto")
            sessions.append(ks._session(cmd, init, tokenizer, documents=[1], keystrokes=keystrokes, warmup=warmup,
                                        context_tokens=context_tokens, interval_ms=interval_ms, timeout_s=120.0,
                                        seed=i, tick=lambda row: None))
        return await asyncio.gather(*sessions)

    t0 = time.perf_counter()
    results = asyncio.run(all_sessions())
    lat = [r["latency_ms"] for s in results for r in s["records"] if r.get("latency_ms") is not None and not r.get("error")]
    walls = [p["wall_s"] for s in results for p in s["phases"]]
    wall = max(walls) if walls else time.perf_counter() - t0
    return {"editors": editors, "processes": editors, "requests": len(lat), "wall_s": wall,
            "requests_per_s": len(lat) / wall if wall else None, "p50_ms": _quantile(lat, 0.5),
            "p95_ms": _quantile(lat, 0.95), "mean_ms": statistics.fmean(lat) if lat else None,
            "load_ms": [s.get("load_ms") for s in results]}


def plot(summary: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    phases = summary["phases"]
    x = [p["editors"] for p in phases]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    a.plot(x, [p["p50_ms"] for p in phases], "o-", label="infill serve p50")
    a.plot(x, [p["p95_ms"] for p in phases], "s--", label="infill serve p95")
    lsp = summary.get("lsp_processes") or []
    if lsp:
        a.plot([p["editors"] for p in lsp], [p["p50_ms"] for p in lsp], "o-", color="tab:red", label="separate infill lsp p50")
        a.plot([p["editors"] for p in lsp], [p["p95_ms"] for p in lsp], "s--", color="tab:red", label="separate infill lsp p95")
    a.set_xscale("log", base=2)
    a.set_yscale("log")
    a.set_xticks(x, [str(v) for v in x])
    a.set_xlabel("editors typing at once")
    a.set_ylabel("keystroke -> result (ms)")
    a.set_title("latency")
    a.grid(True, which="both", alpha=0.3)
    a.legend(fontsize=8)
    b.plot(x, [p["requests_per_s"] for p in phases], "o-", label="infill serve")
    if lsp:
        b.plot([p["editors"] for p in lsp], [p["requests_per_s"] for p in lsp], "o-", color="tab:red", label="separate infill lsp")
    b2 = b.twinx()
    b2.plot(x, [p["mean_batch_requests"] or 0 for p in phases], "^:", color="tab:green", label="mean batch (requests)")
    b2.set_ylabel("requests per model call", color="tab:green")
    b.set_xscale("log", base=2)
    b.set_xticks(x, [str(v) for v in x])
    b.set_xlabel("editors typing at once")
    b.set_ylabel("results per second")
    b.set_title("throughput")
    b.grid(True, alpha=0.3)
    lines = b.get_legend_handles_labels()
    lines2 = b2.get_legend_handles_labels()
    b.legend(lines[0] + lines2[0], lines[1] + lines2[1], fontsize=8, loc="upper left")
    m = summary["machine"]
    fig.suptitle(f"infill serve, {summary['model']}, {m.get('cpu_count')}-core CPU, torch {m.get('torch')}, "
                 f"{summary['settings']['duration_s']:.0f} s per point", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(args: argparse.Namespace) -> dict:
    from infill.bench import keystrokes as ks
    from infill.engine.fill import DEFAULT_MODEL_DIR
    editors = args.editors
    resolved = Path(args.model) if args.model else DEFAULT_MODEL_DIR
    tokenizer = ks.counting_tokenizer(resolved)
    out = Path(args.out) if args.out else DEFAULT_OUT_ROOT / f"serve-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "infill.cli", "serve", "--port", "0", "--device", args.device,
           "--max-batch", str(args.max_batch), "--max-queue", "1024"]
    if args.model:
        cmd += ["--model", str(args.model)]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    if getattr(args, "context_cache", None) is not None:
        cmd += ["--context-cache", str(args.context_cache)]
    if args.ray_replicas:
        cmd += ["--ray", "--replicas", str(args.ray_replicas), "--cpus-per-replica", str(args.ray_cpus_per_replica)]
    proc, url = start_server(cmd, out / "server.log")
    interval_s = args.interval_ms / 1000
    options = lsp_options(resolved)
    keys = int(args.duration * 1000 / max(args.interval_ms, 50)) + args.warmup + 10
    phases, all_records = [], []
    try:
        for phase, n in enumerate(editors):
            docs = ks.make_documents(n, phase, tokenizer, keystrokes=keys, context_tokens=args.context_tokens, seed=args.seed)
            before = scrape(url)
            records, start, end = asyncio.run(_run_phase(url, docs, args, interval_s, options))
            after = scrape(url)
            row = summarize(records, end - start, before, after, n)
            phases.append(row)
            all_records.extend({**r, "editors": n} for r in records)
            print(f"{n:3d} editors: p50 {row['p50_ms'] or 0:7.1f} ms  p95 {row['p95_ms'] or 0:7.1f} ms  "
                  f"{row['requests_per_s'] or 0:6.2f} req/s  batch {row['mean_batch_requests'] or 0:5.2f} requests "
                  f"({row['mean_batch_rows'] or 0:5.1f} rows)  errors {row['errors']}  server {row['server_rss_mib'] or 0:,.0f} MiB",
                  file=sys.stderr, flush=True)
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    lsp = []
    for n in args.lsp:
        row = run_lsp_comparison(args.model, n, keystrokes=args.lsp_keystrokes, context_tokens=args.context_tokens,
                                 max_tokens=args.max_tokens, interval_ms=args.interval_ms, warmup=args.warmup,
                                 threads=args.threads, device=args.device, out=out)
        lsp.append(row)
        print(f"{n:3d} separate lsp processes: p50 {row['p50_ms'] or 0:7.1f} ms  p95 {row['p95_ms'] or 0:7.1f} ms  "
              f"{row['requests_per_s'] or 0:6.2f} req/s", file=sys.stderr, flush=True)
    one = next((p for p in phases if p["editors"] == 1), None)
    sixteen = next((p for p in phases if p["editors"] == 16), None)
    targets = {}
    if one and sixteen and one["p95_ms"] and sixteen["p95_ms"]:
        ratio = sixteen["p95_ms"] / one["p95_ms"]
        targets["p95_16_over_1"] = {"value": ratio, "target": TARGET_RATIO_16, "met": ratio <= TARGET_RATIO_16}
    rates = [p["requests_per_s"] or 0 for p in phases]
    targets["throughput_rises"] = {"values": rates, "monotone_until_peak": rates[: rates.index(max(rates)) + 1] == sorted(rates[: rates.index(max(rates)) + 1])} if rates else {}
    summary = {
        "benchmark": "serve",
        "model": json.loads((resolved / "config.json").read_text()).get("name", resolved.name),
        "settings": {"editors": editors, "duration_s": args.duration, "interval_ms": args.interval_ms,
                     "warmup": args.warmup, "context_tokens": args.context_tokens, "max_tokens": args.max_tokens,
                     "max_batch": args.max_batch, "elastic": not args.rigid, "min_score": options.min_score, "threads": args.threads, "device": args.device, "seed": args.seed,
                     "server_command": cmd, "ray_replicas": args.ray_replicas, "lsp": args.lsp, "lsp_keystrokes": args.lsp_keystrokes},
        "phases": phases,
        "lsp_processes": lsp,
        "targets": targets,
        "machine": machine_info(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    write_results(out, all_records, summary)
    if not args.no_plot:
        plot(summary, out / "serve.png")
    summary["out_dir"] = str(out)
    return summary


async def _run_phase(url, docs, args, interval_s, options: SamplingOptions):
    records: list[dict] = []
    box = {"until": time.perf_counter() + 3600, "elastic": not args.rigid}

    async def editor(i, doc):
        await _editor_timed(url, doc, box, max_tokens=args.max_tokens, interval_s=interval_s, warmup=args.warmup,
                            records=records, editor=i, options=options)

    tasks = [asyncio.ensure_future(editor(i, d)) for i, d in enumerate(docs)]
    while sum(d.typed > args.warmup for d in docs) < len(docs) and not all(t.done() for t in tasks):
        await asyncio.sleep(0.005)
    start = time.perf_counter()
    box["until"] = start + args.duration
    await asyncio.gather(*tasks)
    end = time.perf_counter()
    return [r for r in records if r["t"] >= start], start, min(end, box["until"])


async def _editor_timed(url: str, doc, box: dict, *, max_tokens: int, interval_s: float, warmup: int,
                        records: list[dict], editor: int, options: SamplingOptions) -> None:
    from websockets.asyncio.client import connect

    from infill.protocol import FillRequest, Hole
    from infill.serve import protocol as wire

    async with connect(url, max_size=64 * 1024 * 1024, compression=None, open_timeout=60, ping_timeout=None) as ws:
        wire.decode_server(await ws.recv())  # Hello
        rid, last = 0, 0.0
        while doc.typed < len(doc.keys) and time.perf_counter() < box["until"]:
            wait = last + interval_s - time.perf_counter()
            if wait > 0:
                await asyncio.sleep(wait)
            doc.type_next()
            rid += 1
            request = FillRequest(text=doc.text, holes=[Hole(doc.cursor, doc.cursor, max_tokens)], language="python",
                                  path=doc.uri, options=options)
            last = t0 = time.perf_counter()
            await ws.send(wire.encode(wire.Fill(rid, request, elastic=box["elastic"])))
            while True:
                msg = wire.decode_server(await ws.recv())
                if isinstance(msg, (wire.Result, wire.Error)) and msg.id == rid:
                    break
            t1 = time.perf_counter()
            if rid > warmup and t1 <= box["until"]:
                rec = {"editor": editor, "latency_ms": (t1 - t0) * 1000, "ok": isinstance(msg, wire.Result), "t": t0}
                if isinstance(msg, wire.Error):
                    rec["error"] = msg.code
                else:  # stopped under the model's floor (FillResult.below_floor): no suggestion, sooner
                    rec["below_floor"] = msg.result.below_floor
                records.append(rec)


def _ints(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if any(v < 1 for v in values):
        raise argparse.ArgumentTypeError("editor counts must be positive")
    return values


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--editors", type=_ints, default=[1, 4, 16, 64], help="editor counts, one phase each (default 1,4,16,64)")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds each phase types for (default 60)")
    parser.add_argument("--interval-ms", type=float, default=200.0,
                        help="at least this long between one editor's keystrokes (default 200: 5 keys/s)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed keystrokes per editor first (default 2)")
    parser.add_argument("--context-tokens", type=int, default=1024, help="context around the cursor (default 1024)")
    parser.add_argument("--max-tokens", type=int, default=32, help="the fill window (default 32, as the language server's)")
    parser.add_argument("--max-batch", type=int, default=64, help="the server's --max-batch (default 64)")
    parser.add_argument("--lsp", type=_ints, default=[], help="also run this many separate `infill lsp` processes (e.g. 1,4)")
    parser.add_argument("--lsp-keystrokes", type=int, default=30, help="timed keystrokes per editor in the --lsp runs (default 30)")
    parser.add_argument("--rigid", action="store_true",
                        help="full work for every request (default: elastic, as the language server's inline fills)")
    parser.add_argument("--ray-replicas", type=int, default=0,
                        help="serve through this many engine replicas on Ray Serve (infill serve --ray; needs infill[ray]); 0: one engine")
    parser.add_argument("--ray-cpus-per-replica", type=float, default=1.0, help="with --ray-replicas: CPUs reserved per replica (default 1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="output directory (default bench/results/serve-<time>)")
    parser.add_argument("--no-plot", action="store_true", help="skip serve.png (matplotlib)")


def main(args: argparse.Namespace) -> int:
    summary = run(args)
    print(json.dumps({"phases": summary["phases"], "lsp_processes": summary["lsp_processes"],
                      "targets": summary["targets"], "out_dir": summary["out_dir"]}, indent=1))
    return 0
