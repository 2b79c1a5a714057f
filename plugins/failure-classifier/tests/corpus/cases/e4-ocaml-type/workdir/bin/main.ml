let total = 1 + "2"
let () = print_int total
