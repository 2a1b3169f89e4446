-- Drive a real headless Neovim (0.11+): open a Python file, ask our server for a completion with
-- <C-x><C-o>, accept it with <C-y>, write the buffer to $INFILL_NVIM_OUT and quit.
-- Keys fed with nvim_feedkeys are processed after this script returns, so checks run in timers.
local out = assert(os.getenv('INFILL_NVIM_OUT'))
local file = assert(os.getenv('INFILL_NVIM_FILE'))
local line = tonumber(os.getenv('INFILL_NVIM_LINE'))

local function finish(status)
  local lines = vim.api.nvim_buf_get_lines(0, 0, -1, false)
  local f = assert(io.open(out, 'w'))
  f:write(status .. '\n' .. table.concat(lines, '\n'))
  f:close()
  vim.cmd('qa!')
end

vim.defer_fn(function() finish('TIMEOUT') end, 60000)

vim.lsp.config('infill', {
  cmd = vim.json.decode(os.getenv('INFILL_NVIM_CMD')),
  filetypes = { 'python' },
  init_options = vim.json.decode(os.getenv('INFILL_NVIM_OPTIONS')),
})
vim.lsp.enable('infill')

local function keys(s)
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(s, true, false, true), 't', false)
end

local function poll(tries)
  local info = vim.fn.complete_info({ 'pum_visible', 'items' })
  if info.items and #info.items > 0 then
    keys('<C-y><Esc>')
    vim.defer_fn(function() finish('OK') end, 300)
  elseif tries > 0 then
    if tries % 50 == 0 then keys('<C-x><C-o>') end  -- ask again (the model may still be loading)
    vim.defer_fn(function() poll(tries - 1) end, 100)
  else
    finish('NO-COMPLETION')
  end
end

vim.api.nvim_create_autocmd('LspAttach', {
  callback = function(args)
    vim.lsp.completion.enable(true, args.data.client_id, args.buf, { autotrigger = false })
    vim.defer_fn(function()
      vim.api.nvim_win_set_cursor(0, { line, 0 })
      keys('A<C-x><C-o>')
      vim.defer_fn(function() poll(500) end, 100)
    end, 100)
  end,
})

vim.cmd.edit(file)
