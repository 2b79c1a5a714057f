let add = a: b: a + b in add 2 3
