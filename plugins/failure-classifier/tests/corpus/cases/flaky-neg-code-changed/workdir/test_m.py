from m import f

def test_f():
    assert f() == 1
