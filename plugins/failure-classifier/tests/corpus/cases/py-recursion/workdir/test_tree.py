from tree import depth


def test_depth():
    assert depth(3) == 3
