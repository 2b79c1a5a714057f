import pytest
from roman import roman

@pytest.mark.parametrize('n,r', [(1, 'I'), (2, 'II'), (4, 'IV'), (5, 'V')])
def test_roman(n, r):
    assert roman(n) == r
