"""``[plugins.fleet]`` in loopctl.toml: which fleet and server the ``loopctl fleet`` commands use.

Each setting is taken from the first of: the command's flag; the environment (``$LOOPCTL_FLEET``,
and Temporal's own ``TEMPORAL_*`` variables and profiles file, see :mod:`loopctl_fleet.connect`);
this section; the default. The API key is never a key here: ``api_key_env`` names the
environment variable that holds it, so it never sits in a file that gets committed.
"""

from __future__ import annotations

import attrs

NAME = "fleet"


@attrs.define(kw_only=True)
class FleetConfig:
    """Every field has a default: without the section, the commands use ``fleet up``'s server."""

    #: The fleet (its task queue is ``loopctl-<fleet>``); "" means $LOOPCTL_FLEET or "default".
    fleet: str = ""
    #: The Temporal server, HOST:PORT; "" means $TEMPORAL_ADDRESS or 127.0.0.1:7233.
    address: str = ""
    #: The Temporal namespace; "" means $TEMPORAL_NAMESPACE or "default".
    namespace: str = ""
    #: The environment variable that holds the Temporal API key (the key is never read from here).
    api_key_env: str = ""
    #: Connect with TLS (left out: on when there is an API key).
    tls: bool | None = None
    #: Client certificate and key for mTLS, and the server's CA certificate (PEM file paths).
    tls_cert: str = ""
    tls_key: str = ""
    tls_ca: str = ""
    #: Loops a worker (``fleet worker``, ``fleet up``) runs at once.
    slots: int = 4
    #: Land every submitted task's result on its base (a task's ``[task.fleet] land`` wins).
    land: bool = False
