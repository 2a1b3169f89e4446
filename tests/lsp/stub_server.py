"""Our language server with a stand-in engine, for the editor tests (tests/lsp/test_neovim.py).

The real server (lsp/server.py: handlers, scheduler, options, framing) runs unchanged; only the
engine is a stub, so a test knows the fill exactly and needs no torch:

    python tests/lsp/stub_server.py

Environment: INFILL_STUB_FILL (the fill every request gets, default "return sku, sku, 0.0,"),
INFILL_STUB_DELAY_MS (how long a fill takes, default 200: requests that come together overlap),
INFILL_STUB_LANGUAGES (JSON list, what the model was trained on; default ["python"]),
INFILL_STUB_LOAD_MS (how long the load takes, default 0), INFILL_STUB_LOG (append one line per
fill_batch call: the file names of its requests;
the server's warm-up fill is warm-up.py), INFILL_STUB_STEPS (a fill's "denoising steps", default 4:
where the server asks for drafts, step k of them, evenly spread over the delay, drafts the first
k/STEPS of the fill).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from infill.protocol import Draft, Fill, FillResult, Timings  # noqa: E402


class StubModel:
    def __init__(self, languages):
        self.languages = tuple(languages) if languages else None


class StubEngine:
    model_id = "stub-model"
    device = "cpu"

    def __init__(self):
        self.fill = os.environ.get("INFILL_STUB_FILL", "return sku, sku, 0.0,")
        self.delay = float(os.environ.get("INFILL_STUB_DELAY_MS", "200")) / 1000
        self.model = StubModel(json.loads(os.environ.get("INFILL_STUB_LANGUAGES", '["python"]')))
        self.log = os.environ.get("INFILL_STUB_LOG")
        self.steps = int(os.environ.get("INFILL_STUB_STEPS", "4"))

    def fill_batch(self, requests, cancel=None, on_draft=None, drafts=1):
        if self.log:
            with open(self.log, "a") as f:
                f.write(" ".join(Path(r.path or "").name for r in requests) + "\n")
        start = time.monotonic()
        fills = [[self.rest(r.text, h.start) for h in r.holes] for r in requests]
        step = 0
        while time.monotonic() < start + self.delay:
            if cancel is not None and cancel.is_set():
                from infill.errors import Cancelled

                raise Cancelled("stub: cancelled")
            if on_draft is not None and time.monotonic() >= start + self.delay * (step + 1) / (self.steps + 1):
                step += 1
                if step % drafts == 0:
                    on_draft(Draft(step=step, texts=[f[: -(-len(f) * step // self.steps)] for f in fills[0]],
                                   masked=self.steps - step))
            time.sleep(0.005)
        return [FillResult(fills=[Fill(text=f, score=0.0, valid=True) for f in texts], timings=Timings(), model=self.model_id)
                for texts in fills]

    def rest(self, text: str, at: int) -> str:
        """The fill, less what its line already holds of it (a partly accepted suggestion)."""
        typed = text[text.rfind("\n", 0, at) + 1:at].lstrip()
        return self.fill[len(typed):] if typed and self.fill.startswith(typed) else self.fill


def load(key):
    time.sleep(float(os.environ.get("INFILL_STUB_LOAD_MS", "0")) / 1000)
    return StubEngine()


def model_dir_saying(languages: list[str]) -> Path:
    """A model directory whose config.json says ``languages`` (what initialize advertises before the load)."""
    directory = Path(tempfile.mkdtemp(prefix="infill-stub-model-"))
    (directory / "config.json").write_text(json.dumps({"architecture": "stub", "languages": languages}))
    return directory


if __name__ == "__main__":
    import infill.lsp.server as server
    from infill.lsp.transport import serve_stdio

    stub_dir = model_dir_saying(json.loads(os.environ.get("INFILL_STUB_LANGUAGES", '["python"]')))
    server.bundled_model_dir = lambda: stub_dir  # the stub engine's languages, advertised as a model's would be
    serve_stdio(server.create_server(loader=load))
