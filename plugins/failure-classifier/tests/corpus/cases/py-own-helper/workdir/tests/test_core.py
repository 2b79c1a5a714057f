from app.core import double
from helpers import sample


def test_double():
    assert double(sample()) == 42
