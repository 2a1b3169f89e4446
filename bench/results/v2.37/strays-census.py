"""Offline: over validity records (constrained), which fills RequestCheck.strays flags; their judge verdicts."""
import json, glob, sys, collections
from infill.syntax.constraint import RequestCheck
from infill.protocol import FillRequest, Hole
from infill.bench.validity import source_dir
cnt = collections.Counter(); ex = []
for d in sys.argv[1:]:
    for f in sorted(glob.glob(f"{d}/*/results.jsonl")):
        for line in open(f):
            r = json.loads(line)
            if r.get("mode") != "constrained" or r.get("error"): continue
            lang = r["language"]
            orig = (source_dir("bench/sources", lang) / r["path"]).read_text(encoding="utf-8")
            text = orig[: r["start"]] + orig[r["end"]:]
            check = RequestCheck(FillRequest(text=text, holes=[Hole(r["start"], r["start"])], language=lang))
            flag = check.strays([(r["fill"] or "").encode()])
            cnt[(lang, "valid" if r["valid"] else "INVALID", "ev" if r.get("engine_valid") else "ev-no", "FLAG" if flag else "-", "headless" if check.headless[0] else "")] += 1
            if flag or (check.headless[0] and not r["valid"]): ex.append((d.split("/")[-1], lang, r["kind"], r["path"], r["line"], r["valid"], flag, repr(r["reference"][:40]), repr((r["fill"] or "")[:50])))
for k in sorted(cnt): print(k, cnt[k])
for e in ex: print(*e)
