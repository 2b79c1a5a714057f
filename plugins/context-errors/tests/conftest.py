"""Every test gets its own failure memory under tmp_path: the user's real memory file is never
read or written by these tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from loopctl_context_errors.memory import close_all


@pytest.fixture(autouse=True)
def private_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Point both the explicit override and the XDG default into tmp_path; afterwards, close
    the connections this test opened (a loop finishes its background writes before it ends)."""
    path = tmp_path / "memory" / "failures.sqlite3"
    monkeypatch.setenv("LOOPCTL_FAILURE_MEMORY", str(path))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("NO_COLOR", raising=False)
    yield path
    close_all()
