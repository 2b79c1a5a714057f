"""Agent adapters and the supervisor that runs them.

:mod:`loopctl.agents.base` defines the adapter interface, :mod:`loopctl.agents.supervisor` owns the
agent process, and each adapter lives in its own module. Nothing is imported here so that loading
one adapter never pays for the others.
"""
