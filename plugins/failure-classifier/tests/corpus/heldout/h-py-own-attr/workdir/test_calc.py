import calc

def test_sum():
    assert calc.total([1, 2]) == 3
