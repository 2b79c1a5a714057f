"""loopctl's ``pytest11`` entry point costs the user's own test runs nothing but one small module:
pytest imports it in every run where loopctl is installed (and the loop runs the user's tests
every iteration), so the fixtures import the testing kit, and with it the engine, only when a
test asks for one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

#: A user's test that records which loopctl modules its pytest run has imported.
RECORDER = """\
import json, sys

def test_records_the_imported_modules():
    names = sorted(m for m in sys.modules if m == "loopctl" or m.startswith("loopctl."))
    with open("modules.json", "w") as out:
        json.dump(names, out)
"""

#: A test using the fixtures, in the same kind of run.
FIXTURE_USER = """\
import sys

def test_the_fixture_loads_the_kit_when_asked(loopctl_project):
    assert (loopctl_project.path / ".git").is_dir()
    assert "loopctl.testing" in sys.modules
"""


def _pytest(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOOPCTL_", "PYTEST_"))}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=project, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


@pytest.mark.slow
def test_a_users_pytest_run_imports_only_the_entry_point_module(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # the rootdir: no config from above
    (tmp_path / "test_user.py").write_text(RECORDER)
    done = _pytest(tmp_path, "test_user.py")
    assert done.returncode == 0, done.stdout + done.stderr
    imported = json.loads((tmp_path / "modules.json").read_text())
    # the entry point was loaded (so this proves something), and nothing else of loopctl
    assert imported == ["loopctl", "loopctl._version", "loopctl.pytest_plugin"]


@pytest.mark.slow
def test_the_fixtures_still_work_through_the_entry_point(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_kit.py").write_text(FIXTURE_USER)
    done = _pytest(tmp_path, "test_kit.py")
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_p_no_loopctl_keeps_loopctl_out_of_the_run(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_user.py").write_text(RECORDER)
    done = _pytest(tmp_path, "-p", "no:loopctl", "test_user.py")
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads((tmp_path / "modules.json").read_text()) == []
