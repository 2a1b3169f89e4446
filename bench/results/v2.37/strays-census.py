"""Offline: over validity records (constrained), which fills RequestCheck.strays flags; their judge verdicts."""
import collections, sys
from infill.syntax.constraint import RequestCheck
from infill.protocol import FillRequest, Hole
from infill.bench.validity import recorded_cuts
cnt = collections.Counter(); ex = []
for d, r, cut in recorded_cuts(sys.argv[1:]):
    lang = r["language"]
    check = RequestCheck(FillRequest(text=cut.text, holes=[Hole(cut.start, cut.start)], language=lang))
    flag = check.strays([(r["fill"] or "").encode()])
    cnt[(lang, "valid" if r["valid"] else "INVALID", "ev" if r.get("engine_valid") else "ev-no", "FLAG" if flag else "-", "headless" if check.headless[0] else "")] += 1
    if flag or (check.headless[0] and not r["valid"]): ex.append((d.split("/")[-1], lang, r["kind"], r["path"], r["line"], r["valid"], flag, repr(r["reference"][:40]), repr((r["fill"] or "")[:50])))
for k in sorted(cnt): print(k, cnt[k])
for e in ex: print(*e)
