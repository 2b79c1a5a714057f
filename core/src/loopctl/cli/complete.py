"""What the shell completes for arguments that name things: agents and installed plugins
(``loopctl completion`` prints the script that asks). Each is asked only when completing, and
answers nothing rather than fail: a broken setup must not break the user's shell."""

from __future__ import annotations

from pathlib import Path


def agent_names(incomplete: str) -> list[str]:
    """The agent adapters of the enabled plugins (``--agent``, ``agents parse AGENT``)."""
    try:
        from loopctl.cli.fast import command_host

        names = command_host(Path.cwd()).collect_named("register_agents", "agent adapter")
    except Exception:  # noqa: BLE001 - nothing to offer, and nothing to say while completing
        return []
    return sorted(name for name in names if name.startswith(incomplete))


def installed_plugin_names(incomplete: str) -> list[str]:
    """The installed plugins (``plugins uninstall NAME``); none is imported."""
    try:
        from loopctl.cli.install import installed_plugins

        rows = installed_plugins()
    except Exception:  # noqa: BLE001 - nothing to offer, and nothing to say while completing
        return []
    return sorted({row["name"] for row in rows if row["name"].startswith(incomplete)})
