"""The VS Code extension end to end, in a real VS Code: code-server 4.139 (VS Code 1.139) with our
.vsix installed, driven in headless Chromium by playwright-core (vscode-extension/e2e/driver.js,
started by vscode-extension/e2e/codeserver.py).

What it checks, against our real server (`infill lsp`, found by the extension through
python.defaultInterpreterPath = this interpreter) running the default model when it is there
(else the tiny random test model, or INFILL_E2E_MODEL):
- the status bar shows the model and device once the model is loaded;
- typing in a Python file shows ghost text; Tab accepts it; the saved file is the document with
  exactly the server's fill inserted at the cursor (recomputed here with the same engine);
- partial accept (issue 29): VS Code's Accept Next Word (Ctrl+Right) inserts the ghost text's
  first word and leaves the rest shown, then Accept Next Line inserts the rest of its line;
- no glue after an accept (issue 29): after a Tab accept that ends inside a word, where the
  server's next suggestion does go on with that word (checked in the LSP trace), no ghost text is
  shown there and the log says it was dropped;
- typing a line at 30 ms a key, the ghost text shown after the last key is the server's fill for
  the whole line (results.json records the ms from the last key to it: a figure, not a check);
- "Infill: Fill Holes" on a file with two <FILL> holes replaces both in one edit, with the fills
  the engine gives for that document;
- infill.serverPath pointing at a missing file gives an error notification with Show Logs (which
  opens the log); a crashing server gives "Restarting in N s", then the status bar's error state.

Needs: `vscode-extension/e2e/setup.sh` (Node 24, code-server, playwright-core in
$INFILL_VSCODE_E2E_HOME, default ~/.cache/infill-vscode-e2e), the Debian `chromium` package, and
npm (to package the .vsix; or give one in INFILL_VSIX). Screenshots and logs go to
$INFILL_E2E_ARTIFACTS (default runs/vscode-e2e/). Takes about 2-3 minutes, so it is marked slow:
`pytest -m slow tests/vscode`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "vscode-extension" / "e2e"))
import codeserver  # noqa: E402

ARTIFACTS = Path(os.environ.get("INFILL_E2E_ARTIFACTS", REPO / "runs" / "vscode-e2e"))

# The document to complete in: line COMPLETE_LINE (1-based) ends where we type COMPLETE_TYPED.
COMPLETE_FILE = "complete.py"
COMPLETE_SOURCE = (
    "import os\n"
    "\n"
    "\n"
    "def read_lines(path):\n"
    "    \"\"\"The lines of a text file, without their line endings.\"\"\"\n"
    "    with open(path) as f:\n"
    "        \n"
    "\n"
    "\n"
    "def main():\n"
    "    print(read_lines(os.environ['FILE']))\n"
)
COMPLETE_LINE = 7
COMPLETE_TYPED = "lines = f.read()."

HOLES_FILE = "holes.py"
HOLES_SOURCE = (
    "def clamp(x, lo, hi):\n"
    "    \"\"\"x limited to the range [lo, hi].\"\"\"\n"
    "    if x < lo:\n"
    "        return <FILL>\n"
    "    if x > hi:\n"
    "        return <FILL>\n"
    "    return x\n"
)

# Partial accept: ghost text asked for at the end of PARTIAL_LINE (an indented blank line).
PARTIAL_FILE = "partial.py"
PARTIAL_SOURCE = (
    "class Stack:\n"
    "    def __init__(self):\n"
    "        self.items = []\n"
    "\n"
    "    def push(self, item):\n"
    "        \n"
    "\n"
    "    def pop(self):\n"
    "        return self.items.pop()\n"
)
PARTIAL_LINE = 6

# No glue after an accept: the fill at the end of GLUE_LINE stops inside the long name (the window
# of maxTokens ends there), and the model's next suggestion goes on with that name.
GLUE_FILE = "glue.py"
GLUE_SOURCE = (
    "def total_price_of_every_single_item_in_the_shopping_basket_including_all_taxes_and_fees(basket):\n"
    "    return sum(item.price * 1.2 for item in basket)\n"
    "\n"
    "\n"
    "def checkout(basket):\n"
    "    pay = total_price_of_every_single_item_in_the_shopping_basket_including_all_taxes_and_fees\n"
    "    print(pay(basket))\n"
    "\n"
    "\n"
    "def receipt(basket):\n"
    "    pay = total_\n"
)
GLUE_LINE = 11

# Typing fast: TYPING_TEXT typed at 30 ms a key at the end of TYPING_LINE.
TYPING_FILE = "typing.py"
TYPING_SOURCE = COMPLETE_SOURCE
TYPING_LINE = 7
TYPING_TEXT = "data = f.read().split"

# Small, fast fills: the test is about the editor, not the model.
OPTIONS = {"maxTokens": 16, "steps": 8, "debounceMs": 0, "device": "cpu"}


def _model_dir(request) -> Path:
    if os.environ.get("INFILL_E2E_MODEL"):
        return Path(os.environ["INFILL_E2E_MODEL"])
    from infill.engine.fill import DEFAULT_MODEL_DIR

    if (DEFAULT_MODEL_DIR / "config.json").is_file():
        return DEFAULT_MODEL_DIR
    return request.getfixturevalue("tiny_model_dir")


def _expected_completion(engine, model_dir: Path, file: Path, text: str, offset: int) -> str | None:
    """The ghost text the server offers at `offset` in `file`, or None where it offers none
    (infill.lsp.server.InfillServer.fill_at_cursor with the test's OPTIONS and the defaults)."""
    from infill.protocol import FillRequest, Hole, SamplingOptions
    from infill.lsp import documents
    from infill.lsp.options import Options
    from infill.lsp.server import trim_trailing_blank_line
    from infill.model.declared import declared_min_score

    defaults = Options()
    prepared = documents.prepare(text, [Hole(offset, offset, OPTIONS["maxTokens"])])
    request = FillRequest(text=prepared.text, holes=prepared.holes, language="python",
                          options=SamplingOptions(steps=OPTIONS["steps"], constrained=defaults.constrained,
                                                  retry=defaults.retry, candidates=defaults.cursor_candidates),
                          path=file.as_uri())
    got = engine.fill(request).fills[0]
    floor = declared_min_score(model_dir)
    if got.valid is False or (floor is not None and got.score < floor):
        return None
    line_end = text.find("\n", offset)
    fill = trim_trailing_blank_line(prepared.fill_text(got.text), text[offset:] if line_end < 0 else text[offset:line_end])
    return fill if fill.strip() else None


def _expected_holes(engine, file: Path, text: str) -> str:
    """`file`'s text after infill.fillHoles (infill.lsp.server.fill_holes)."""
    from infill.protocol import FillRequest, SamplingOptions
    from infill.lsp import documents
    from infill.lsp.options import Options

    clean, holes, sites = documents.fill_sites(text, 0, len(text), OPTIONS["maxTokens"])
    prepared = documents.prepare(clean, holes)
    request = FillRequest(text=prepared.text, holes=prepared.holes, language="python",
                          options=SamplingOptions(steps=OPTIONS["steps"], constrained=Options().constrained, retry=Options().retry),
                          path=file.as_uri())
    fills = [prepared.fill_text(f.text) for f in engine.fill(request).fills]
    out, last = [], 0
    for site, fill in zip(sites, fills):
        out += [text[last:site.start], fill]
        last = site.end
    return "".join(out) + text[last:]


def _next_word(ghost: str) -> str:
    """What VS Code 1.139's Accept Next Word takes of `ghost` (InlineCompletionsModel.acceptNextWord
    with the default word definition, which Python's language configuration keeps): the word it
    starts with, else what comes before its first word; but no further than the end of its first
    run of blanks."""
    m = re.search(r"(-?\d*\.\d\w*)|([^`~!@#$%^&*()\-=+\[{\]}\\|;:'\",.<>/?\s]+)", ghost)
    end = len(ghost) if m is None else m.end() if m.start() == 0 else m.start()
    blank = re.search(r"\s+", ghost)
    return ghost[:min(end, blank.end())] if blank else ghost[:end]


def _at_line_end(source: str, line: int, typed: str = "") -> tuple[str, int]:
    """`source` with `typed` at the end of its 1-based `line`, and the offset after it."""
    lines = source.splitlines(keepends=True)
    end = sum(len(x) for x in lines[:line - 1]) + len(lines[line - 1].rstrip("\n"))
    return source[:end] + typed + source[end:], end + len(typed)


def _vsix(tmp_path: Path) -> Path:
    if os.environ.get("INFILL_VSIX"):
        return Path(os.environ["INFILL_VSIX"])
    if not shutil.which("npm"):
        pytest.skip("npm not installed (needed to package the extension; or set INFILL_VSIX)")
    return codeserver.package_vsix(tmp_path / "infill.vsix")


@pytest.mark.slow
@pytest.mark.skipif(codeserver.missing_tools() is not None, reason=str(codeserver.missing_tools()))
def test_vscode_extension_end_to_end(tmp_path, request):
    from infill.engine.fill import DEFAULT_MODEL_DIR, Engine, EngineConfig

    started = time.monotonic()
    model_dir = _model_dir(request)
    engine = Engine.load(EngineConfig(model_dir=model_dir, device="cpu"))
    vsix = _vsix(tmp_path)

    ws = tmp_path / "ws"
    ws.mkdir()
    for name, source in [(COMPLETE_FILE, COMPLETE_SOURCE), (HOLES_FILE, HOLES_SOURCE), (PARTIAL_FILE, PARTIAL_SOURCE),
                         (GLUE_FILE, GLUE_SOURCE), (TYPING_FILE, TYPING_SOURCE)]:
        (ws / name).write_text(source)
    crasher = tmp_path / "crashing-infill"
    crasher.write_text("#!/bin/sh\necho 'crashing-infill: simulated crash' >&2\nexit 3\n")
    crasher.chmod(0o755)

    settings = {**{f"infill.{k}": v for k, v in OPTIONS.items()}, "infill.trace.server": "verbose"}
    # Path settings are machine-overridable: in code-server (a remote window) they are read from the
    # machine's settings (the Settings editor's "Remote" tab), not from the browser user's.
    machine = {"infill.feedbackFile": str(tmp_path / "feedback.json")}
    if model_dir != DEFAULT_MODEL_DIR:
        machine["infill.modelPath"] = str(model_dir)
    driver_env = {"E2E_CRASHER": str(crasher), "E2E_MODEL_LABEL": f"{engine.model_id} · cpu",
                  "COMPLETE_FILE": COMPLETE_FILE, "COMPLETE_LINE": str(COMPLETE_LINE), "COMPLETE_TYPED": COMPLETE_TYPED,
                  "PARTIAL_FILE": PARTIAL_FILE, "PARTIAL_LINE": str(PARTIAL_LINE),
                  "GLUE_FILE": GLUE_FILE, "GLUE_LINE": str(GLUE_LINE),
                  "TYPING_FILE": TYPING_FILE, "TYPING_LINE": str(TYPING_LINE), "TYPING_TEXT": TYPING_TEXT,
                  "HOLES_FILE": HOLES_FILE}
    run, results = codeserver.drive("driver.js", tmp_path, ws, vsix, ARTIFACTS, settings=settings, machine=machine, env=driver_env)
    results["total_seconds"] = round(time.monotonic() - started, 1)
    (ARTIFACTS / "results.json").write_text(json.dumps(results, indent=2))
    assert run.returncode == 0 and not results["errors"], run.stdout + run.stderr

    # ghost text, accepted with Tab: exactly the server's fill at the cursor
    typed_text, cursor = _at_line_end(COMPLETE_SOURCE, COMPLETE_LINE, COMPLETE_TYPED)
    fill = _expected_completion(engine, model_dir, ws / COMPLETE_FILE, typed_text, cursor)
    assert fill, "the server offers nothing here: pick another COMPLETE_TYPED"
    saved = (ws / COMPLETE_FILE).read_text()
    expected = typed_text[:cursor] + fill + typed_text[cursor:]
    (ARTIFACTS / "complete.saved.py").write_text(saved)
    (ARTIFACTS / "complete.expected.py").write_text(expected)
    assert saved == expected, f"saved {saved!r}\nexpected {expected!r}\nghost {results['ghost']!r}"
    first_line = fill.strip().splitlines()[0]
    assert first_line.strip() in results["ghost"]["text"], (first_line, results["ghost"])

    # partial accept: the next word, the rest still shown; then the rest of the line
    partial = results["partial"]
    text, cursor = _at_line_end(PARTIAL_SOURCE, PARTIAL_LINE)
    ghost = _expected_completion(engine, model_dir, ws / PARTIAL_FILE, text, cursor)
    assert partial["ghost"] == ghost, partial
    word, line = _next_word(ghost), ghost.split("\n")[0]
    assert 0 < len(word) < len(line), f"the ghost text {ghost!r} has one word on its first line: nothing to accept in parts"
    assert partial["afterWord"] == partial["before"] + word, partial
    assert partial["ghostAfterWord"] == ghost[len(word):], partial
    assert partial["afterLine"] == partial["before"] + line, partial
    assert (ws / PARTIAL_FILE).read_text() == text[:cursor] + line + text[cursor:]

    # no glue: a Tab accept that ends inside a word, where the server goes on with that word; no
    # such ghost text is shown, and the log says it was dropped
    glue = results["glue"]
    text, cursor = _at_line_end(GLUE_SOURCE, GLUE_LINE)
    accepted = _expected_completion(engine, model_dir, ws / GLUE_FILE, text, cursor)
    assert accepted and glue["ghost"] == accepted and re.match(r"\w", accepted[-1]), (accepted, glue)
    assert (ws / GLUE_FILE).read_text() == text[:cursor] + accepted + text[cursor:]
    offered = [t for answer in glue["answers"] for t in answer["items"]]
    assert any(re.match(r"\w", t) for t in offered), f"the server offered no ghost text that glues on after the accept: {glue}"
    assert not glue["ghostsAfter"], f"ghost text shown right after accepting {accepted!r}: {glue['ghostsAfter']}"
    log = "".join(p.read_text() for p in ARTIFACTS.glob("output-*Infill.log"))
    assert "dropped ghost text that would glue onto the word just accepted" in log

    # typing fast: once the typing stops, the ghost text shown is the server's fill for the whole line
    typing = results["typing"]
    text, cursor = _at_line_end(TYPING_SOURCE, TYPING_LINE)
    line_start = text.rindex("\n", 0, cursor) + 1
    line_end = text.index("\n", cursor)
    text = text[:line_start] + typing["line"] + text[line_end:]  # as typed: VS Code closes brackets
    cursor = line_start + typing["column"] - 1
    assert text[line_start:cursor].strip() == TYPING_TEXT, typing
    fill = _expected_completion(engine, model_dir, ws / TYPING_FILE, text, cursor)
    shown = [s["text"] for s in typing["seen"] if s["text"]]
    assert shown, f"no ghost text after typing {TYPING_TEXT!r}: {typing}"
    assert shown[0] == fill and shown[-1] == fill, f"ghost text after typing: {shown}, the fill for the line: {fill!r}"

    # Fill Holes: both holes, one edit, the engine's fills
    filled = (ws / HOLES_FILE).read_text()
    expected = _expected_holes(engine, ws / HOLES_FILE, HOLES_SOURCE)
    (ARTIFACTS / "holes.saved.py").write_text(filled)
    (ARTIFACTS / "holes.expected.py").write_text(expected)
    assert "<FILL" not in filled
    assert filled == expected, f"saved {filled!r}\nexpected {expected!r}"

    # status bar: model and device, then a latency
    assert f"{engine.model_id} · cpu" in results["statusReady"]
    assert any(f"{engine.model_id} · cpu · " in t for t in results["statusAfterCompletion"]), results["statusAfterCompletion"]

    # bad input: a clear message with Show Logs, restarts with backoff, then an error state
    assert "/nonexistent/bin/infill" in results["missingToast"] and "Show Logs" in results["missingToast"]
    assert not str(results["statusMissing"]).startswith("not reached"), results["statusMissing"]
    assert results["logsShown"]
    crash = results["crashToast"]
    assert "Restarting in 1 s" in crash and "exit code 3" in crash and "simulated crash" in crash and "Show Logs" in crash, crash
    assert not str(results["crashStatus"]).startswith("not reached"), results["crashStatus"]
