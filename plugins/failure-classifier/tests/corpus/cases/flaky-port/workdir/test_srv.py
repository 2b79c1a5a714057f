import socket

def test_listen():
    s = socket.socket()
    s.bind(('127.0.0.1', 59119))
    s.close()
