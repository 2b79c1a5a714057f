from calc import sign

def test_sign():
    assert sign(-2) == -1
