def clamp(x, lo, hi):
    return max(lo, x)
