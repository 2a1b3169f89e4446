"""Offline: each constrained validity record's fill judged by request_valid at this code, against the
record's whole-file verdict. Prints counts per language: agree, lies (reported valid, not parsing),
false alarms (reported invalid, parsing)."""
import collections, sys
from infill.syntax.constraint import request_valid
from infill.protocol import FillRequest, Hole
from infill.bench.validity import recorded_cuts
cnt = collections.Counter(); ex = []
for d, r, cut in recorded_cuts(sys.argv[1:]):
    lang = r["language"]
    rv = request_valid(FillRequest(text=cut.text, holes=[Hole(cut.start, cut.start)], language=lang), [r["fill"] or ""])
    k = "agree" if rv == r["valid"] else ("LIE" if rv else "ALARM")
    cnt[(lang, k)] += 1
    if k != "agree": ex.append((d.split("/")[-1], lang, r["kind"], r["path"][-40:], r["line"], k, repr(r["reference"][:40]), repr((r["fill"] or "")[:50])))
for k in sorted(cnt): print(k, cnt[k])
for e in ex: print(*e)
