local M = {}
function M.money(n) return string.format('%.2f', n) end
return M
