def test_rows(database):
    assert database.rows() == []
