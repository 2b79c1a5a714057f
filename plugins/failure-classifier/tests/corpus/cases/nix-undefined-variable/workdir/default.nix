let add = a: b: a + b; in assert sum 2 3 == 5; true
