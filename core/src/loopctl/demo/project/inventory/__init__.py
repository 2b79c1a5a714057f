"""A tiny inventory package with bugs for the loopctl demo to fix."""
