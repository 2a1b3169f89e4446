"""One fresh validity seed's row: parse, exact (stripped), invalid reported valid, and per language
the mean edit similarity against copy-the-previous-line. Usage: seed_table.py DIR"""
import collections, glob, json, sys
rows = [json.loads(l) for f in sorted(glob.glob(f"{sys.argv[1]}/*/results.jsonl")) for l in open(f)]
rows = [r for r in rows if r["mode"] == "constrained"]
print(f"parse {sum(r['valid'] for r in rows)}/{len(rows)}  exact {sum(r['exact'] for r in rows)} "
      f"({sum(r['exact_stripped'] for r in rows)} stripped)  invalid reported valid "
      f"{sum(r['valid'] is False and r['engine_valid'] is True for r in rows)}")
by = collections.defaultdict(list)
for r in rows:
    by[r["language"]].append(r)
for lang, rs in sorted(by.items()):
    es = sum(r["edit_similarity"] for r in rs) / len(rs)
    bs = sum(r["baseline_similarity"] for r in rs) / len(rs)
    print(f"{lang:11} {sum(r['valid'] for r in rs)}/{len(rs)}  similarity {es:.3f} against {bs:.3f}")
