"""Committed ``infill bench validity`` records judged again with the current code's judge: no
model runs. Each record's fill goes back into its file (read from the sources directory that
``bench/fetch_validity_sources.sh`` fills) and ``judge`` reads it as the benchmark would today.
Prints, per language and in all, the counts of ``valid`` (the original file with the fill) and
``valid_cut`` (the document the engine judged) as recorded and as judged now, and each record whose
verdict changed:

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
                c["recorded_cut"] += bool(r["valid_cut"])
                path = args.sources / r["language"] / r["path"]
                if not path.is_file():
                    c["missing"] += 1
                    continue
                cut = Cut(r["path"], path.read_text(encoding="utf-8"), r["start"], r["end"], r["kind"], r["line"])
                if cut.reference != r["reference"]:
                    c["missing"] += 1  # the file changed since the run
                    continue
                now = judge(r["language"], cut, r["fill"])
                c["now"] += bool(now["valid"])
                c["now_cut"] += bool(now["valid_cut"])
                for key in ("valid", "valid_cut"):
                    if bool(now[key]) != bool(r[key]):
                        print(f"{results.parent}: {r['language']} hole {r['hole']} ({r['kind']}, {r['path']}:{r['line']}): "
                              f"{key} recorded {r[key]}, now {now[key]}; fill {r['fill'][:60]!r}")
    total = collections.Counter()
    for language, c in sorted(counts.items()):
        total.update(c)
        _row(language, c)
    _row("all", total)


def _row(name: str, c: collections.Counter) -> None:
    print(f"{name:11} holes {c['holes']:5}  valid as recorded {c['recorded']:5}, now {c['now']:5}  "
          f"valid_cut as recorded {c['recorded_cut']:5}, now {c['now_cut']:5}  missing {c['missing']}")


if __name__ == "__main__":
    main()
