"""loopctl installs by its published names: every distribution of this repository is built into
a local wheelhouse, and a fresh venv installs them by name with ``--no-index --find-links``, so
the names can only resolve to our wheels (``loopctl`` on the package index is another project).
Then ``loopctl demo`` runs and ``loopctl plugins list`` shows every plugin from our wheels;
``loopctl plugins uninstall`` and ``install`` change that venv, the one loopctl runs in.

Slow (builds wheels and a venv), so it runs in the nox ``packaging`` session (``-m venv``).
``LOOPCTL_WHEELHOUSE`` names a folder of already built wheels (nox builds them once per run);
third-party dependencies are fetched once with ``pip download`` into a folder of their own.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.venv, pytest.mark.slow]

#: The published names: core, the first-party plugins (through core's `all` extra), contrib.
CORE = "loopctl-core"
FIRST_PARTY = ["context-errors", "context-monitor", "failure-classifier", "goal-guard"]
CONTRIB = ["example-classifier", "fleet", "github", "otel"]
REQUESTED = [f"{CORE}[all]", *(f"loopctl-{name}" for name in CONTRIB)]


def _sources() -> list[Path]:
    return [
        ROOT / "core",
        *sorted(p.parent for p in ROOT.glob("plugins/*/pyproject.toml")),
        *sorted(p.parent for p in ROOT.glob("contrib/*/pyproject.toml")),
    ]


def _offline_env(**extra: str) -> dict[str, str]:
    """No pip configuration from the machine (its find-links, extra indexes, constraints): the
    wheelhouses on the command line are all pip sees."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "LOOPCTL_"))}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1", **extra}


@pytest.fixture(scope="module")
def wheelhouses(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(ours, theirs): every first-party wheel, and the third-party wheels they need."""
    given = os.environ.get("LOOPCTL_WHEELHOUSE")
    ours = Path(given) if given else tmp_path_factory.mktemp("ours")
    if not given:
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--wheel-dir", str(ours),
             *map(str, _sources())],
            check=True,
        )  # fmt: skip
    built = sorted(p.name for p in ours.glob("loopctl_*.whl"))
    assert len(built) == len(_sources()), built
    theirs = tmp_path_factory.mktemp("theirs")
    # the dependencies only: our names resolve in `ours` (pip prefers find-links on a tie, and
    # none of our names exists on the index); our wheels are then removed from `theirs`
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--dest", str(theirs),
         "--find-links", str(ours), *REQUESTED],
        check=True,
    )  # fmt: skip
    for wheel in theirs.glob("loopctl_*"):
        wheel.unlink()
    return ours, theirs


def _run(*argv: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        list(argv), cwd=cwd, env=env or _offline_env(), capture_output=True, text=True,
        timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"{argv}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _plugins(loopctl: str, cwd: Path, env: dict[str, str]) -> dict[str, dict[str, str]]:
    rows = json.loads(_run(loopctl, "plugins", "list", "--json", cwd=cwd, env=env))
    return {row["name"]: row for row in rows}


def test_every_wheel_ships_its_license_and_readme(wheelhouses: tuple[Path, Path]) -> None:
    ours, _ = wheelhouses
    for wheel in sorted(ours.glob("loopctl_*.whl")):
        names = zipfile.ZipFile(wheel).namelist()
        assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), wheel.name
        metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
        text = zipfile.ZipFile(wheel).read(metadata).decode()
        assert "Description-Content-Type: text/markdown" in text, wheel.name
        assert "License-File: LICENSE" in text, wheel.name
        assert "Project-URL: " in text, wheel.name


def test_the_published_names_install_offline_and_run(
    wheelhouses: tuple[Path, Path], tmp_path: Path
) -> None:
    ours, theirs = wheelhouses
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python, loopctl = str(venv / "bin" / "python"), str(venv / "bin" / "loopctl")
    offline = ["--no-index", "--find-links", str(ours), "--find-links", str(theirs)]
    _run(python, "-m", "pip", "install", "-q", *offline, *REQUESTED)

    installed = {
        row["name"].lower(): row["version"]
        for row in json.loads(_run(python, "-m", "pip", "list", "--format", "json"))
    }
    assert CORE in installed
    assert "loopctl" not in installed  # the unrelated project of that name
    for name in FIRST_PARTY + CONTRIB:
        assert f"loopctl-{name}" in installed

    work = tmp_path / "work"
    work.mkdir()
    env = _offline_env(XDG_DATA_HOME=str(tmp_path / "xdg"), HOME=str(tmp_path / "home"))
    assert _run(loopctl, "--version", cwd=work, env=env).split() == ["loopctl", installed[CORE]]
    _run(loopctl, "demo", "--keep", str(tmp_path / "demo"), cwd=work, env=env)
    assert (tmp_path / "demo" / ".loopctl").is_dir()

    plugins = _plugins(loopctl, work, env)
    for name in FIRST_PARTY + CONTRIB:
        assert plugins[name]["status"] == "enabled", plugins[name]
        assert plugins[name]["distribution"] == f"loopctl-{name}"
        assert str(venv) in plugins[name]["source"]
    assert plugins["core"]["distribution"] == CORE

    # `plugins uninstall` / `install` change the venv loopctl runs in; short names work
    removed = json.loads(_run(loopctl, "plugins", "uninstall", "goal-guard", "--json", env=env))
    assert [row["name"] for row in removed["removed"]] == ["goal-guard"]
    assert "goal-guard" not in _plugins(loopctl, work, env)
    added = json.loads(
        _run(loopctl, "plugins", "install", "goal-guard", "--no-index", "--find-links", str(ours),
             "--json", env=env)
    )  # fmt: skip
    assert added["requested"] == ["loopctl-goal-guard"]
    assert [(r["name"], r["distribution"]) for r in added["added"]] == [
        ("goal-guard", "loopctl-goal-guard")
    ]
    assert _plugins(loopctl, work, env)["goal-guard"]["status"] == "enabled"
    said = _run(loopctl, "plugins", "uninstall", "goal-guard", env=env)
    assert "uninstalled plugin goal-guard (loopctl-goal-guard " in said


def _uv() -> str:
    """The real uv: on PATH or beside this Python (the nox session installs it); the test skips
    without it, unless ``LOOPCTL_REQUIRE_UV`` says it must run (CI)."""
    found = shutil.which("uv") or shutil.which("uv", path=str(Path(sys.executable).parent))
    if found is None:
        if os.environ.get("LOOPCTL_REQUIRE_UV"):
            pytest.fail("uv is not installed, and LOOPCTL_REQUIRE_UV says this test must run")
        pytest.skip("uv is not installed (`pip install uv`; the nox packaging session has it)")
    return found


def test_an_environment_without_pip_installs_plugins_with_uv(
    wheelhouses: tuple[Path, Path], tmp_path: Path
) -> None:
    """As `uv tool install` makes them: loopctl's venv has no pip, so `plugins install` runs
    `uv pip install --python <loopctl's python>`; without uv either, it says what to do."""
    ours, theirs = wheelhouses
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python, loopctl = str(venv / "bin" / "python"), str(venv / "bin" / "loopctl")
    _run(sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-index",
         "--find-links", str(ours), "--find-links", str(theirs), CORE)  # fmt: skip
    assert subprocess.run([python, "-c", "import pip"], check=False).returncode != 0

    bindir = tmp_path / "bin"  # uv alone on PATH besides the system's (which has no pip)
    bindir.mkdir()
    (bindir / "uv").symlink_to(_uv())
    path = f"{bindir}{os.pathsep}/usr/bin{os.pathsep}/bin"
    env = _offline_env(
        PATH=path, UV_CACHE_DIR=str(tmp_path / "uv-cache"), XDG_DATA_HOME=str(tmp_path / "xdg")
    )
    env = {k: v for k, v in env.items() if not k.startswith("UV_") or k == "UV_CACHE_DIR"}
    said = _run(loopctl, "plugins", "install", "goal-guard", "--no-index", "--find-links",
                str(ours), env=env)  # fmt: skip
    assert "installed plugin goal-guard (loopctl-goal-guard " in said
    assert subprocess.run([python, "-c", "import loopctl_goal_guard"], check=False).returncode == 0
    assert _plugins(loopctl, tmp_path, env)["goal-guard"]["status"] == "enabled"
    said = _run(loopctl, "plugins", "uninstall", "goal-guard", env=env)
    assert "uninstalled plugin goal-guard" in said

    no_uv = subprocess.run(
        [loopctl, "plugins", "install", "goal-guard"],
        env={**env, "PATH": f"/usr/bin{os.pathsep}/bin"}, capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    assert no_uv.returncode == 2
    assert "has no pip, and uv is not on PATH" in no_uv.stderr
    assert "pipx inject loopctl-core NAME" in no_uv.stderr
