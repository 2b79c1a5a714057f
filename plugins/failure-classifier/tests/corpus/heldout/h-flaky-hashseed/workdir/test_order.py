def test_first():
    assert next(iter({'apple', 'banana', 'cherry'})) == 'apple'
