"""A causal model's context budget split two ways, in one process: the prefix at 75% of the budget
(the text after the hole keeping the rest, which a causal model never encodes) against the split
given as ``--share`` (default: the engine's own, all of it for a causal model).

Holes are cut as ``infill bench validity`` cuts them (the same sources, kinds and seed) and filled
with the benchmark's constrained options, each from a cold start (``Engine.forget``: a context is
encoded as an editor's first keystroke at a spot encodes it). A hole whose prefix fits both splits
gets the same tokens either way, so the same fill: it is filled once and counted as the same. The
others are filled both ways, in alternating order, and judged as the benchmark judges (valid in the
original file, exact, edit similarity).

    .venv/bin/python bench/prefix_budget_ab.py --seed 373 --holes 16 --out /tmp/prefix-ab.jsonl
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time

from infill.bench.validity import DEFAULT_SOURCES, KINDS, cut_holes, edit_similarity, judge, load_sources, source_dir
from infill.engine.fill import Engine, EngineConfig
from infill.protocol import SamplingOptions

LANGUAGES = ("python", "javascript", "typescript", "tsx", "go", "rust", "java", "c", "cpp")


def fill(engine: Engine, config: EngineConfig, request) -> tuple[str, float, int]:
    """(fill, cold latency in ms, prefix tokens) of ``request`` under ``config``."""
    engine.config = config
    engine.forget()
    tokens = len(engine.prepare(request).segments[0])
    t0 = time.perf_counter()
    result = engine.fill(request)
    return result.fills[0].text, (time.perf_counter() - t0) * 1000, tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--holes", type=int, default=16, help="holes per language")
    parser.add_argument("--languages", default=",".join(LANGUAGES))
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--share", type=float, default=None, help="the prefix's share to compare (default: the engine's)")
    parser.add_argument("--out", required=True, help="per-hole records (JSON lines)")
    args = parser.parse_args()
    engine = Engine.load(EngineConfig(threads=2))
    before = dataclasses.replace(engine.config, prefix_share=0.75)
    after = dataclasses.replace(engine.config, prefix_share=args.share)
    options = SamplingOptions(constrained=True)
    records = []
    with open(args.out, "w") as out:
        for language in args.languages.split(","):
            files, _ = load_sources(source_dir(DEFAULT_SOURCES, language), language, 200, args.seed)
            for n, cut in enumerate(cut_holes(files, args.holes, args.seed, args.kinds.split(","), language)):
                request = cut.request(language, 32, options)
                engine.config = before
                seg_before = engine.prepare(request).segments
                engine.config = after
                same = engine.prepare(request).segments == seg_before
                order = [("before", before), ("after", after)] if n % 2 == 0 else [("after", after), ("before", before)]
                got = {}
                for name, config in order[:1] if same else order:
                    text, ms, tokens = fill(engine, config, request)
                    got[name] = {"fill": text, "ms": round(ms, 1), "prefix_tokens": tokens, "exact": text.strip() == cut.reference.strip(),
                                 "edit_similarity": round(edit_similarity(text.strip(), cut.reference.strip()), 4),
                                 **judge(language, cut, text)}
                if same:
                    got["before" if "after" in got else "after"] = got[order[0][0]]
                record = {"language": language, "path": cut.path, "line": cut.line, "kind": cut.kind, "start": cut.start,
                          "end": cut.end, "reference": cut.reference, "same_context": same, **got}
                records.append(record)
                out.write(json.dumps(record) + "\n")
                out.flush()
                print(language, cut.kind, "same" if same else f"{got['before']['prefix_tokens']}->{got['after']['prefix_tokens']} tokens "
                      f"{got['before']['ms']:.0f}->{got['after']['ms']:.0f} ms, {got['before']['fill'][:30]!r} -> {got['after']['fill'][:30]!r}",
                      flush=True)
    report(records)


def report(records: list[dict]) -> None:
    """Per language and pooled: holes, those with a longer context, and each side's validity,
    exact matches and mean edit similarity; the latency ratio over the holes filled both ways."""
    def line(name: str, rs: list[dict]) -> str:
        diff = [r for r in rs if not r["same_context"]]
        parts = [f"{name:11s} {len(rs):4d} holes, {len(diff):4d} with a longer context"]
        for side in ("before", "after"):
            parts.append(f"{side}: valid {sum(bool(r[side]['valid']) for r in rs)}, exact {sum(r[side]['exact'] for r in rs)}, "
                         f"ES {statistics.mean(r[side]['edit_similarity'] for r in rs):.4f}")
        if diff:
            parts.append(f"changed fills {sum(r['before']['fill'] != r['after']['fill'] for r in diff)}, "
                         f"ms median of pairs {statistics.median(r['after']['ms'] / r['before']['ms'] for r in diff):.3f}, "
                         f"totals {sum(r['after']['ms'] for r in diff) / sum(r['before']['ms'] for r in diff):.3f}")
        return " | ".join(parts)

    for language in dict.fromkeys(r["language"] for r in records):
        print(line(language, [r for r in records if r["language"] == language]))
    print(line("all", records))


if __name__ == "__main__":
    main()
