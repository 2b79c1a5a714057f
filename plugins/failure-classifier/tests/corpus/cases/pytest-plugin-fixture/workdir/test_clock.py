import clock

def test_now(mocker):
    mocker.patch('time.time', return_value=5)
    assert clock.now() == 5
