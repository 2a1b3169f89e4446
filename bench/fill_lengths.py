"""Are a quality run's fills as long as their references? Reads ``infill bench quality`` runs
(their results.jsonl) and counts, per run, the fills with fewer, as many and more lines than the
task's reference, with how many of each pass, and the fills that are one block header's line
(HumanEval is Python: one line ending with ':', what the engine's one-header shape writes where
the text after the hole is indented deeper than the hole). Reads results only; runs no model.

    .venv/bin/python bench/fill_lengths.py bench/results/v2.33/quality-multi-line-100-s1051-*
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def lines(text: str) -> int:
    """The lines a fill or reference writes (a last line without its break counts)."""
    return len(text.rstrip("\n").split("\n")) if text.strip() else 0


def summary(records: list[dict]) -> dict:
    groups: dict[str, list[dict]] = {"shorter": [], "as long": [], "longer": []}
    for r in records:
        a, b = lines(r["fill"]), lines(r["reference"])
        groups["shorter" if a < b else "as long" if a == b else "longer"].append(r)
    out = {k: {"fills": len(v), "passed": sum(bool(r["passed"]) for r in v)} for k, v in groups.items()}
    out["median lines"] = {"fill": statistics.median(lines(r["fill"]) for r in records),
                           "reference": statistics.median(lines(r["reference"]) for r in records)}
    header = [r for r in records if lines(r["fill"]) == 1 and r["fill"].rstrip().endswith(":")]
    out["one header line"] = {"fills": len(header), "passed": sum(bool(r["passed"]) for r in header),
                              "reference longer": sum(lines(r["reference"]) > 1 for r in header)}
    out["passed"] = sum(bool(r["passed"]) for r in records)
    out["tasks"] = len(records)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="quality run directories (results.jsonl)")
    args = parser.parse_args()
    for run in args.runs:
        records = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines() if line.strip()]
        print(run.name, json.dumps(summary(records)))


if __name__ == "__main__":
    main()
