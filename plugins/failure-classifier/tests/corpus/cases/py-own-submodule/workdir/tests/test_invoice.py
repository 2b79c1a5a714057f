from billing.invoice import gross


def test_gross():
    assert gross(100) == 120
