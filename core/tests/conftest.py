from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from loopctl.procgroup import set_subreaper


class FakeSite:
    """A directory on sys.path holding real (tiny) installed distributions with entry points,
    found by importlib-metadata exactly like pip-installed plugins."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def add_plugin(
        self, name: str, source: str, *, version: str = "1.0", module: str | None = None
    ) -> str:
        module = module or "loopctl_test_" + name.replace("-", "_")
        dist = f"loopctl-{name}"
        info = self.root / f"{dist.replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
        (info / "entry_points.txt").write_text(f"[loopctl.plugins]\n{name} = {module}\n")
        (self.root / f"{module}.py").write_text(textwrap.dedent(source))
        return module


@pytest.fixture
def fake_site(tmp_path, monkeypatch):
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    site = FakeSite(root)
    before = set(sys.modules)
    yield site
    for name in set(sys.modules) - before:
        if name.startswith("loopctl_test_"):
            del sys.modules[name]


@pytest.fixture(autouse=True, scope="session")
def _private_failure_memory(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Loops in these tests may load installed plugins; keep the context-errors plugin's
    per-user failure memory out of the real home (XDG_DATA_HOME survives LOOPCTL_* stripping)."""
    import os

    home = tmp_path_factory.mktemp("xdg-data")
    os.environ["XDG_DATA_HOME"] = str(home)
    os.environ["LOOPCTL_FAILURE_MEMORY"] = str(home / "failures.sqlite3")


@pytest.fixture
def subreaper() -> Iterator[None]:
    """This process as a child subreaper for the test, as loopctl makes itself for a run."""
    previous = set_subreaper(True)
    if previous is None:
        pytest.skip("no child subreaper on this platform (only process groups are ended)")
    try:
        yield
    finally:
        if not previous:
            set_subreaper(False)
