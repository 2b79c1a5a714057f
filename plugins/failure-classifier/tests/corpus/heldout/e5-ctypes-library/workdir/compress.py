import ctypes

lib = ctypes.CDLL('libzstdcorpus.so.1')
print(lib.ZSTD_versionNumber())
