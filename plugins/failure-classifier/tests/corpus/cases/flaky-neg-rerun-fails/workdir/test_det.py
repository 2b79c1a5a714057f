def test_det():
    assert sorted([3, 1, 2]) == [3, 2, 1]
