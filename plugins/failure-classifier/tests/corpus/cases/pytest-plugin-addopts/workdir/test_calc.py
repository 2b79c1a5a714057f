from calc import one

def test_one():
    assert one() == 1
