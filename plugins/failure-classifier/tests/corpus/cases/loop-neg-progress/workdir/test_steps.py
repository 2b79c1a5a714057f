import os

def test_a():
    assert os.path.exists('a')

def test_b():
    assert os.path.exists('b')

def test_c():
    assert os.path.exists('c')
