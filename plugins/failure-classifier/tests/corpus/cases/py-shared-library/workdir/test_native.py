import ctypes

def test_lib():
    assert ctypes.CDLL('libloopctlcorpusxyz.so.1')
