from jobs import wait


def test_wait():
    assert wait("a") is None
