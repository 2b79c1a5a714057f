let () = assert (Calc.double 2 = 4)
