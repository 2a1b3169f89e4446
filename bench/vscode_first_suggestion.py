"""Time to the first suggestion after opening a file, in VS Code (issue 29): the counterpart of
bench/nvim_first_suggestion.lua.

    .venv/bin/python bench/vscode_first_suggestion.py [--runs 3] [--vsix infill.vsix] [--out DIR]

Each run starts a fresh code-server (VS Code 1.139) with the extension installed and its default
settings (but infill.device = cpu), the real server (this interpreter's `infill`) and the default
model, in headless Chromium (vscode-extension/e2e: codeserver.py runs first_suggestion.js), and
measures, in ms:
  a. from opening the window, with mean.py opened at once and "return " typed at the end of its
     line 3: the status bar showing the model (loaded), and the first ghost text;
  b. with the model loaded, stack.py opened and "self.items." typed at the end of its line 6: open
     -> first ghost text, and last key -> first ghost text;
  c. in a third file, "return total / " typed at 30 ms a key: last key -> first ghost text.
All typing is 30 ms a key. The documents are infill.bench.startup's (the language server's own
start-up benchmark). Each run's results.json goes to OUT/run-N.json, and the medians and ranges to
OUT/summary.json (default bench/results/vscode-first-suggestion); screenshots and logs to
runs/vscode-first-suggestion/run-N.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "vscode-extension" / "e2e"))
import codeserver  # noqa: E402

from infill.bench.startup import SECOND, SOURCE  # noqa: E402

# (file, text before the typing, 1-based line, what is typed at its end)
FIRST = ("mean.py", SOURCE.replace("    return \n", "    \n"), 3, "return ")
STACK = ("stack.py", SECOND.replace("        self.items.\n", "        \n"), 6, "self.items.")
THIRD = ("typing.py", SOURCE.replace("    return \n", "    \n"), 3, "return total / ")
FIGURES = {
    "a. window open -> model loaded (status bar)": "modelLoadedMs",
    "a. window open -> first ghost text": "firstGhostMs",
    "b. open another file -> first ghost text": "secondOpenToGhostMs",
    "b. last key -> first ghost text": "secondLastKeyToGhostMs",
    "c. typing at 30 ms a key: last key -> ghost text": "typingLastKeyToGhostMs",
}


def _machine() -> dict:
    import torch

    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True).stdout.strip())
    return {"cpu": cpu, "cores": os.cpu_count(), "torch": torch.__version__, "commit": commit + ("+dirty" if dirty else "")}


def one_run(vsix: Path, label: str, artifacts: Path, settings: dict) -> dict:
    with tempfile.TemporaryDirectory(prefix="infill-vscode-bench-") as tmp:
        tmp = Path(tmp)
        ws = tmp / "ws"
        ws.mkdir()
        env = {"E2E_MODEL_LABEL": label}
        for key, (name, text, line, typed) in zip(["FIRST", "SECOND", "THIRD"], [FIRST, STACK, THIRD]):
            (ws / name).write_text(text)
            env.update({f"{key}_FILE": name, f"{key}_LINE": str(line), f"{key}_TEXT": typed})
        load_before = os.getloadavg()
        run, results = codeserver.drive("first_suggestion.js", tmp, ws, vsix, artifacts,
                                        settings=settings, machine={}, env=env, timeout=600)
        results["loadavg_before"], results["loadavg_after"] = load_before, os.getloadavg()
        if run.returncode != 0 or results["errors"]:
            raise RuntimeError(f"the run failed (see {artifacts}): {results['errors']}")
        return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--vsix", type=Path, help="the packaged extension (default: package it with npm)")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "vscode-first-suggestion")
    ap.add_argument("--trace", action="store_true", help="log the LSP messages (infill.trace.server: verbose) into the run's folder")
    args = ap.parse_args()
    if (why := codeserver.missing_tools()) is not None:
        sys.exit(why)
    from infill.engine.fill import DEFAULT_MODEL_DIR

    label = json.loads((DEFAULT_MODEL_DIR / "config.json").read_text())["name"] + " · cpu"
    settings = {"infill.device": "cpu", **({"infill.trace.server": "verbose"} if args.trace else {})}
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="infill-vscode-bench-") as tmp:
        vsix = args.vsix or codeserver.package_vsix(Path(tmp) / "infill.vsix")
        runs = []
        for i in range(1, args.runs + 1):
            artifacts = REPO / "runs" / "vscode-first-suggestion" / f"run-{i}"  # screenshots and logs
            results = one_run(vsix, label, artifacts, settings)
            (args.out / f"run-{i}.json").write_text(json.dumps(results, indent=2) + "\n")
            runs.append(results)
            print(f"run {i}: " + ", ".join(f"{key} {results[key]}" for key in FIGURES.values()), flush=True)
    summary = {"machine": _machine(), "model": label, "runs": len(runs), "figures_ms": {}}
    for name, key in FIGURES.items():
        values = [r[key] for r in runs]
        summary["figures_ms"][name] = {"median": statistics.median(values), "min": min(values), "max": max(values), "runs": values}
        print(f"{name}: median {statistics.median(values):.0f} ms ({min(values)}-{max(values)})")
    summary["loadavg"] = [[r["loadavg_before"], r["loadavg_after"]] for r in runs]
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
