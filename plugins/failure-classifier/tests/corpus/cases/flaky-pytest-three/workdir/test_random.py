import random

def test_sample():
    assert random.random() < 0.5, 'unlucky draw'
