def half(x):
    return x // 3
