-- celeris-complete for Neovim: starts the language server and shows its completions as ghost text.
-- Neovim 0.12+: native vim.lsp.inline_completion. Neovim 0.10/0.11: ghost text drawn here with extmarks.
local M = {}
local next_edit = require("celeris.next_edit")
M.next_edit = next_edit

M.defaults = {
  cmd = { "celeris-complete", "lsp" }, -- the server command
  filetypes = { "python", "lua", "javascript", "javascriptreact", "typescript", "typescriptreact", "go", "rust", "c",
    "cpp", "java", "sh" },
  settings = {}, -- celeris-complete settings, sent as initializationOptions (see the README)
  keymaps = {
    accept = "<Tab>", -- accept all; falls back to the key's previous mapping when nothing is shown
    accept_line = "<C-l>",
    accept_word = "<M-w>",
    next = "<M-]>",
    prev = "<M-[>",
    dismiss = "<C-]>",
    toggle = nil, -- e.g. "<leader>tc"
    jump_edit = "<M-n>", -- normal and insert mode: to the next edit the server suggests
    accept_edit = "<M-y>", -- normal and insert mode: make it (then the one after it is asked for)
  },
  debounce_ms = 60, -- Neovim 0.10/0.11 only
  next_edit = { enabled = true, delay_ms = 150 }, -- celeris/nextEdit after each change, once typing pauses
}

M.config = vim.deepcopy(M.defaults)
M.enabled = true
-- The last completion's timings (celeris/timings): latency, source, the tier that answered, confidence.
M.last = { latency_ms = nil, source = nil, tier = nil, confidence = nil }

local native = vim.lsp.inline_completion ~= nil and vim.lsp.inline_completion.get ~= nil
local ns = vim.api.nvim_create_namespace("celeris.ghost")
local ghost = {} -- Neovim < 0.12: bufnr -> { text = string, row = int, col = int }

local function client_for(bufnr)
  return vim.lsp.get_clients({ bufnr = bufnr, name = "celeris" })[1]
end

-- Insert text at the cursor (insert mode), moving the cursor to its end.
local function insert_at_cursor(text)
  local row, col = unpack(vim.api.nvim_win_get_cursor(0))
  local lines = vim.split(text, "\n", { plain = true })
  vim.api.nvim_buf_set_text(0, row - 1, col, row - 1, col, lines)
  local last_row = row - 1 + #lines - 1
  local last_col = (#lines == 1 and col or 0) + #lines[#lines]
  vim.api.nvim_win_set_cursor(0, { last_row + 1, last_col })
end

local function first_line(text)
  local nl = text:find("\n", 1, true)
  if not nl then
    return text
  end
  if nl == 1 then -- the suggestion starts a new line: accept that line break and the next line
    local rest = text:sub(2)
    local nl2 = rest:find("\n", 1, true)
    return "\n" .. (nl2 and rest:sub(1, nl2 - 1) or rest)
  end
  return text:sub(1, nl - 1)
end

local function first_word(text)
  return text:match("^%s*[%w_]+") or text:match("^%s*[^%w_%s]+") or text:match("^%s+") or text
end

-- The text an item would insert after the cursor.
local function item_text(item)
  local text = type(item.insert_text) == "string" and item.insert_text or item.insert_text.value
  return text
end

---------------------------------------------------------------------------------------------
-- Neovim < 0.12: ghost text drawn here.
local function clear_ghost(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  ghost[bufnr] = nil
  vim.api.nvim_buf_clear_namespace(bufnr, ns, 0, -1)
end

local function show_ghost(bufnr, text, row, col)
  clear_ghost(bufnr)
  if text == "" then
    return
  end
  local lines = vim.split(text, "\n", { plain = true })
  local virt_lines = {}
  for i = 2, #lines do
    table.insert(virt_lines, { { lines[i], "Comment" } })
  end
  vim.api.nvim_buf_set_extmark(bufnr, ns, row, col, {
    virt_text = { { lines[1], "Comment" } },
    virt_text_pos = "inline",
    virt_lines = virt_lines,
    hl_mode = "combine",
  })
  ghost[bufnr] = { text = text, row = row, col = col }
end

local timer = nil
local function request_ghost(bufnr)
  local client = client_for(bufnr)
  if not client or not M.enabled then
    return
  end
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  params.context = { triggerKind = 2 }
  local row, col = unpack(vim.api.nvim_win_get_cursor(0))
  client:request("textDocument/inlineCompletion", params, function(err, result)
    if err or not result or vim.api.nvim_get_mode().mode ~= "i" then
      return
    end
    local now_row, now_col = unpack(vim.api.nvim_win_get_cursor(0))
    if now_row ~= row or now_col ~= col then
      return -- the cursor moved on: a newer request is coming
    end
    local items = result.items or result
    if items[1] then
      show_ghost(bufnr, item_text(items[1]), row - 1, col)
    else
      clear_ghost(bufnr)
    end
  end, bufnr)
end

local function schedule_ghost(bufnr)
  clear_ghost(bufnr)
  if timer then
    timer:stop()
  end
  timer = vim.defer_fn(function()
    request_ghost(bufnr)
  end, M.config.debounce_ms)
end

---------------------------------------------------------------------------------------------
-- Actions, for both paths. Each returns true when it did something.

function M.visible(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  if native then
    local marks = vim.api.nvim_buf_get_extmarks(bufnr, vim.api.nvim_create_namespace("nvim.lsp.inline_completion"),
      0, -1, { limit = 1 })
    return #marks > 0
  end
  return ghost[bufnr] ~= nil
end

local function accept_with(pick)
  if native then
    return vim.lsp.inline_completion.get({
      on_accept = pick and function(item)
        insert_at_cursor(pick(item_text(item)))
      end or nil,
    })
  end
  local bufnr = vim.api.nvim_get_current_buf()
  local g = ghost[bufnr]
  if not g then
    return false
  end
  clear_ghost(bufnr)
  vim.schedule(function()
    insert_at_cursor(pick and pick(g.text) or g.text)
  end)
  return true
end

function M.accept()
  return accept_with(nil)
end

function M.accept_line()
  return accept_with(first_line)
end

function M.accept_word()
  return accept_with(first_word)
end

function M.next()
  if native then
    vim.lsp.inline_completion.select({ count = 1 })
  end
end

function M.prev()
  if native then
    vim.lsp.inline_completion.select({ count = -1 })
  end
end

function M.dismiss()
  local bufnr = vim.api.nvim_get_current_buf()
  if native then
    local had = M.visible(bufnr)
    vim.api.nvim_buf_clear_namespace(bufnr, vim.api.nvim_create_namespace("nvim.lsp.inline_completion"), 0, -1)
    return had
  end
  local had = ghost[bufnr] ~= nil
  clear_ghost(bufnr)
  return had
end

function M.toggle()
  M.enabled = not M.enabled
  if native then
    vim.lsp.inline_completion.enable(M.enabled)
  elseif not M.enabled then
    clear_ghost()
  end
  vim.notify("celeris-complete " .. (M.enabled and "on" or "off"))
end

--- A statusline component: the last completion's latency, and who answered: "tier2" when the second
--- tier (escalate_endpoint) did, else the local answer's confidence.
function M.statusline()
  if not M.last.latency_ms then
    return ""
  end
  local text = string.format("celeris %.0fms", M.last.latency_ms)
  if M.last.tier == "escalated" then
    return text .. " tier2"
  elseif type(M.last.confidence) == "number" then
    return text .. string.format(" %d%%", math.floor(M.last.confidence * 100 + 0.5))
  end
  return text
end

-- The second tier answered a keystroke the local model stayed quiet on: ask again (the server answers
-- from its cache) if the cursor is still where it was asked, in the same version of the buffer.
local function on_escalated(params)
  local bufnr = vim.api.nvim_get_current_buf()
  if vim.uri_from_bufnr(bufnr) ~= params.uri or not vim.api.nvim_get_mode().mode:match("^i") then
    return
  end
  local client = client_for(bufnr)
  if not client or vim.lsp.util.buf_versions[bufnr] ~= params.version then
    return
  end
  local here = vim.lsp.util.make_position_params(0, client.offset_encoding).position
  if here.line ~= params.position.line or here.character ~= params.position.character then
    return
  end
  if native then
    vim.api.nvim_exec_autocmds("CursorMovedI", { buffer = bufnr, modeline = false })
  else
    request_ghost(bufnr)
  end
end

---------------------------------------------------------------------------------------------
-- Keys: an expression mapping that does our action, or else whatever the key did before.
local function map(lhs, action, mode)
  if not lhs then
    return
  end
  mode = mode or "i"
  local previous = vim.fn.maparg(lhs, mode, false, true)
  vim.keymap.set(mode, lhs, function()
    if action() then
      return ""
    end
    if previous and previous.callback then
      -- e.g. Neovim's own <Tab> for snippets, which returns key notation like "<Tab>"
      local out = previous.callback()
      if previous.expr == 1 and type(out) == "string" then
        return vim.api.nvim_replace_termcodes(out, true, true, true)
      end
      return ""
    elseif previous and previous.rhs and previous.rhs ~= "" then
      local keys = vim.api.nvim_replace_termcodes(previous.rhs, true, true, true)
      vim.api.nvim_feedkeys(keys, previous.noremap == 1 and "n" or "m", false)
      return ""
    end
    return vim.api.nvim_replace_termcodes(lhs, true, true, true)
  end, { expr = true, replace_keycodes = false, desc = "celeris-complete" })
end

local function start(bufnr)
  if not M.enabled and not native then
    return
  end
  local id = vim.lsp.start({
    name = "celeris",
    cmd = M.config.cmd,
    root_dir = vim.fs.root(bufnr, { ".git", ".celeris-complete.toml" }) or vim.fn.getcwd(),
    init_options = M.config.settings,
    handlers = {
      ["celeris/timings"] = function(_, params)
        M.last = { latency_ms = params.total_ms, source = params.source, tier = params.tier,
                   confidence = params.confidence }
      end,
      ["celeris/escalated"] = function(_, params)
        vim.schedule(function()
          on_escalated(params)
        end)
      end,
    },
  }, { bufnr = bufnr })
  if not id then
    return
  end
  if M.config.next_edit.enabled then
    next_edit.attach(bufnr, M.config.next_edit.delay_ms)
  end
  if native then
    vim.lsp.inline_completion.enable(M.enabled, { bufnr = bufnr })
  else
    vim.api.nvim_create_autocmd({ "TextChangedI", "InsertEnter" }, {
      buffer = bufnr,
      callback = function()
        schedule_ghost(bufnr)
      end,
    })
    vim.api.nvim_create_autocmd({ "InsertLeave", "BufLeave" }, {
      buffer = bufnr,
      callback = function()
        clear_ghost(bufnr)
      end,
    })
  end
end

function M.setup(opts)
  M.config = vim.tbl_deep_extend("force", vim.deepcopy(M.defaults), opts or {})
  local keys = M.config.keymaps
  map(keys.accept, M.accept)
  map(keys.accept_line, M.accept_line)
  map(keys.accept_word, M.accept_word)
  map(keys.dismiss, M.dismiss)
  for _, mode in ipairs({ "n", "i" }) do
    map(keys.jump_edit, next_edit.jump, mode)
    map(keys.accept_edit, next_edit.accept, mode)
  end
  if keys.next then
    vim.keymap.set("i", keys.next, M.next, { desc = "celeris-complete: next suggestion" })
  end
  if keys.prev then
    vim.keymap.set("i", keys.prev, M.prev, { desc = "celeris-complete: previous suggestion" })
  end
  if keys.toggle then
    vim.keymap.set({ "n", "i" }, keys.toggle, M.toggle, { desc = "celeris-complete: toggle" })
  end
  local group = vim.api.nvim_create_augroup("celeris", { clear = true })
  vim.api.nvim_create_autocmd("FileType", {
    group = group,
    pattern = M.config.filetypes,
    callback = function(args)
      start(args.buf)
    end,
  })
  -- Buffers already open when setup() runs.
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(buf) and vim.tbl_contains(M.config.filetypes, vim.bo[buf].filetype) then
      start(buf)
    end
  end
end

return M
