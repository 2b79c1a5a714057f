from calc import half

def test_half():
    assert half(8) == 4
