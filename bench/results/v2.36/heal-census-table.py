"""The table of heal-census-s*.jsonl: per language, holes whose heal the rule changes, parse / exact /
edit similarity with the last token alone taken back ("old") and with the word taken back whole
("new"). The census ran before operators were kept to their last token; a hole healed over an
operator's tokens counts here as its old fill, which the final rule gives (one hole, s1153)."""
import collections, json, re, sys

rows = [json.loads(l) for f in sys.argv[1:] for l in open(f)]
agg = collections.defaultdict(collections.Counter)
for r in rows:
    new = r["new"] if re.fullmatch(r" ?[A-Za-z0-9_]+", r["healed"]) else r["old"]
    for a in (agg[r["language"]], agg["all"]):
        a["n"] += 1
        a["changed"] += new["fill"] != r["old"]["fill"]
        for k, v in (("old", r["old"]), ("new", new)):
            a[k + "_valid"] += bool(v["valid"]); a[k + "_exact"] += v["exact"]; a[k + "_es"] += v["es"]
print("| language | holes healed over several tokens | fills changed | parse old -> new | exact old -> new | edit similarity old -> new |")
print("|---|---|---|---|---|---|")
for lang in sorted(agg, key=lambda x: (x == "all", x)):
    a = agg[lang]; n = a["n"]
    print(f"| {lang} | {n} | {a['changed']} | {a['old_valid']} -> {a['new_valid']} | {a['old_exact']} -> {a['new_exact']} | {a['old_es']/n:.3f} -> {a['new_es']/n:.3f} |")
