local fmt = require("app.formatting")
print(fmt.money(3))
