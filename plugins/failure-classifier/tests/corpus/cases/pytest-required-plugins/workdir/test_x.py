def test_x():
    assert True
