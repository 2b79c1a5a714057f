derivation { name = "calc"; system = builtins.currentSystem; builder = "/bin/sh"; args = ["-c" "echo 5 > $out"]; }
