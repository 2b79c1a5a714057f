import numpy_loopctl_corpus as np

def add(a, b):
    return int(np.add(a, b))
