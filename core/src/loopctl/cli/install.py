"""``loopctl plugins install`` and ``loopctl plugins uninstall``: plugins go into loopctl's own
environment, whichever tool made it (``llm install`` is the model).

The environment is the one of ``sys.executable``, the Python running loopctl: a venv, a pipx
venv, a ``uv tool`` environment. Its installer is, in order: pip in that environment
(``python -m pip``; venvs and pipx have it), else uv on PATH (``uv pip install --python
sys.executable``; ``uv tool install`` makes environments without pip), else none, and the
command says what to do instead.

Names: ``context-errors`` means the distribution ``loopctl-context-errors`` (plugins are named
``loopctl-NAME``, see docs/plugins.md); a name that already says ``loopctl``, a requirement's
version (``context-errors>=0.2``), a path, a wheel or a URL is passed on as written. For
``uninstall``, a plugin's name is looked up among the installed plugins first, so a plugin whose
distribution is named otherwise is found too.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

from loopctl._version import DISTRIBUTION

#: A requirement's leading name (what a version specifier or extras follow).
_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")


class InstallError(Exception):
    """An install or uninstall that cannot run, or failed; ``exit_code`` is the command's."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def _is_location(text: str) -> bool:
    """A path, a wheel or sdist file, or a URL: passed to the installer as written."""
    return (
        "://" in text
        or "/" in text
        or os.sep in text
        or text.endswith((".whl", ".tar.gz", ".zip"))
        or text.startswith(".")
    )


def distribution_for(text: str) -> str:
    """The requirement to install for ``text``: ``context-errors`` → ``loopctl-context-errors``,
    ``goal-guard>=0.2`` → ``loopctl-goal-guard>=0.2``; a name containing ``loopctl``, a path
    or a URL unchanged. ValueError for something that is none of these."""
    text = text.strip()
    if _is_location(text):
        return text
    match = _NAME.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a plugin name, a requirement, a path or a URL")
    name = match.group(0)
    if _normalized(name) == "loopctl":
        raise ValueError(
            f"{text!r}: the distribution named loopctl on the package index is an unrelated "
            f"project; loopctl itself is {DISTRIBUTION}, and a plugin is loopctl-NAME"
        )
    if "loopctl" in name.lower():
        return text
    return f"loopctl-{name}{text[match.end() :]}"


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_plugins() -> list[dict[str, Any]]:
    """Every installed plugin (entry point of the ``loopctl.plugins`` group): its name,
    distribution and version. Nothing is imported."""
    from loopctl.pluginhost import _name_and_version, discover_entry_points

    rows = []
    for ep in discover_entry_points():
        distribution, version = _name_and_version(getattr(ep, "dist", None))
        rows.append({"name": ep.name, "distribution": distribution, "version": version})
    return rows


def installer(action: str, *, uv: str | None = None, has_pip: bool | None = None) -> list[str]:
    """The command that runs ``action`` (install, uninstall) in loopctl's own environment.

    ``uv`` and ``has_pip`` are for tests; by default uv is looked up on PATH and pip in
    ``sys.executable``'s environment. InstallError when neither is there.
    """
    if has_pip is None:
        has_pip = importlib.util.find_spec("pip") is not None
    if has_pip:
        extra = ["-y"] if action == "uninstall" else []
        return [sys.executable, "-m", "pip", action, *extra]
    uv = uv if uv is not None else shutil.which("uv")
    if uv:
        return [uv, "pip", action, "--python", sys.executable]
    raise InstallError(
        f"cannot {action} plugins here: loopctl's environment ({sys.prefix}) has no pip, and "
        "uv is not on PATH. Either add pip to it "
        f"({sys.executable} -m ensurepip), put uv on PATH, or use the tool that made it: "
        f"`pipx inject {DISTRIBUTION} NAME` / `pipx uninject {DISTRIBUTION} NAME`, "
        f"`uv tool install {DISTRIBUTION} --with NAME`."
    )


def _options(command: list[str], options: dict[str, Any]) -> list[str]:
    """pip's (and uv pip's) spelling of the options ``plugins install`` passes on."""
    uses_uv = command[0] != sys.executable
    args: list[str] = []
    if options.get("upgrade"):
        args.append("--upgrade")
    if options.get("pre"):
        args.append("--prerelease=allow" if uses_uv else "--pre")
    if options.get("no_index"):
        args.append("--no-index")
    if options.get("index_url"):
        args += ["--index-url", str(options["index_url"])]
    for link in options.get("find_links") or ():
        args += ["--find-links", str(link)]
    return args


def _run(command: Sequence[str], *, quiet_stdout: bool) -> None:
    """Run the installer; its output goes to the terminal (to stderr when stdout is JSON)."""
    try:
        done = subprocess.run(
            list(command), stdout=sys.stderr if quiet_stdout else None, check=False
        )
    except OSError as exc:
        raise InstallError(f"could not run {command[0]}: {exc}", 1) from None
    if done.returncode != 0:
        raise InstallError(
            f"`{' '.join(command)}` failed with exit code {done.returncode} (its output is "
            "above); nothing was changed by loopctl",
            1,
        )


def _changes(
    before: list[dict[str, Any]], after: list[dict[str, Any]]
) -> dict[str, list[dict[str, Any]]]:
    old = {row["name"]: row for row in before}
    new = {row["name"]: row for row in after}
    return {
        "added": [new[name] for name in sorted(new.keys() - old.keys())],
        "removed": [old[name] for name in sorted(old.keys() - new.keys())],
        "changed": [
            {**new[name], "previous_version": old[name]["version"]}
            for name in sorted(new.keys() & old.keys())
            if new[name]["version"] != old[name]["version"]
        ],
    }


def install(names: Sequence[str], *, json_output: bool, **options: Any) -> dict[str, Any]:
    """Install ``names`` into loopctl's environment; what changed among the plugins."""
    try:
        requirements = [distribution_for(name) for name in names]
    except ValueError as exc:
        raise InstallError(str(exc)) from None
    command = installer("install")
    command += _options(command, options) + requirements
    before = installed_plugins()
    _run(command, quiet_stdout=json_output)
    return {"command": command, "requested": requirements, **_changes(before, installed_plugins())}


def uninstall(names: Sequence[str], *, json_output: bool) -> dict[str, Any]:
    """Uninstall the plugins ``names`` (plugin or distribution names) from loopctl's
    environment; loopctl itself is refused."""
    before = installed_plugins()
    by_plugin = {row["name"]: row["distribution"] for row in before if row["distribution"]}
    distributions = []
    for name in names:
        found = by_plugin.get(name) or distribution_for(name)
        if _normalized(found) == DISTRIBUTION:
            raise InstallError(
                f"{DISTRIBUTION} is loopctl itself; remove it with the tool that installed it "
                f"(pip uninstall {DISTRIBUTION}, pipx uninstall {DISTRIBUTION}, "
                f"uv tool uninstall {DISTRIBUTION})"
            )
        distributions.append(found)
    command = installer("uninstall") + distributions
    _run(command, quiet_stdout=json_output)
    return {"command": command, "requested": distributions, **_changes(before, installed_plugins())}


def describe(result: dict[str, Any], action: str) -> list[str]:
    """What changed, in words: one line per plugin, and a note when no plugin did."""
    lines = []
    for row in result["added"]:
        lines.append(
            f"installed plugin {row['name']} ({row['distribution']} {row['version'] or '?'})"
        )
    for row in result["changed"]:
        lines.append(
            f"updated plugin {row['name']} ({row['distribution']} "
            f"{row['previous_version'] or '?'} → {row['version'] or '?'})"
        )
    for row in result["removed"]:
        lines.append(
            f"uninstalled plugin {row['name']} ({row['distribution']} {row['version'] or '?'})"
        )
    if not lines:
        wanted = ", ".join(result["requested"])
        lines.append(
            f"no plugin was {action}ed ({wanted}: already "
            f"{'there' if action == 'install' else 'gone'}, or not a loopctl plugin)"
        )
    return lines
