from report import table

def test_table():
    assert len(table([{'a': 1}])) == 1
