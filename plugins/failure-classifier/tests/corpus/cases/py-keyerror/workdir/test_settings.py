from settings import port


def test_port():
    assert port() == 80
