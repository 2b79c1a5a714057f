import socket, threading

def serve(s):
    conn, _ = s.accept()
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b'\x01\x00\x00\x00\x00\x00\x00\x00')
    conn.close()

def test_fetch():
    s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()
    threading.Thread(target=serve, args=(s,)).start()
    c = socket.create_connection(s.getsockname())
    c.sendall(b'x')
    import time; time.sleep(0.2)
    assert c.recv(10) == b'ok'
