from app.http import get


def test_get():
    assert get
