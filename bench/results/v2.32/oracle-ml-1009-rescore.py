import json, sys
from infill.bench.quality import execute, load_tasks
d = json.load(open(sys.argv[1])); bench, limit, seed = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
by_id = {t.task_id: t for t in load_tasks(bench, limit=limit, seed=seed)}
jobs = set()
for r in d["rows"]:
    alls = [t for s in r["ranks"] for t in s["texts"]]
    op = ""
    if r["shipped"] not in alls:
        for t in alls:
            if r["shipped"].startswith(t): op = r["shipped"][len(t):]; break
    r["op"] = op
    r["cands"] = sorted({r["shipped"]} | {t + op for t in alls})
    jobs |= {(r["task"], t) for t in r["cands"]}
jobs = sorted(jobs)
runs = dict(zip(jobs, execute([by_id[k].program(t) for k, t in jobs], progress=False)))
sh = sum(runs[(r["task"], r["shipped"])].passed for r in d["rows"])
orc = sum(any(runs[(r["task"], t)].passed for t in r["cands"]) for r in d["rows"])
print("shipped", sh, "oracle", orc, "tasks", len(d["rows"]), "ops", sum(bool(r["op"]) for r in d["rows"]))
