"""In-process (`python bench/results/v2.40/quietab.py SEED...`, from the repository root): what the
language server's quiet rule (lsp/server.py quiet_through) skips on `infill bench lsp`'s keystrokes,
and what the fill it skips would have done (run anyway, for the count). `replay` is quietab_lang.py's too."""
import json
import sys
import time
from pathlib import Path

import torch

from infill.bench import keystrokes as K
from infill.engine.fill import Engine, EngineConfig
from infill.lsp import documents
from infill.lsp.server import quiet_through
from infill.protocol import FillRequest, Hole, SamplingOptions

FLOOR = -1.690  # the default model's min_score
OPTIONS = SamplingOptions(candidates=1, retry=False, min_score=FLOOR)  # the language server's at the cursor


def replay(eng, doc, language: str, path: str, **stats) -> dict:
    """Type ``doc``'s keystrokes, fill at each (the first 3 not counted), and count what quiet_through skips."""
    stats.update(keystrokes=0, skipped=0, skipped_would_show=0, shown=0, below=0, ms_all=0.0, ms_skipped=0.0)
    quiet = None
    for k in range(len(doc.keys)):
        doc.type_next()
        under = quiet_through(quiet, doc.text, doc.cursor, FLOOR)
        p = documents.prepare(doc.text, [Hole(doc.cursor, doc.cursor, 32)])
        t = time.perf_counter()
        r = eng.fill_batch([FillRequest(text=p.text, holes=p.holes, language=language, options=OPTIONS, path=path)])[0]
        dt = (time.perf_counter() - t) * 1000
        show = r.fills[0].valid is not False and not r.below_floor and r.fills[0].score >= FLOOR and bool(r.fills[0].text.strip())
        if k >= 3:
            stats["keystrokes"] += 1; stats["ms_all"] += dt; stats["shown"] += show; stats["below"] += r.below_floor
            if under is not None:
                stats["skipped"] += 1; stats["ms_skipped"] += dt; stats["skipped_would_show"] += show
                if show:
                    print("MISS", language, k, repr(doc.text[doc.cursor - 30:doc.cursor]), repr(r.fills[0].text),
                          r.fills[0].score, under, flush=True)
        if under is None:  # the server ran this fill: its quiet state follows it
            quiet = (doc.text, doc.cursor, r.partial[0], FLOOR) if r.below_floor and r.partial else None
    print(json.dumps(stats), flush=True)
    return stats


def total(runs: list[dict]) -> None:
    print("TOTAL", json.dumps({k: sum(s[k] for s in runs) for k, v in runs[0].items() if isinstance(v, (int, float)) and k != "seed"}))


def engine_and_tokenizer():
    torch.set_num_threads(2)
    return Engine.load(EngineConfig()), K.counting_tokenizer(Path("infill/model/default_model"))


if __name__ == "__main__":
    eng, tok = engine_and_tokenizer()
    runs = []
    for seed in map(int, sys.argv[1:]):
        doc = K.make_documents(1, 0, tok, keystrokes=63, context_tokens=0, seed=seed)[0]
        runs.append(replay(eng, doc, "python", f"d{seed}.py", seed=seed))
    total(runs)
