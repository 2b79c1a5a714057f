import socket


def test_ping():
    s = socket.create_connection(("127.0.0.1", 1), timeout=1)
    s.close()
