import socket

HOLD = socket.socket()
HOLD.bind(("127.0.0.1", 0))
HOLD.listen()
PORT = HOLD.getsockname()[1]


def start():
    s = socket.socket()
    s.bind(("127.0.0.1", PORT))
    return s
