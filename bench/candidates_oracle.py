"""How much could a better ranking of a causal model's candidates gain? Each HumanEval-Infilling
task of a subset is filled once as the engine fills it (each fill after Engine.forget); every set
of candidates Engine.rank orders (the first round's leaders, then any echo or mend round's
branches) is recorded, and the tests run for each candidate. A task counts for the oracle where
any of its candidates passes: the most that any ranking of these candidates could pass.

    .venv/bin/python bench/candidates_oracle.py multi-line --limit 100 --subset-seed 1009 --out oracle.json
"""

from __future__ import annotations

import json

from drop_behind_ab import arguments, fill_alone, run_tests

from infill.bench.quality import load_tasks
from infill.engine import fill
from infill.engine.fill import Engine, EngineConfig


def main() -> None:
    args = arguments(__doc__.split("\n")[0], limit=100).parse_args()
    tasks = load_tasks(args.benchmark, limit=args.limit, seed=args.subset_seed)
    engine = Engine.load(EngineConfig(threads=2))
    seen: list[list[str]] = []
    real_rank = fill.Engine.rank

    def rank(self, p, texts):
        # the texts as the result would have them: a header's opener (``:`` and the line break) is
        # written by the shape, not by the model, and Engine.best_of adds it back the same way
        opener = p.shape.opener
        seen.append([t if not opener or t.endswith(opener) else t + opener for t in texts])
        return real_rank(self, p, texts)

    fill.Engine.rank = rank
    rows = []
    for task in tasks:
        seen.clear()
        result = fill_alone(engine, args.benchmark, task)
        rows.append(dict(task=task.task_id, shipped=result.fills[0].text, rounds=[list(s) for s in seen]))
        print(task.task_id, "ranked sets", len(seen), "candidates", [len(s) for s in seen], flush=True)
    runs = run_tests(tasks, [(r["task"], t) for r in rows for t in [r["shipped"], *(t for s in r["rounds"] for t in s)]])
    for r in rows:
        r["shipped_passed"] = runs[(r["task"], r["shipped"])].passed
        r["passing"] = sorted({t for s in r["rounds"] for t in s if runs[(r["task"], t)].passed})
        first = r["rounds"][0] if r["rounds"] else [r["shipped"]]
        r["first_round_any"] = any(runs[(r["task"], t)].passed for t in first)
    summary = dict(benchmark=args.benchmark, limit=args.limit, subset_seed=args.subset_seed, tasks=len(rows),
                   ranked=sum(bool(r["rounds"]) for r in rows),
                   candidates=sum(len(set(t for s in r["rounds"] for t in s)) for r in rows),
                   shipped_passed=sum(r["shipped_passed"] for r in rows),
                   first_round_oracle=sum(r["first_round_any"] for r in rows),
                   oracle=sum(r["shipped_passed"] or bool(r["passing"]) for r in rows))
    print(json.dumps(summary, indent=1))
    with open(args.out, "w") as f:
        json.dump(dict(summary=summary, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
