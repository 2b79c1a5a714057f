from server import start


def test_start():
    assert start()
