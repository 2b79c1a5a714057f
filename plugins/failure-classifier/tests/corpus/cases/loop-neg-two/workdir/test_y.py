def test_y():
    assert 'a' * 2 == 'aaa'
