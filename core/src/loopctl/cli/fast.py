"""Commands that must start fast, written without typer or rich, and the plugin host that
offers the plugins' commands.

``loopctl plugins list`` is typed often and read by scripts; importing typer alone costs about
40 ms on a small machine, so it is dispatched here straight from :mod:`loopctl.__main__`, and
reads only the plugin switches of the config (:func:`loopctl.configfile.plugin_switches`), not the
whole typed configuration. :func:`command_host` does the same for the plugins' commands.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from loopctl.pluginhost import PluginHost


def command_host(workdir: Path) -> PluginHost:
    """The enabled plugins, loaded, for their ``register_commands``: chosen by the config's
    plugin switches alone, so offering a plugin's command costs neither the typed configuration
    nor the engine. ``required_plugins`` is not checked here: it is a run's precondition (the
    command, if it loads the project, checks it). Raises ConfigError for a config file whose
    plugin switches are wrong, PluginError when the core plugin is disabled, and a plugin's
    import error with ``plugins.strict``."""
    from loopctl.configfile import plugin_switches
    from loopctl.pluginhost import PluginHost, PluginSelection, check_core_enabled

    switches = plugin_switches(workdir)
    selection = PluginSelection(
        enable=switches["enable"],
        disable=switches["disable"],
        autoload=switches["autoload"],
        strict=switches["strict"],
    )
    host = PluginHost(selection)
    host.load()
    check_core_enabled(selection)
    return host


def plugins_list(*, json_output: bool, config_file: Path | None = None) -> int:
    """Print every installed plugin; disabled plugins are listed but never imported."""
    from loopctl.configfile import ConfigError, plugin_switches
    from loopctl.pluginhost import PluginHost, PluginSelection

    try:
        switches = plugin_switches(Path.cwd(), config_file=config_file)
    except ConfigError as exc:
        for line in str(exc).strip().splitlines():
            print(f"loopctl: error: {line}", file=sys.stderr)
        return 2
    # Listing must show a broken plugin, not die of it, even with plugins.strict = true.
    selection = PluginSelection(
        enable=switches["enable"], disable=switches["disable"], autoload=switches["autoload"]
    )
    host = PluginHost(selection)
    host.load()
    rows: list[dict[str, Any]] = [
        {
            "name": info.name,
            "distribution": info.distribution,
            "version": info.version,
            "status": info.status,
            "detail": info.detail,
            "hooks": info.hooks,
            "source": info.source,
            "origin": info.origin,
        }
        for info in host.infos.values()
    ]
    if json_output:
        print(json.dumps(rows, indent=2))
        return 0
    out = sys.stdout
    width = max((len(r["name"]) for r in rows), default=8)
    for row in rows:
        version = row["version"] or "?"
        origin = " (builtin)" if row["origin"] == "builtin" else ""
        out.write(
            f"{row['name']:<{width}}  {row['status']:<8}  {row['distribution']} {version}{origin}\n"
        )
        if row["detail"]:
            out.write(f"{'':<{width}}  {row['detail']}\n")
        if row["hooks"]:
            out.write(f"{'':<{width}}  hooks: {', '.join(row['hooks'])}\n")
        out.write(f"{'':<{width}}  from: {row['source']}\n")
    if not selection.autoload:  # the loader's own reading of the variable ("0" is not set)
        out.write("(LOOPCTL_DISABLE_PLUGIN_AUTOLOAD is set: only allow-listed plugins load)\n")
    return 0
