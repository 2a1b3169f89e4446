-- Time to the first suggestion after opening a file, in headless Neovim with lsp/README.md's
-- config and the real server (`infill` on PATH):
--   INFILL_BENCH_FILE=examples/sample.py INFILL_BENCH_LINE=17 nvim --headless --clean -S bench/nvim_first_suggestion.lua
-- A completion request goes out as soon as the client attaches (it waits for the model if it is
-- still loading); prints "first suggestion after N ms" (from :edit) and quits.
local file, line = os.getenv('INFILL_BENCH_FILE'), tonumber(os.getenv('INFILL_BENCH_LINE'))
local readme = io.open(vim.fs.joinpath(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p:h:h'), 'lsp', 'README.md')):read('a')
local section = readme:sub((readme:find('### Neovim', 1, true)))
assert(load(section:match('```lua\n(.-)\n```')))()
local t0
vim.api.nvim_create_autocmd('LspAttach', { callback = function(args)
  local client = vim.lsp.get_client_by_id(args.data.client_id)
  local attached = (vim.uv.hrtime() - t0) / 1e6
  local text = vim.api.nvim_buf_get_lines(args.buf, line - 1, line, false)[1]
  local params = { textDocument = vim.lsp.util.make_text_document_params(args.buf),
                   position = { line = line - 1, character = #text } }
  client:request('textDocument/completion', params, function(err, result)
    local ms = (vim.uv.hrtime() - t0) / 1e6
    local item = result and result.items and result.items[1]
    io.stdout:write(('attached after %.0f ms; first suggestion after %.0f ms: %s\n'):format(
      attached, ms, item and vim.inspect(item.label) or ('none ' .. vim.inspect(err))))
    vim.cmd('qa!')
  end, args.buf)
end })
vim.defer_fn(function() io.stdout:write('timeout\n'); vim.cmd('qa!') end, 60000)
t0 = vim.uv.hrtime()
vim.cmd.edit(file)
