def depth(n):
    return 1 + depth(n)
