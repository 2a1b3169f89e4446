"""Pooled constrained validity over fresh seeds' results directories: parse per language, and the
fills that did not parse but were reported valid (engine_valid true). Usage: pooled.py DIR..."""
import collections, glob, json, sys

ok, n, lies = collections.Counter(), collections.Counter(), collections.Counter()
for d in sys.argv[1:]:
    for f in sorted(glob.glob(f"{d}/*/results.jsonl")):
        for line in open(f):
            r = json.loads(line)
            if r.get("mode") != "constrained":
                continue
            lang = r["language"]
            n[lang] += 1
            ok[lang] += bool(r.get("valid"))
            lies[lang] += r.get("valid") is False and r.get("engine_valid") is True
for lang in sorted(n):
    print(f"{lang:11} {ok[lang]}/{n[lang]} = {100 * ok[lang] / n[lang]:.2f}%  invalid reported valid: {lies[lang]}")
print(f"{'all':11} {sum(ok.values())}/{sum(n.values())} = {100 * sum(ok.values()) / sum(n.values()):.2f}%  invalid reported valid: {sum(lies.values())}")
