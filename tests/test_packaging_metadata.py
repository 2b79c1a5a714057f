"""Every distribution of the repository is publishable under its own name: it requires
``loopctl-core`` (never ``loopctl``, an unrelated project on the package index), ships the
repository's LICENSE, links to the project, declares its Python versions, OS and status, and has
a README that says how to install it. Building and installing them is
tests/test_install_by_name.py (nox ``packaging``)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
DISTRIBUTIONS = [
    ROOT / "core",
    *sorted(p.parent for p in ROOT.glob("plugins/*/pyproject.toml")),
    *sorted(p.parent for p in ROOT.glob("contrib/*/pyproject.toml")),
]
#: The Python versions CI tests (noxfile.py SUPPORTED), each a classifier.
SUPPORTED = re.search(r"SUPPORTED = \(([^)]*)\)", (ROOT / "noxfile.py").read_text()).group(1)  # type: ignore[union-attr]
VERSIONS = re.findall(r'"(3\.\d+)"', SUPPORTED)


def _project(dist: Path) -> dict[str, Any]:
    data: dict[str, Any] = tomllib.loads((dist / "pyproject.toml").read_text())["project"]
    return data


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower()


@pytest.mark.parametrize("dist", DISTRIBUTIONS, ids=lambda p: p.name)
def test_each_distribution_is_publishable(dist: Path) -> None:
    project = _project(dist)
    assert project["name"] == ("loopctl-core" if dist.name == "core" else f"loopctl-{dist.name}")
    requirements = project.get("dependencies", []) + [
        req for reqs in project.get("optional-dependencies", {}).values() for req in reqs
    ]
    assert "loopctl" not in {_name(req) for req in requirements}
    if dist.name != "core":
        assert "loopctl-core" in {_name(req) for req in project["dependencies"]}
    assert project["license"] == "MIT"
    assert project["license-files"] == ["LICENSE"]
    assert (dist / "LICENSE").read_text() == (ROOT / "LICENSE").read_text()
    assert {"Homepage", "Documentation", "Repository", "Issues", "Changelog"} <= set(
        project["urls"]
    )
    classifiers = set(project["classifiers"])
    assert {f"Programming Language :: Python :: {v}" for v in VERSIONS} <= classifiers
    assert any(c.startswith("Development Status :: ") for c in classifiers)
    assert any(c.startswith("Operating System :: ") for c in classifiers)
    assert project["requires-python"] == f">={VERSIONS[0]}"
    readme = (dist / project["readme"]).read_text()
    assert f"pip install {project['name']}" in readme or f"pip install '{project['name']}" in readme
    assert "](../" not in readme  # relative links break on the package index's page


def test_the_all_extra_is_the_first_party_plugins() -> None:
    extra = {_name(req) for req in _project(ROOT / "core")["optional-dependencies"]["all"]}
    assert extra == {f"loopctl-{p.parent.name}" for p in ROOT.glob("plugins/*/pyproject.toml")}


def test_no_install_line_names_the_other_projects_loopctl() -> None:
    pages = [ROOT / "README.md", *ROOT.glob("docs/**/*.md"), *ROOT.glob("*/*/README.md")]
    pages.remove(ROOT / "docs" / "changelog.md")  # it says why `pip install loopctl` was wrong
    pattern = re.compile(r"(?:pip|pipx|uv tool|uv pip) install[^\n`#]*?[ ']loopctl(?![-\w])")
    found = [
        f"{page.relative_to(ROOT)}: {m.group(0)}"
        for page in pages
        for m in pattern.finditer(page.read_text())
    ]
    assert found == []
