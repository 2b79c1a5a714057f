"""``loopctl plugins install`` / ``uninstall``: short names become distribution names, the
installer is loopctl's own environment's (pip, else uv, else a message saying what to do).
Installing for real, from a wheelhouse into a fresh venv, is tests/test_install_by_name.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as s

from loopctl.cli.install import _NAME, InstallError, _is_location, distribution_for, installer


@pytest.mark.parametrize(
    ("given_name", "expected"),
    [
        ("context-errors", "loopctl-context-errors"),
        ("goal-guard>=0.2", "loopctl-goal-guard>=0.2"),
        ("otel[extra]==0.2.0", "loopctl-otel[extra]==0.2.0"),
        ("loopctl-github", "loopctl-github"),
        ("pytest-loopctl-thing", "pytest-loopctl-thing"),
        ("./plugins/goal-guard", "./plugins/goal-guard"),
        (
            "/tmp/wh/loopctl_otel-0.2.0-py3-none-any.whl",
            "/tmp/wh/loopctl_otel-0.2.0-py3-none-any.whl",
        ),
        ("https://example.invalid/x.whl", "https://example.invalid/x.whl"),
    ],
)
def test_short_names_are_plugin_distributions(given_name: str, expected: str) -> None:
    assert distribution_for(given_name) == expected


@pytest.mark.parametrize("name", ["loopctl", "LoopCtl>=0.1", "loopctl[x]"])
def test_the_other_projects_loopctl_is_never_installed(name: str) -> None:
    with pytest.raises(ValueError, match="unrelated project; loopctl itself is loopctl-core"):
        distribution_for(name)


@given(s.text(max_size=40))
@settings(deadline=None)
def test_any_text_is_a_requirement_or_a_clear_error(text: str) -> None:
    match = _NAME.match(text.strip())
    location = _is_location(text.strip())
    if not location and (match is None or match.group(0).lower() == "loopctl"):
        with pytest.raises(ValueError, match=r"is not a plugin name|unrelated project"):
            distribution_for(text)
    else:
        result = distribution_for(text)
        assert "loopctl" in result.lower() or _is_location(result)


def test_pip_in_loopctls_environment_comes_first() -> None:
    assert installer("install", has_pip=True, uv="/bin/uv") == [
        sys.executable, "-m", "pip", "install",
    ]  # fmt: skip
    assert installer("uninstall", has_pip=True)[-2:] == ["uninstall", "-y"]


def test_without_pip_uv_installs_into_loopctls_python() -> None:
    assert installer("install", has_pip=False, uv="/opt/uv") == [
        "/opt/uv", "pip", "install", "--python", sys.executable,
    ]  # fmt: skip


def test_without_pip_or_uv_the_message_says_what_to_do() -> None:
    with pytest.raises(InstallError) as caught:
        installer("install", has_pip=False, uv="")
    message = str(caught.value)
    assert "no pip" in message
    assert "uv is not on PATH" in message
    assert "-m ensurepip" in message
    assert "pipx inject loopctl-core NAME" in message


@pytest.mark.slow
def test_uninstalling_loopctl_itself_is_refused() -> None:
    for name in ("core", "loopctl-core", "loopctl_core"):
        done = subprocess.run(
            [sys.executable, "-m", "loopctl", "plugins", "uninstall", name],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert done.returncode == 2
        assert "loopctl-core is loopctl itself" in done.stderr


def _loopctl(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loopctl", *args], cwd=cwd, capture_output=True, text=True,
        check=False,
    )  # fmt: skip


OFFLINE = ("--no-index", "--find-links", "/nonexistent")


@pytest.mark.slow
def test_a_name_found_nowhere_is_one_clean_error() -> None:
    done = _loopctl("plugins", "install", *OFFLINE, "no-such-plugin-xyz")
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert lines, done.stderr
    assert all(line.startswith("loopctl: error: ") for line in lines), done.stderr
    assert "no distribution named loopctl-no-such-plugin-xyz was found" in done.stderr


@pytest.mark.slow
def test_a_name_not_on_the_index_points_to_the_checkouts_copy(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    plugin = checkout / "contrib" / "flaky-db"
    plugin.mkdir(parents=True)
    (plugin / "pyproject.toml").write_text('[project]\nname = "loopctl-flaky-db"\n')
    done = _loopctl("plugins", "install", *OFFLINE, "flaky-db", cwd=checkout)
    assert done.returncode == 1
    assert "this checkout has it: loopctl plugins install ./contrib/flaky-db" in done.stderr
    (checkout / "docs").mkdir()
    inside = _loopctl("plugins", "install", *OFFLINE, "flaky-db", cwd=checkout / "docs")
    assert "loopctl plugins install ../contrib/flaky-db" in inside.stderr


@pytest.mark.slow
def test_a_failed_install_says_so_in_json_too() -> None:
    done = _loopctl("plugins", "install", "--json", *OFFLINE, "no-such-plugin-xyz")
    assert done.returncode == 1
    result = json.loads(done.stdout)
    assert result["requested"] == ["loopctl-no-such-plugin-xyz"]
    assert "no distribution named loopctl-no-such-plugin-xyz" in result["error"]
    assert result["added"] == result["removed"] == result["changed"] == []


@pytest.mark.slow
def test_uninstalling_a_name_nothing_has_is_an_error_with_a_suggestion() -> None:
    done = _loopctl("plugins", "uninstall", "goal-gaurd")
    assert done.returncode == 2
    assert (
        "no plugin or distribution named 'goal-gaurd' is installed (did you mean 'goal-guard'?)"
    ) in done.stderr
    as_json = _loopctl("plugins", "uninstall", "--json", "goal-gaurd")
    assert as_json.returncode == 2
    assert "did you mean 'goal-guard'?" in json.loads(as_json.stdout)["error"]
    from loopctl.cli.install import installed_plugins

    assert "goal-guard" in {row["name"] for row in installed_plugins()}  # nothing uninstalled


def test_required_plugins_can_name_loopctl_core_itself() -> None:
    from loopctl.pluginhost import PluginError, PluginHost

    host = PluginHost()
    host.load([])
    assert host.infos["core"].distribution == "loopctl-core"
    host.check_required(["loopctl-core>=0.2"])
    with pytest.raises(PluginError, match="'loopctl-core>=99' is installed in version"):
        host.check_required(["loopctl-core>=99"])
