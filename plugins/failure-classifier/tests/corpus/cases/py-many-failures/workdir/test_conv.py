import pytest
from conv import c2f


@pytest.mark.parametrize("c", range(10))
def test_c2f(c):
    assert c2f(c) == c * 9 / 5 + 32
