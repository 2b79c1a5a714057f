"""``loopctl`` as a user runs it, for the CLI tests: a subprocess with an environment cleaned of
the developer's loopctl settings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without loopctl's variables, ``NO_COLOR`` and
    ``PYTHONPATH``; then ``extra``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LOOPCTL_", "_LOOPCTL_")) and k not in ("NO_COLOR", "PYTHONPATH")
    }
    env.update(extra)
    return env


def loopctl(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m loopctl ARGS`` in ``cwd``, its output captured, stdin empty."""
    return subprocess.run(
        [sys.executable, "-m", "loopctl", *args],
        cwd=cwd,
        env=env if env is not None else clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
