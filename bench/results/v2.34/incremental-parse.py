"""How often does tree-sitter's incremental reparse (from the previous keystroke's tree) differ
from a parse from scratch, typing real lines into real files of each language?
Usage (repository root): python incremental-parse.py LANGUAGES SEED FILES_PER_LANGUAGE; run with
seeds 1, 2, 3 and 40 files for incremental-parse-s1-3.txt."""
import random, sys, time
from pathlib import Path
from infill.syntax.languages import grammar, spec_for

def common(a: bytes, b: bytes):
    n = min(len(a), len(b))
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]: lo = mid
        else: hi = mid - 1
    p = lo
    n2 = n - p
    lo, hi = 0, n2
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[len(a)-mid:] == b[len(b)-mid:]: lo = mid
        else: hi = mid - 1
    return p, lo

def point(d, i):
    return (d.count(b"\n", 0, i), i - (d.rfind(b"\n", 0, i) + 1))

def incremental(g, old_tree, old, new):
    p, s = common(old, new)
    t = old_tree.copy()
    t.edit(start_byte=p, old_end_byte=len(old)-s, new_end_byte=len(new)-s,
           start_point=point(old, p), old_end_point=point(old, len(old)-s), new_end_point=point(new, len(new)-s))
    return g.parser().parse(new, old_tree=t)

langs = sys.argv[1].split(",")
seed = int(sys.argv[2]); n_lines = int(sys.argv[3])
rng = random.Random(seed)
for lang in langs:
    g = grammar(lang)
    exts = tuple("." + e for e in spec_for(lang).extensions)
    files = sorted(p for p in Path("bench/sources", lang).rglob("*") if p.is_file() and (exts is None or p.suffix in exts))
    rng.shuffle(files)
    diffs = steps = clean = clean_diffs = 0; t_inc = t_fresh = 0.0
    for f in files[:n_lines]:
        data = f.read_bytes()
        if len(data) > 300_000: continue
        lines = data.split(b"\n")
        cand = [i for i, l in enumerate(lines) if len(l.strip()) > 8]
        if not cand: continue
        i = rng.choice(cand)
        line = lines[i]
        indent = len(line) - len(line.lstrip())
        base = b"\n".join(lines[:i] + [line[:indent]] + lines[i+1:])
        at = len(b"\n".join(lines[:i])) + (1 if i else 0) + indent
        prev = base; tree = g.parser().parse(prev)
        for k in range(1, len(line) - indent + 1):
            new = base[:at] + line[indent:indent+k] + base[at:]
            t0 = time.perf_counter(); inc = incremental(g, tree, prev, new); t1 = time.perf_counter()
            fresh = g.parser().parse(new); t2 = time.perf_counter()
            t_inc += t1 - t0; t_fresh += t2 - t1
            steps += 1
            clean += not fresh.root_node.has_error
            if str(inc.root_node) != str(fresh.root_node):
                diffs += 1
                clean_diffs += not (fresh.root_node.has_error and inc.root_node.has_error)
                if False:
                    print("  DIFF", lang, f, "line", i+1, repr(line[indent:indent+k]), "errors inc/fresh", inc.root_node.has_error, fresh.root_node.has_error)
                    a, b = str(inc.root_node), str(fresh.root_node)
                    j = next(j for j in range(min(len(a), len(b))) if a[j] != b[j])
                    print("   inc  :", a[max(0,j-150):j+150]); print("   fresh:", b[max(0,j-150):j+150])
            tree, prev = inc, new
    print(f"{lang}: {steps} keystrokes ({clean} error-free), {diffs} differ ({clean_diffs} where either is error-free); mean incremental {1000*t_inc/max(steps,1):.2f} ms, fresh {1000*t_fresh/max(steps,1):.2f} ms", flush=True)
