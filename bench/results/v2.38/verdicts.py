"""Offline: each constrained validity record's fill judged by request_valid at this code, against the
record's whole-file verdict. Prints counts per language: agree, lies (reported valid, not parsing),
false alarms (reported invalid, parsing)."""
import json, glob, sys, collections
from infill.syntax.constraint import request_valid
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
            rv = request_valid(FillRequest(text=text, holes=[Hole(r["start"], r["start"])], language=lang), [r["fill"] or ""])
            k = "agree" if rv == r["valid"] else ("LIE" if rv else "ALARM")
            cnt[(lang, k)] += 1
            if k != "agree": ex.append((d.split("/")[-1], lang, r["kind"], r["path"][-40:], r["line"], k, repr(r["reference"][:40]), repr((r["fill"] or "")[:50])))
for k in sorted(cnt): print(k, cnt[k])
for e in ex: print(*e)
