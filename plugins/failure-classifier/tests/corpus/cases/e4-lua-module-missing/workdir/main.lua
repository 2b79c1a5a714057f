local lpeg = require("lpeg")
print(lpeg.version)
