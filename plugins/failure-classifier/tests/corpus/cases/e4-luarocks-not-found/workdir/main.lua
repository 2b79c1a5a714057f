local inspect = require("inspect")
print(inspect({1}))
