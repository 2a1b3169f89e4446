"""Committed ``infill bench validity`` records judged again with the current code's judge: no
model runs. Each record's fill goes back into its file (read from the sources directory that
``bench/fetch_validity_sources.sh`` fills) and ``judge`` reads it as the benchmark would today.
Prints, per language and in all, the valid counts as recorded and as judged now, and each record
whose verdict changed:

    .venv/bin/python bench/rejudge_validity.py bench/results/v2.18/validity-s331 [more runs...]

A record whose file is gone from the sources (another fetch) is counted as missing.
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path

from infill.bench.validity import Cut, judge


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", type=Path, help="validity output directories (a language's folder or a run of several)")
    p.add_argument("--sources", type=Path, default=Path("bench/sources"))
    args = p.parse_args()
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for run in args.runs:
        for results in sorted(run.rglob("results.jsonl")):
            for line in results.read_text(encoding="utf-8").splitlines():
                r = json.loads(line)
                if r["mode"] != "constrained" or r["valid"] is None:
                    continue
                c = counts[r["language"]]
                c["holes"] += 1
                c["recorded"] += bool(r["valid"])
                path = args.sources / r["language"] / r["path"]
                if not path.is_file():
                    c["missing"] += 1
                    continue
                cut = Cut(r["path"], path.read_text(encoding="utf-8"), r["start"], r["end"], r["kind"], r["line"])
                if cut.reference != r["reference"]:
                    c["missing"] += 1  # the file changed since the run
                    continue
                now = judge(r["language"], cut, r["fill"])["valid"]
                c["now"] += bool(now)
                if bool(now) != bool(r["valid"]):
                    print(f"{results.parent}: {r['language']} hole {r['hole']} ({r['kind']}, {r['path']}:{r['line']}): "
                          f"recorded {r['valid']}, now {now}; fill {r['fill'][:60]!r}")
    total = collections.Counter()
    for language, c in sorted(counts.items()):
        total.update(c)
        print(f"{language:11} holes {c['holes']:4}  valid as recorded {c['recorded']:4}  now {c['now']:4}  missing {c['missing']}")
    print(f"{'all':11} holes {total['holes']:4}  valid as recorded {total['recorded']:4}  now {total['now']:4}  missing {total['missing']}")


if __name__ == "__main__":
    main()
