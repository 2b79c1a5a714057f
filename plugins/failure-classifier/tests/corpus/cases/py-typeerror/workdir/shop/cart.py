def total(items, tax):
    return sum(items) * (1 + tax)
