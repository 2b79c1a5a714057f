import socket

def test_bind():
    a = socket.socket(); a.bind(('127.0.0.1', 0)); a.listen()
    b = socket.socket(); b.bind(a.getsockname())
