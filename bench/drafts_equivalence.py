"""Do speculative steps change fills? Fill the same cursor holes with ``--lookahead 0`` (one slot
per step) and ``--lookahead 4`` (drafted steps) and count the fills that differ.

A drafted step commits a slot only where one step per slot would have (the sampler's invariant),
so a difference comes from arithmetic (a step of several slots runs its attention and rounds its
products otherwise than a step of one, which flips near ties of bf16 logits) or from a step
budget that ends the one-slot fill first. The holes: ``N`` per language, each at a random column of a random line of
``bench/sources`` (``bench/fetch_validity_sources.sh``), the rest of that line removed.

    .venv/bin/python bench/drafts_equivalence.py SEED N OUT.json
"""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

import torch

from infill.engine.fill import Engine, EngineConfig
from infill.protocol import FillRequest, Hole, SamplingOptions

LANGUAGES = {"python": "py", "javascript": "js", "go": "go", "rust": "rs", "java": "java", "c": "c"}


def cases(seed: int, n: int) -> list[tuple[str, str, int]]:
    rng = random.Random(seed)
    out: list[tuple[str, str, int]] = []
    for lang, ext in LANGUAGES.items():
        files = sorted(Path("bench/sources", lang).rglob(f"*.{ext}"))
        while sum(c[0] == lang for c in out) < n:
            text = rng.choice(files).read_text(encoding="utf-8", errors="replace")[:20000]
            lines = text.split("\n")
            i = rng.randrange(len(lines))
            line = lines[i]
            if len(line.strip()) < 8:
                continue
            indent = len(line) - len(line.lstrip())
            before = "\n".join(lines[:i] + [line[: rng.randrange(indent + 1, len(line))]])
            out.append((lang, before + "\n" + "\n".join(lines[i + 1 :]), len(before)))
    return out


def main(seed: int, n: int, out: Path) -> None:
    torch.set_num_threads(2)
    engines = [Engine.load(EngineConfig(device="cpu", lookahead=k)) for k in (0, 4)]
    records = []
    for lang, text, pos in cases(seed, n):
        request = FillRequest(text=text, holes=[Hole(pos, pos, 32)], language=lang, options=SamplingOptions(candidates=1))
        got = []
        for engine in engines:
            engine.recent_fills.clear()
            result = engine.fill(request)
            got.append({"text": result.fills[0].text, "valid": result.fills[0].valid, "steps": result.timings.steps})
        records.append({"language": lang, "same": got[0]["text"] == got[1]["text"], "lookahead_0": got[0], "lookahead_4": got[1]})
    differ = [r for r in records if not r["same"]]
    summary = {"seed": seed, "holes": len(records), "differ": len(differ),
               # where each differing pair parts: characters in common from the start
               "common_prefix_chars": [len(os.path.commonprefix([r["lookahead_0"]["text"], r["lookahead_4"]["text"]])) for r in differ],
               "steps": [sum(r[k]["steps"] for r in records) for k in ("lookahead_0", "lookahead_4")]}
    out.write_text(json.dumps({"summary": summary, "records": records}, indent=1) + "\n")
    print(json.dumps(summary))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]))
