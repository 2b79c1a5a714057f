"""Connecting to the fleet's Temporal server: flags over the environment over the defaults.

The settings come, each one from the first place that has it: the command's flags
(``--address``, ``--namespace``, ``--tls``, ``--api-key-env NAME``, ``--tls-cert`` …), then
Temporal's own environment configuration (``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``,
``TEMPORAL_API_KEY``, ``TEMPORAL_TLS_*``, ``TEMPORAL_PROFILE`` and the profiles file
``TEMPORAL_CONFIG_FILE``: :mod:`temporalio.envconfig`, as the Temporal CLI reads them), then the
local dev server ``loopctl fleet up`` starts (``127.0.0.1:7233``, namespace ``default``).

An API key is never a flag's value (a command line is visible to every user of the machine and
kept in shell histories): ``--api-key-env NAME`` names the environment variable that holds it.
A server that cannot be reached is one :class:`ConnectError` line that says what to do.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from temporalio.client import Client

DEFAULT_ADDRESS = "127.0.0.1:7233"
DEFAULT_NAMESPACE = "default"


class ConnectError(RuntimeError):
    """The server cannot be reached or the connection settings are wrong: one line."""


@dataclasses.dataclass
class ConnectOptions:
    """How to reach the server; ``None`` leaves a setting to the environment or the default."""

    address: str | None = None
    namespace: str | None = None
    tls: bool | None = None
    #: The environment variable that holds the API key (never the key itself).
    api_key_env: str | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_ca: Path | None = None
    identity: str | None = None
    #: Read TEMPORAL_* and the profiles file (off for the worker ``fleet up`` starts).
    use_env: bool = True


def connect_kwargs(options: ConnectOptions) -> dict[str, Any]:
    """The keyword arguments of :meth:`temporalio.client.Client.connect` for ``options``."""
    from temporalio.client import TLSConfig

    kwargs: dict[str, Any] = {}
    if options.use_env:
        kwargs.update(_env_config())
    if options.address:
        kwargs["target_host"] = options.address
    kwargs.setdefault("target_host", DEFAULT_ADDRESS)
    if options.namespace:
        kwargs["namespace"] = options.namespace
    kwargs.setdefault("namespace", DEFAULT_NAMESPACE)
    if options.api_key_env:
        key = os.environ.get(options.api_key_env)
        if not key:
            raise ConnectError(f"--api-key-env {options.api_key_env}: that variable is not set")
        kwargs["api_key"] = key
    files = (options.tls_cert, options.tls_key, options.tls_ca)
    if any(files):
        if bool(options.tls_cert) != bool(options.tls_key):
            raise ConnectError("--tls-cert and --tls-key go together (a client certificate)")
        kwargs["tls"] = TLSConfig(
            client_cert=_read(options.tls_cert, "--tls-cert"),
            client_private_key=_read(options.tls_key, "--tls-key"),
            server_root_ca_cert=_read(options.tls_ca, "--tls-ca"),
        )
    elif options.tls is not None:
        kwargs["tls"] = options.tls
    if options.identity:
        kwargs["identity"] = options.identity
    return kwargs


async def connect(options: ConnectOptions) -> Client:
    """A connected client, or :class:`ConnectError` saying in one line why not."""
    from temporalio.client import Client

    kwargs = connect_kwargs(options)
    try:
        return await Client.connect(**kwargs)
    except RuntimeError as exc:
        raise ConnectError(unreachable(kwargs["target_host"], exc)) from None


def unreachable(address: str, exc: BaseException) -> str:
    """One line for a server that did not answer at ``address``."""
    text = str(exc)
    reason = next((why for pattern, why in _REASONS if re.search(pattern, text, re.I)), None)
    if reason is None:
        reason = text.removeprefix("Failed client connect: ").splitlines()[0][:200]
    hint = (
        ": start one with `loopctl fleet up`"
        if _is_local(address)
        else " (check --address, --tls and the API key)"
    )
    return f"no Temporal server at {address} ({reason}){hint}"


_REASONS = (
    (r"connection ?refused", "connection refused"),
    (r"timed? ?out|deadline", "timed out"),
    (r"dns error|failed to lookup|name or service not known", "unknown host"),
    (r"invalid ?certificate|certificate|tls|handshake", "TLS failed"),
    (r"unauthenticated|permission ?denied|api key", "not authorized"),
)


def _is_local(address: str) -> bool:
    host = address.rpartition(":")[0] or address
    return host in ("127.0.0.1", "localhost", "::1", "[::1]")


def _env_config() -> dict[str, Any]:
    from temporalio.envconfig import ClientConfig

    try:
        found = dict(ClientConfig.load_client_connect_config())
    except Exception as exc:  # noqa: BLE001 - a broken profile file is the user's to fix: say so
        raise ConnectError(f"Temporal's environment configuration: {exc}") from None
    return {key: value for key, value in found.items() if value not in (None, "")}


def _read(path: Path | None, flag: str) -> bytes | None:
    if path is None:
        return None
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ConnectError(f"{flag} {path}: {exc.strerror or exc}") from None
