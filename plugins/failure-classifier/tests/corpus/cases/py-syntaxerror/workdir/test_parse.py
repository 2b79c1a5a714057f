from parse import parse


def test_parse():
    assert parse("a,b") == ["a", "b"]
