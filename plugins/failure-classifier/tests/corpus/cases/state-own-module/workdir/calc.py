from mathlib.ops import plus

def add(a, b):
    return plus(a, b)
