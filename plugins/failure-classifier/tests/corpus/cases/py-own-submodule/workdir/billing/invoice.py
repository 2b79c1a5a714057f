from billing.rates import vat


def gross(n):
    return n * (1 + vat())
