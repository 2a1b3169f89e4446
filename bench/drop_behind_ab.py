"""EngineConfig.drop_behind, paired: each HumanEval-Infilling task of a subset filled with every
candidate row run to its end (``drop_behind=None``) and with the rule (``--gap`` nats), in one
process, each fill after Engine.forget (no context states or recent fills carried from one fill to
the next, so a pair differs only by the rule), the order alternating task by task (a shared
machine drifts). Prints each pair's latency and steps; the tests run for the fills that differ.

    .venv/bin/python bench/drop_behind_ab.py multi-line --limit 60 --subset-seed 953 --out results.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import replace
from typing import Callable

from infill.bench.quality import build_request, execute, load_tasks
from infill.engine.fill import Engine, EngineConfig


def paired(benchmark: str, tasks, engine: Engine, setups: dict[str, Callable[[], None]], out: str, extra: dict) -> dict:
    """Each task filled under each of two ``setups`` ("off", "on": each puts the engine in its state),
    each fill after Engine.forget, the order alternating task by task; the tests run for the fills
    that differ. Writes every pair and the summary to ``out``."""
    rows = []
    for k, task in enumerate(tasks):
        request = request_of(benchmark, task)
        got = {}
        for name in ("off", "on") if k % 2 == 0 else ("on", "off"):
            setups[name]()
            engine.forget()
            t0 = time.perf_counter()
            result = engine.fill(request)
            got[name] = (result.fills[0].text, (time.perf_counter() - t0) * 1000, result.timings.steps)
        (off, off_ms, off_steps), (on, on_ms, on_steps) = got["off"], got["on"]
        rows.append(dict(task=task.task_id, off=off, on=on, off_ms=off_ms, on_ms=on_ms, off_steps=off_steps, on_steps=on_steps))
        print(f"{task.task_id:42s} off {off_ms:7.0f} ms {off_steps:3d} steps   on {on_ms:7.0f} ms {on_steps:3d} steps   "
              f"{'same' if off == on else 'CHANGED'}", flush=True)
    changed = [r for r in rows if r["off"] != r["on"]]
    runs = run_tests(tasks, [(r["task"], r[name]) for r in changed for name in ("off", "on")])
    for r in changed:
        r["off_passed"], r["on_passed"] = runs[(r["task"], r["off"])].passed, runs[(r["task"], r["on"])].passed
    offs, ons = [r["off_ms"] for r in rows], [r["on_ms"] for r in rows]
    summary = dict(benchmark=benchmark, **extra, tasks=len(rows),
                   changed=len(changed), changed_passed_off=sum(bool(r.get("off_passed")) for r in changed),
                   changed_passed_on=sum(bool(r.get("on_passed")) for r in changed),
                   off_total_s=sum(offs) / 1000, on_total_s=sum(ons) / 1000,
                   off_median_ms=statistics.median(offs), on_median_ms=statistics.median(ons),
                   median_of_ratios=statistics.median(b / a for a, b in zip(offs, ons)),
                   off_steps=sum(r["off_steps"] for r in rows), on_steps=sum(r["on_steps"] for r in rows))
    print(json.dumps(summary, indent=1))
    with open(out, "w") as f:
        json.dump(dict(summary=summary, rows=rows), f, indent=1)
    return summary


def request_of(benchmark: str, task):
    """A task's request in the quality benchmark's window for ``benchmark``."""
    return build_request(task, 128 if benchmark == "multi-line" else 32)


def fill_alone(engine: Engine, benchmark: str, task):
    """The engine's fill of one task with nothing carried over from the fills before it (Engine.forget first)."""
    engine.forget()
    return engine.fill(request_of(benchmark, task))


def run_tests(tasks, jobs) -> dict:
    """{(task id, fill text): its test run} for each of ``jobs`` (pairs of a task id and a fill)."""
    by_id = {t.task_id: t for t in tasks}
    jobs = sorted(set(jobs))
    return dict(zip(jobs, execute([by_id[k].program(t) for k, t in jobs], progress=False)))


def arguments(description: str, limit: int = 60) -> argparse.ArgumentParser:
    """The options every paired or ranking script here takes: which benchmark, which subset, where to write."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("benchmark", choices=["single-line", "multi-line"])
    parser.add_argument("--limit", type=int, default=limit)
    parser.add_argument("--subset-seed", type=int, required=True)
    parser.add_argument("--out", required=True, help="a JSON file: each task's fills and the summary")
    return parser


def main() -> None:
    parser = arguments(__doc__.split("\n")[0])
    parser.add_argument("--gap", type=float, default=20.0)
    args = parser.parse_args()
    tasks = load_tasks(args.benchmark, limit=args.limit, seed=args.subset_seed)
    engine = Engine.load(EngineConfig(threads=2))
    base = engine.config

    def gap(value):
        def setup():
            engine.config = replace(base, drop_behind=value)
        return setup

    paired(args.benchmark, tasks, engine, {"off": gap(None), "on": gap(args.gap)}, args.out,
           dict(limit=args.limit, subset_seed=args.subset_seed, gap=args.gap))


if __name__ == "__main__":
    main()
