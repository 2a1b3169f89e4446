"""Streaming drafts (issue 27) in a real VS Code: code-server with our .vsix, driven in headless
Chromium (vscode-extension/e2e/drafts.js, started by codeserver.py, as tests/vscode/test_vscode_e2e.py
does), against our real server with a stand-in engine whose fill takes a while and drafts a quarter
more of it at each of its four steps (tests/lsp/stub_server.py), with infill.drafts = 1:

- the ghost text grows through the drafts (each the start of the fill, each longer) before the
  final fill replaces the last one;
- Escape while a draft shows stops that fill: nothing more of it is shown.

Needs what test_vscode_e2e.py needs (vscode-extension/e2e/setup.sh, chromium, npm); marked slow.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "vscode-extension" / "e2e"))
import codeserver  # noqa: E402
from test_vscode_e2e import ARTIFACTS, _vsix  # noqa: E402

FILL = "return sku, sku, 0.0,"
SOURCE = "def total(sku):\n    \n\n\ndef other(sku):\n    \n"
DELAY_MS = 2400  # the stand-in's fill: a draft every 480 ms
STEPS = 4  # its drafts; the last holds the whole fill


@pytest.mark.slow
@pytest.mark.skipif(codeserver.missing_tools() is not None, reason=str(codeserver.missing_tools()))
def test_vscode_shows_drafts_then_the_fill(tmp_path):
    vsix = _vsix(tmp_path)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "drafts.py").write_text(SOURCE)
    server = tmp_path / "stub-infill"  # `infill lsp ...` with the stand-in engine
    server.write_text(f"#!/bin/sh\nINFILL_STUB_FILL='{FILL}' INFILL_STUB_DELAY_MS={DELAY_MS} INFILL_STUB_STEPS={STEPS} "
                      f"exec {sys.executable} {REPO / 'tests' / 'lsp' / 'stub_server.py'}\n")
    server.chmod(0o755)
    settings = {"infill.drafts": 1, "infill.debounceMs": 0, "infill.trace.server": "verbose"}
    machine = {"infill.serverPath": str(server), "infill.feedbackFile": str(tmp_path / "feedback.json")}
    env = {"E2E_MODEL_LABEL": "stub-model · cpu", "DRAFTS_FILE": "drafts.py", "DRAFTS_LINE": "2", "DRAFTS_TYPED": "r",
           "ESCAPE_LINE": "6", "ESCAPE_TYPED": "r", "ESCAPE_WATCH_MS": str(DELAY_MS + 1000)}
    artifacts = ARTIFACTS.parent / "vscode-drafts"
    run, results = codeserver.drive("drafts.js", tmp_path, ws, vsix, artifacts, settings=settings, machine=machine, env=env)
    assert run.returncode == 0 and not results["errors"], run.stdout + run.stderr

    rest = FILL[1:]  # after the typed "r" (the stand-in fills the rest of its line)
    seen = results["seen"]  # (a new draft blinks: VS Code hides the ghost text to ask again)
    texts = [s["text"] for s in seen if s["text"]]
    shown = [t for i, t in enumerate(texts) if i == 0 or t != texts[i - 1]]
    (artifacts / "summary.json").write_text(json.dumps({"seen": seen, "afterEscape": results["afterEscape"]}, indent=2))
    assert shown and shown[-1] == rest, seen
    assert len(shown) >= 3, f"drafts shown before the fill: {seen}"
    assert all(rest.startswith(t) for t in shown) and [len(t) for t in shown] == sorted({len(t) for t in shown}), seen
    first = next(s for s in seen if s["text"])
    assert first["ms"] < DELAY_MS / 2 and len(first["text"]) < len(rest), seen  # a draft, long before the fill
    # The whole text shows no sooner than the stand-in's last draft, which holds all of it (at
    # STEPS / (STEPS + 1) of the fill's time); the final fill then changes nothing that shows, so
    # VS Code may not show it again.
    assert seen[-1]["text"] == rest and seen[-1]["ms"] >= DELAY_MS * STEPS / (STEPS + 1) * 0.9, seen

    assert rest.startswith(results["escapeDraft"]) and results["escapeDraft"] != rest, results
    assert results["afterEscape"] == [], results["afterEscape"]
