"""Per language: constrained / unconstrained validity, mean latency per fill, and their ratio."""
import json, glob, sys
d = sys.argv[1]
tc = tu = 0; n = 0; lc = lu = 0.0
for f in sorted(glob.glob(f'{d}/*/summary.json')):
    s = json.load(open(f)); c, u = s['metrics']['constrained'], s['metrics']['unconstrained']
    k = s['n_holes']; n += k; tc += round(c['validity'] * k); tu += round(u['validity'] * k)
    lc += c['mean_latency_ms'] * k; lu += u['mean_latency_ms'] * k
    print(f"| {s['language']} | {round(c['validity']*k)}/{k} / {round(u['validity']*k)}/{k} | {c['mean_latency_ms']:.0f} / {u['mean_latency_ms']:.0f} ms | {s['metrics']['latency_ratio']:.2f}x | {c['exact_match']*100:.1f}% | {c['edit_similarity']:.3f} / {c['baseline_similarity']:.3f} |")
print(f"| all | {tc}/{n} / {tu}/{n} | {lc/n:.0f} / {lu/n:.0f} ms | {lc/lu:.2f}x | | |")
