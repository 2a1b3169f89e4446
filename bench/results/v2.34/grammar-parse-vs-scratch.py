# Grammar.parse against a parse from scratch, typing real lines (bench/sources); run at 746369a.
"""Grammar.parse (kept trees, incremental reuse) against a parse from scratch, typing real lines."""
import random, sys, time
from pathlib import Path
from infill.syntax.languages import grammar, spec_for
langs = sys.argv[1].split(","); seed = int(sys.argv[2]); n_files = int(sys.argv[3])
rng = random.Random(seed)
for lang in langs:
    g = grammar(lang)
    exts = tuple("." + e for e in spec_for(lang).extensions)
    files = sorted(p for p in Path("bench/sources", lang).rglob("*") if p.is_file() and p.suffix in exts)
    rng.shuffle(files)
    diffs = steps = clean = 0; t_new = t_fresh = 0.0
    for f in files[:n_files]:
        data = f.read_bytes()
        lines = data.split(b"\n")
        cand = [i for i, l in enumerate(lines) if len(l.strip()) > 8]
        if not cand: continue
        i = rng.choice(cand); line = lines[i]; indent = len(line) - len(line.lstrip())
        base = b"\n".join(lines[:i] + [line[:indent]] + lines[i+1:])
        at = len(b"\n".join(lines[:i])) + (1 if i else 0) + indent
        g.parse(base)
        for k in range(1, len(line) - indent + 1):
            new = base[:at] + line[indent:indent+k] + base[at:]
            t0 = time.perf_counter(); a = g.parse(new); t1 = time.perf_counter()
            b = g.parser().parse(new); t2 = time.perf_counter()
            t_new += t1 - t0; t_fresh += t2 - t1; steps += 1; clean += not b.root_node.has_error
            diffs += str(a.root_node) != str(b.root_node)
    print(f"{lang}: {steps} keystrokes ({clean} error-free), {diffs} differ; Grammar.parse {1000*t_new/steps:.2f} ms, scratch {1000*t_fresh/steps:.2f} ms", flush=True)
