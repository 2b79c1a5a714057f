from calc import clamp

def test_clamp():
    assert clamp(9, 0, 5) == 5
