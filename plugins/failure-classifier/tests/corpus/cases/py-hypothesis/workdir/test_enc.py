from hypothesis import given, strategies as st
from enc import encode, decode


@given(st.text())
def test_roundtrip(s):
    assert decode(encode(s)) == s
