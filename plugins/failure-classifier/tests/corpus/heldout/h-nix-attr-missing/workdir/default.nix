let lib = import ./lib.nix; in assert lib.sum 2 3 == 5; true
