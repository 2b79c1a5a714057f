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
from pathlib import Path
from typing import Any

from loopctl._version import DISTRIBUTION

#: A requirement's leading name (what a version specifier or extras follow).
_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")


class InstallError(Exception):
    """An install or uninstall that cannot run, or failed; ``exit_code`` is the command's.
    ``result`` is what ``--json`` prints: the command's result with the error in it."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.result: dict[str, Any] = {
            "command": None, "requested": [], "error": message, "added": [], "removed": [],
            "changed": [],
        }  # fmt: skip

    def told(self, command: list[str] | None, requested: list[str], before: Any) -> InstallError:
        """This error, its result saying what was run and what changed among the plugins."""
        changes = _changes(before, installed_plugins()) if before is not None else {}
        self.result.update(command=command, requested=requested, **changes)
        return self


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
    """Run the installer; its output goes to the terminal (to stderr when stdout is JSON), its
    error output after it ends. A distribution it found nowhere is an error of one line."""
    try:
        done = subprocess.run(
            list(command), stdout=sys.stderr if quiet_stdout else None, stderr=subprocess.PIPE,
            text=True, errors="replace", check=False,
        )  # fmt: skip
    except OSError as exc:
        raise InstallError(f"could not run {command[0]}: {exc}", 1) from None
    missing = _NOT_FOUND.findall(done.stderr) if done.returncode != 0 else []
    if missing:
        found = " ".join(dict.fromkeys(a or b for a, b in missing))
        raise InstallError(f"no distribution named {found} was found; nothing was installed", 1)
    sys.stderr.write(done.stderr)
    if done.returncode != 0:
        raise InstallError(
            f"`{' '.join(command)}` failed with exit code {done.returncode} (its output is "
            "above); nothing was changed by loopctl",
            1,
        )


#: A distribution the installer found nowhere: pip's words, and uv's.
_NOT_FOUND = re.compile(
    r"No matching distribution found for (\S+)|Because (\S+) was not found in the"
)


def checkout_copy(distribution: str, cwd: Path | None = None) -> Path | None:
    """The directory of ``distribution`` (``loopctl-fleet``) in a checkout of loopctl's
    repository, ``contrib/fleet`` or ``plugins/fleet``: the checkout ``cwd`` is in, else the
    one loopctl runs from (an editable install); None when neither has it."""
    from loopctl.configfile import ConfigError, read_toml

    name = _normalized(distribution)
    short = name.removeprefix("loopctl-")
    here = Path(os.path.abspath(cwd or Path.cwd()))
    source = Path(__file__).resolve().parents[4]  # core/src/loopctl/cli/install.py
    for base in (here, *here.parents, source):
        for kind in ("contrib", "plugins"):
            project = base / kind / short / "pyproject.toml"
            try:
                found = read_toml(project, str(project)).get("project", {}).get("name", "")
            except (ConfigError, AttributeError):
                continue
            if isinstance(found, str) and _normalized(found) == name:
                return project.parent
    return None


def _checkout_hint(requirements: Sequence[str]) -> str:
    """``; this checkout has it: loopctl plugins install ./contrib/NAME`` when it does."""
    hints = []
    for requirement in requirements:
        match = _NAME.match(requirement)
        copy = checkout_copy(match.group(0)) if match and not _is_location(requirement) else None
        if copy is not None:
            shown = os.path.relpath(copy)
            hints.append(shown if shown.startswith("..") else f"./{shown}")
    if not hints:
        return ""
    return f"; this checkout has it: loopctl plugins install {' '.join(hints)}"


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
        raise InstallError(str(exc)).told(None, list(names), None) from None
    command = installer("install")
    command += _options(command, options) + requirements
    before = installed_plugins()
    try:
        _run(command, quiet_stdout=json_output)
    except InstallError as exc:
        if exc.args[0].startswith("no distribution named"):
            exc = InstallError(exc.args[0] + _checkout_hint(requirements), exc.exit_code)
        raise exc.told(command, requirements, before) from None
    changes = _changes(before, installed_plugins())
    return {"command": command, "requested": requirements, "error": None, **changes}


def uninstall(names: Sequence[str], *, json_output: bool) -> dict[str, Any]:
    """Uninstall the plugins ``names`` (plugin or distribution names) from loopctl's
    environment; loopctl itself is refused."""
    before = installed_plugins()
    by_plugin = {row["name"]: row["distribution"] for row in before if row["distribution"]}
    distributions = []
    for name in names:
        try:
            found = by_plugin.get(name) or distribution_for(name)
        except ValueError as exc:
            raise InstallError(str(exc)).told(None, list(names), None) from None
        if _normalized(found) == DISTRIBUTION:
            raise InstallError(
                f"{DISTRIBUTION} is loopctl itself; remove it with the tool that installed it "
                f"(pip uninstall {DISTRIBUTION}, pipx uninstall {DISTRIBUTION}, "
                f"uv tool uninstall {DISTRIBUTION})"
            ).told(None, list(names), None)
        if name not in by_plugin and not _is_installed(found):
            from loopctl.suggest import did_you_mean

            raise InstallError(
                f"no plugin or distribution named {name!r} is installed"
                f"{did_you_mean(name, by_plugin)}; nothing was uninstalled; the installed "
                "plugins are: "
                f"{', '.join(sorted(by_plugin)) or 'none'}"
            ).told(None, list(names), None)
        distributions.append(found)
    command = installer("uninstall") + distributions
    try:
        _run(command, quiet_stdout=json_output)
    except InstallError as exc:
        raise exc.told(command, distributions, before) from None
    changes = _changes(before, installed_plugins())
    return {"command": command, "requested": distributions, "error": None, **changes}


def _is_installed(requirement: str) -> bool:
    """Whether the distribution ``requirement`` names is installed here (a path or a URL
    names none: the installer says what it makes of it)."""
    import importlib.metadata

    match = _NAME.match(requirement)
    if match is None or _is_location(requirement):
        return True
    try:
        importlib.metadata.distribution(match.group(0))
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


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
