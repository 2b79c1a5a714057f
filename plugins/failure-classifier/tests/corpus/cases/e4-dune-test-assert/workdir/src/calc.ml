let double x = x + x + 1
