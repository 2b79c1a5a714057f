def test_a():
    pass
