let () = print_endline (Yojson.Safe.to_string (`Int 1))
