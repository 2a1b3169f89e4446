"""How many lines of the code after a hole should rank a causal model's candidates
(EngineConfig.rerank_lines, Engine.rank)? Each HumanEval-Infilling task of a subset is filled once as
the engine fills it; where its first round's candidates are ranked (Engine.pick), each ``--lines``
value ranks the same candidates too, and the tests run for every fill some value picks. The fill the
engine returns stays the shipped one (its own ``rerank_lines``), so what each value would pick is
compared on the same candidates: the first round's pick only (an echo or mend round after it ranks
its branches with the shipped value).

    .venv/bin/python bench/rerank_lines_ab.py multi-line --limit 100 --subset-seed 961 --lines 2 4 8 16 --out r.json
"""

from __future__ import annotations

import json
import time
from dataclasses import replace

from drop_behind_ab import arguments, fill_alone, run_tests

from infill.bench.quality import load_tasks
from infill.engine import fill
from infill.engine.fill import Engine, EngineConfig


def main() -> None:
    parser = arguments(__doc__.split("\n")[0], limit=100)
    parser.add_argument("--lines", type=int, nargs="+", default=[2, 4, 8, 16])
    args = parser.parse_args()
    tasks = load_tasks(args.benchmark, limit=args.limit, seed=args.subset_seed)
    engine = Engine.load(EngineConfig(threads=2))
    shipped, seen = engine.config, {}
    real_pick = fill.Engine.pick

    def pick(self, finisher, ri, p):
        leaders = finisher.leaders(ri)
        if self.model.capabilities.scores_text and len(p.request.holes) == 1 and len(leaders) > 1 and "picks" not in seen:
            texts, picks, ms = list(leaders), {}, {}
            for n in args.lines:
                self.config = replace(shipped, rerank_lines=n)
                t0 = time.perf_counter()
                picks[n] = texts[self.rank(p, texts)]
                ms[n] = (time.perf_counter() - t0) * 1000
            self.config = shipped
            seen.update(picks=picks, ms=ms, candidates=len(texts))
        return real_pick(self, finisher, ri, p)

    fill.Engine.pick = pick
    rows = []
    for task in tasks:
        seen.clear()
        result = fill_alone(engine, args.benchmark, task)
        picks = seen.get("picks") or {n: None for n in args.lines}
        rows.append(dict(task=task.task_id, shipped=result.fills[0].text, picks={str(n): t for n, t in picks.items()},
                         rank_ms={str(n): v for n, v in seen.get("ms", {}).items()}, candidates=seen.get("candidates", 1)))
        print(task.task_id, seen.get("candidates", 1), "distinct picks", len({t for t in picks.values()}), flush=True)
    runs = run_tests(tasks, [(r["task"], t) for r in rows for t in [r["shipped"], *r["picks"].values()] if t is not None])
    summary = dict(benchmark=args.benchmark, limit=args.limit, subset_seed=args.subset_seed, tasks=len(rows),
                   ranked=sum(r["candidates"] > 1 for r in rows),
                   shipped_passed=sum(runs[(r["task"], r["shipped"])].passed for r in rows))
    for n in args.lines:
        key = str(n)
        # a task whose first round was not ranked keeps the shipped fill under every value
        passed = [runs[(r["task"], r["picks"][key] if r["picks"][key] is not None else r["shipped"])].passed for r in rows]
        summary[f"lines_{n}"] = dict(passed=sum(passed), rank_ms=sum(r["rank_ms"].get(key, 0.0) for r in rows))
        for r, ok in zip(rows, passed):
            r.setdefault("passed", {})[key] = ok
    print(json.dumps(summary, indent=1))
    with open(args.out, "w") as f:
        json.dump(dict(summary=summary, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
