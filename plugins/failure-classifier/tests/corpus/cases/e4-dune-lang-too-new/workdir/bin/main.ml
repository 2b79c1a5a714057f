let () = print_endline "hi"
