let add = a: b: a - b; in assert add 2 3 == 5; true
