from text import words

def test_words():
    assert words('a b') == ['a', 'b']
