from importlib.metadata import version
print(version('loopctl-corpus-nonexistent-xyz'))
