from grid import cells

def test_cells():
    assert len(cells(2)) == 2
