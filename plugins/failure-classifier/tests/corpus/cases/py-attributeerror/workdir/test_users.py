from users import email


def test_email():
    assert email("ann") == "ann@x.org"
