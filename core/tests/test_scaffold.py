"""`loopctl plugins new`: the names it takes, what it refuses, and that what it writes passes
its own tests (run here from source; tests/test_scaffold_install.py installs it for real)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopctl.scaffold import ScaffoldError, plugin_name, write_plugin


def test_names_are_normalised_and_bad_ones_refused() -> None:
    assert plugin_name("Loopctl-Flaky-DB") == "flaky-db"
    assert plugin_name("lint2") == "lint2"
    for bad in ("", "2fast", "flaky_db", "flaky--db", "-x", "x-", "a b", "loopctl-"):
        with pytest.raises(ScaffoldError, match="not a usable plugin name"):
            plugin_name(bad)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=30))
def test_any_name_is_either_refused_clearly_or_usable_as_a_package(raw: str) -> None:
    try:
        name = plugin_name(raw)
    except ScaffoldError as exc:
        message = str(exc)
        name = ""
    else:
        message = ""
    if name:
        assert ("loopctl_" + name.replace("-", "_")).isidentifier()
    else:
        assert "not a usable plugin name" in message


def test_an_existing_directory_is_never_overwritten(tmp_path: Path) -> None:
    write_plugin(tmp_path, "flaky-db")
    marker = tmp_path / "loopctl-flaky-db" / "README.md"
    marker.write_text("mine", encoding="utf-8")
    with pytest.raises(ScaffoldError, match="already exists"):
        write_plugin(tmp_path, "flaky-db", classifier=True)
    assert marker.read_text(encoding="utf-8") == "mine"


@pytest.mark.slow
def test_the_command_lists_what_it_wrote(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "loopctl", "plugins", "new", "flaky-db", "--dir", str(tmp_path),
         "--json"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    root = Path(listed["path"])
    assert root == tmp_path / "loopctl-flaky-db"
    assert sorted(listed["files"]) == sorted(
        str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()
    )
    again = subprocess.run(
        [sys.executable, "-m", "loopctl", "plugins", "new", "flaky-db", "--dir", str(tmp_path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert again.returncode == 2
    assert "already exists" in again.stderr


@pytest.mark.slow
@pytest.mark.parametrize("classifier", [False, True], ids=["plugin", "classifier"])
def test_the_generated_plugin_passes_its_own_tests(tmp_path: Path, classifier: bool) -> None:
    if classifier:
        pytest.importorskip("loopctl_failure_classifier")
    written = write_plugin(tmp_path, "sample", classifier=classifier)
    root = written[0]
    pyproject = (root / "pyproject.toml").read_text(encoding="utf-8")
    assert 'sample = "loopctl_sample.plugin"' in pyproject
    env = {**os.environ, "PYTHONPATH": str(root / "src"), "XDG_DATA_HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(root / "tests")],
        capture_output=True, text=True, env=env, cwd=root, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:]
    assert " passed" in done.stdout


@pytest.mark.parametrize("classifier", [False, True], ids=["plugin", "classifier"])
def test_the_templates_use_only_the_public_api(tmp_path: Path, classifier: bool) -> None:
    """What a third party starts from imports ``loopctl`` (and ``loopctl.testing`` in tests)
    only, keeps run state in ``loop.stash``, and names its events after the plugin."""
    import re

    root = write_plugin(tmp_path, "flaky-db", classifier=classifier)[0]
    private = re.compile(r"(?:from|import) loopctl\.(?!testing\b)[a-z]")
    for path in root.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert not private.search(text), path
        assert "global " not in text, path
        assert '"loop.' not in text, path  # no copies of other plugins' or core event names
    plugin = (root / "src" / "loopctl_flaky_db" / "plugin.py").read_text(encoding="utf-8")
    if not classifier:
        assert 'FAILURE_SEEN = f"{NAME}.failure_seen"' in plugin
        assert "StashKey[" in plugin
        assert "def after_iteration(loop: Loop, record: IterationRecord, test_run:" in plugin
