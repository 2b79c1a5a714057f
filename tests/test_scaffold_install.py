"""The issue's promise for `loopctl plugins new`: a generated plugin installs into a fresh venv
with core and passes its tests unmodified. Slow (it builds a venv and installs from source), so
it runs in the nox ``isolation`` session (``-m venv``), not in every ``tests`` session."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.venv


def test_generated_plugins_install_into_a_fresh_venv_and_pass_their_tests(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    for args in (["flaky-db"], ["db-lock", "--classifier"]):
        subprocess.run(
            [sys.executable, "-m", "loopctl", "plugins", "new", *args, "--dir", str(work)],
            check=True, capture_output=True,
        )  # fmt: skip
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    subprocess.run(
        [python, "-m", "pip", "install", "-q", str(ROOT / "core"),
         str(ROOT / "plugins" / "failure-classifier"),
         f"{work / 'loopctl-flaky-db'}[test]", f"{work / 'loopctl-db-lock'}[test]"],
        check=True,
    )  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPCTL_")}
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")
    listed = subprocess.run(
        [python, "-m", "loopctl", "plugins", "list", "--json"],
        capture_output=True, text=True, check=True, env=env, cwd=work,
    )  # fmt: skip
    status = {p["name"]: p["status"] for p in json.loads(listed.stdout)}
    assert status["flaky-db"] == "enabled"
    assert status["db-lock"] == "enabled"
    tests = subprocess.run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "loopctl-flaky-db",
         "loopctl-db-lock"],
        capture_output=True, text=True, env=env, cwd=work, check=False,
    )  # fmt: skip
    assert tests.returncode == 0, tests.stdout[-3000:]
