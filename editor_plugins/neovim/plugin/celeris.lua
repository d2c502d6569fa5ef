if vim.g.loaded_celeris then
  return
end
vim.g.loaded_celeris = true

vim.api.nvim_create_user_command("CelerisToggle", function()
  require("celeris").toggle()
end, { desc = "Turn celeris-complete on or off" })

vim.api.nvim_create_user_command("CelerisStatus", function()
  local client = vim.lsp.get_clients({ name = "celeris" })[1]
  if not client then
    vim.notify("celeris-complete: the server is not running in this session", vim.log.levels.WARN)
    return
  end
  client:request("celeris/status", {}, function(err, result)
    vim.notify(err and vim.inspect(err) or vim.inspect(result))
  end)
end, { desc = "Show the celeris-complete server's status" })
