from cfg import timeout

def test_timeout():
    assert timeout() == 30, 'request timed out default should be 30 s'
