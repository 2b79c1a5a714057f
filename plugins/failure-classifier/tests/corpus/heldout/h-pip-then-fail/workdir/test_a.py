import attrs

def test_a():
    assert attrs.__title__ == 'cattrs'
