def vat(x):
    return x * 0.2
