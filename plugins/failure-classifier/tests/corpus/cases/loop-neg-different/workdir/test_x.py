def test_x():
    return undefined_name
