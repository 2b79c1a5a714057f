from app.servces import ping

def test_ping():
    assert ping() == 'pong'
