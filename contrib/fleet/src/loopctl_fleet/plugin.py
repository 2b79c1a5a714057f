"""The loopctl hooks of loopctl-fleet (entry point ``fleet``): the ``loopctl fleet`` commands
and their ``[plugins.fleet]`` section.

Cheap to import (``loopctl plugins list`` and every ``loopctl run`` import it): no hook here
imports temporalio, which costs a command 0.3 s; only the fleet's commands do.
"""

from __future__ import annotations

from typing import Any

from loopctl import hookimpl


@hookimpl
def register_commands(cli: Any) -> None:
    from loopctl_fleet.cli import app

    cli.add_typer(app, name="fleet")


@hookimpl
def register_config() -> dict[str, type]:
    from loopctl_fleet.config import NAME, FleetConfig

    return {NAME: FleetConfig}
