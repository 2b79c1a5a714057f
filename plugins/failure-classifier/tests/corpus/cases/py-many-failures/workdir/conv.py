def c2f(c):
    return c * 9 / 5
