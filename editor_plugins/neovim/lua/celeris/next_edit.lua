-- Next edits (celeris/nextEdit): after the user changes the buffer, the server proposes the next change
-- (the same rename or edit where it applies next). Shown where it applies: the text it replaces struck
-- through, the new text beside it; one key jumps there, one accepts it (and asks for the one after).
local M = {}

local ns = vim.api.nvim_create_namespace("celeris.next_edit")
local shown = {} -- bufnr -> { edits = LSP TextEdit[], version = int, encoding = string }
local timers = {}

local function client_for(bufnr)
  return vim.lsp.get_clients({ bufnr = bufnr, name = "celeris" })[1]
end

function M.clear(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  shown[bufnr] = nil
  if vim.api.nvim_buf_is_valid(bufnr) then
    vim.api.nvim_buf_clear_namespace(bufnr, ns, 0, -1)
  end
end

--- The suggestion shown in the buffer (its LSP edits), or nil.
function M.current(bufnr)
  return shown[bufnr or vim.api.nvim_get_current_buf()]
end

local function byte_col(bufnr, pos, encoding)
  local line = vim.api.nvim_buf_get_lines(bufnr, pos.line, pos.line + 1, false)[1] or ""
  local ok, col = pcall(vim.str_byteindex, line, encoding, pos.character, false)
  return ok and col or #line
end

local function show(bufnr, result, encoding)
  M.clear(bufnr)
  for _, edit in ipairs(result.edits) do
    local s, e = edit.range.start, edit.range["end"]
    local scol, ecol = byte_col(bufnr, s, encoding), byte_col(bufnr, e, encoding)
    local new = edit.newText:gsub("\n", "⏎")
    vim.api.nvim_buf_set_extmark(bufnr, ns, s.line, scol, {
      end_row = e.line,
      end_col = ecol,
      hl_group = "DiffDelete",
      virt_text = { { new, "DiffAdd" } },
      virt_text_pos = "inline",
      hl_mode = "combine",
    })
    -- The same new text at the line's end, so it shows whatever the line's width.
    vim.api.nvim_buf_set_extmark(bufnr, ns, s.line, 0, {
      virt_text = { { "  next edit: " .. new, "Comment" } },
      virt_text_pos = "eol",
    })
  end
  shown[bufnr] = { edits = result.edits, version = result.version, encoding = encoding }
end

function M.request(bufnr)
  local client = client_for(bufnr)
  if not client or not vim.api.nvim_buf_is_valid(bufnr) then
    return
  end
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  local version = vim.lsp.util.buf_versions[bufnr]
  client:request("celeris/nextEdit", params, function(err, result)
    if err or not result or not result.edits or #result.edits == 0 then
      return
    end
    -- Only for the buffer as it is now: a result for an older version is stale.
    if vim.lsp.util.buf_versions[bufnr] ~= version or result.version ~= version then
      return
    end
    show(bufnr, result, client.offset_encoding)
  end, bufnr)
end

function M.schedule(bufnr, delay_ms)
  M.clear(bufnr)
  if timers[bufnr] then
    timers[bufnr]:stop()
  end
  timers[bufnr] = vim.defer_fn(function()
    timers[bufnr] = nil
    if vim.api.nvim_buf_is_valid(bufnr) and vim.api.nvim_get_current_buf() == bufnr then
      M.request(bufnr)
    end
  end, delay_ms)
end

--- Move the cursor to the suggested edit. Returns true when one is shown.
function M.jump()
  local bufnr = vim.api.nvim_get_current_buf()
  local s = shown[bufnr]
  if not s then
    return false
  end
  local start = s.edits[1].range.start
  vim.schedule(function() -- (keys call this from an expression mapping, where the cursor cannot move)
    vim.api.nvim_win_set_cursor(0, { start.line + 1, byte_col(bufnr, start, s.encoding) })
  end)
  return true
end

--- Apply the suggested edit (then the server is asked for the next one). Returns true when one is shown.
function M.accept()
  local bufnr = vim.api.nvim_get_current_buf()
  local s = shown[bufnr]
  if not s or vim.lsp.util.buf_versions[bufnr] ~= s.version then
    M.clear(bufnr)
    return false
  end
  M.clear(bufnr)
  vim.schedule(function() -- (not from the expression mapping the key runs in: text is locked there)
    if vim.lsp.util.buf_versions[bufnr] == s.version then
      vim.lsp.util.apply_text_edits(s.edits, bufnr, s.encoding)
    end
  end)
  return true
end

function M.attach(bufnr, delay_ms)
  local group = vim.api.nvim_create_augroup("celeris.next_edit." .. bufnr, { clear = true })
  vim.api.nvim_create_autocmd({ "TextChanged", "TextChangedI" }, {
    group = group,
    buffer = bufnr,
    callback = function()
      M.schedule(bufnr, delay_ms)
    end,
  })
  vim.api.nvim_create_autocmd({ "BufLeave", "BufUnload" }, {
    group = group,
    buffer = bufnr,
    callback = function()
      M.clear(bufnr)
    end,
  })
end

return M
