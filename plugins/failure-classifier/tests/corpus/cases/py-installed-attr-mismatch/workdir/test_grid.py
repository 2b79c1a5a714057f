import gridkit

def test_grid():
    assert gridkit.grid(2) == 2
