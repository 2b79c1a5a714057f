def encode(s):
    return s.encode("ascii")


def decode(b):
    return b.decode("ascii")
