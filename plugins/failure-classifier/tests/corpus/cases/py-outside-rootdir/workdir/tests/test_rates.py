from billing.rates import vat

def test_vat():
    assert vat(10) == 2
