-- :checkhealth celeris
local M = {}

function M.check()
  local health = vim.health
  local celeris = require("celeris")
  health.start("celeris-complete")
  local cmd = celeris.config.cmd
  if vim.fn.executable(cmd[1]) == 1 then
    health.ok("server command found: " .. vim.fn.exepath(cmd[1]))
  else
    health.error("server command not found: " .. cmd[1], { "Install celeris-complete, or set cmd in setup{}" })
    return
  end
  if vim.lsp.inline_completion then
    health.ok("Neovim has native inline completion (vim.lsp.inline_completion)")
  else
    health.info("Neovim < 0.12: ghost text is drawn by the plugin")
  end
  local args = vim.deepcopy(cmd)
  if args[#args] == "lsp" then
    table.remove(args)
  end
  vim.list_extend(args, { "selftest", "--json", "--requests", "6" })
  local settings = celeris.config.settings
  if settings.model then
    vim.list_extend(args, { "--model", settings.model })
  end
  local env = nil
  if settings.endpoint and settings.endpoint ~= "" then -- a remote server: measured through it
    vim.list_extend(args, { "--endpoint", settings.endpoint, "--api", settings.api or "fim" })
    if settings.api_key_env then
      env = { CELERIS_API_KEY_ENV = settings.api_key_env }
    end
  end
  local out = vim.system(args, { text = true, env = env }):wait(180000)
  local ok, result = pcall(vim.json.decode, out.stdout or "")
  if not ok or type(result) ~= "table" then
    health.error("the model did not load: " .. vim.trim(out.stderr or ""))
    return
  end
  health.ok("model loads: " .. result.engine.model)
  local k = result.keystroke_ms
  local msg = string.format("keystroke latency p50 %.1f ms, p95 %.1f ms (budget %d ms)", k.p50, k.p95, result.budget_ms)
  if result.verdict == "pass" then
    health.ok(msg)
  else
    health.warn(msg, result.advice)
  end
end

return M
