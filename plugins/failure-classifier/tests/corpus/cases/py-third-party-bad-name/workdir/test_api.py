from attrs import define_everything


def test_x():
    assert define_everything
