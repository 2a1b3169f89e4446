-- Helpers for the headless Neovim tests (tests/lsp/test_neovim.py): the test's script is this
-- file, then lsp/README.md's Neovim config, then the scenario, all sourced with -S.
-- Keys fed with nvim_feedkeys run after the script returns, so checks poll in timers.
T = {}
T.out = assert(os.getenv('INFILL_NVIM_OUT'))
T.messages = {} -- window/showMessage texts from the server

function T.finish(result)
  result.buffer = vim.api.nvim_buf_get_lines(0, 0, -1, false)
  result.messages = T.messages
  local f = assert(io.open(T.out, 'w'))
  f:write(vim.json.encode(result))
  f:close()
  vim.cmd('qa!')
end

function T.keys(s)
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(s, true, false, true), 't', false)
end

-- Call done() once cond() is true (checked every 20 ms), or finish with `what` after timeout_ms.
function T.wait(cond, timeout_ms, what, done)
  local deadline = vim.uv.now() + timeout_ms
  local function poll()
    local ok, value = pcall(cond)
    if ok and value then return done(value) end
    if vim.uv.now() > deadline then return T.finish({ status = 'TIMEOUT: ' .. what }) end
    vim.defer_fn(poll, 20)
  end
  poll()
end

-- The ghost text Neovim 0.12's vim.lsp.inline_completion shows in this buffer (its lines joined
-- with \n), or nil.
function T.ghost()
  return T.virtual_text('nvim.lsp.inline_completion')
end

-- The draft lsp/README.md's drafts handler shows in this buffer, or nil.
function T.draft()
  return T.virtual_text('infill.draft')
end

-- The virtual text of the first extmark of the namespace named `name` in this buffer (its lines
-- joined with \n), or nil.
function T.virtual_text(name)
  local ns = vim.api.nvim_get_namespaces()[name]
  local mark = ns and vim.api.nvim_buf_get_extmarks(0, ns, 0, -1, { details = true })[1]
  if not mark then return nil end
  local lines = { mark[4].virt_text or {} }
  vim.list_extend(lines, mark[4].virt_lines or {})
  return table.concat(vim.tbl_map(function(chunks)
    return table.concat(vim.tbl_map(function(chunk) return chunk[1] end, chunks))
  end, lines), '\n')
end

function T.client()
  return vim.lsp.get_clients({ name = 'infill' })[1]
end

vim.lsp.handlers['window/showMessage'] = function(_, params)
  table.insert(T.messages, params.message)
end
-- (before run_readme's 60 s: a hung test still reports what it saw)
vim.defer_fn(function() T.finish({ status = 'TIMEOUT: the whole test' }) end, 50000)
