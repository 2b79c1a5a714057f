"""Connecting to the fleet's Temporal server: flags over the environment over the defaults.

The settings come, each one from the first place that has it: the command's flags
(``--address``, ``--namespace``, ``--tls``, ``--api-key-env NAME``, ``--tls-cert`` …), then
Temporal's own environment configuration (``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``,
``TEMPORAL_API_KEY``, ``TEMPORAL_TLS_*``, ``TEMPORAL_PROFILE`` and the profiles file
``TEMPORAL_CONFIG_FILE``: :mod:`temporalio.envconfig`, as the Temporal CLI reads them), then
``[plugins.fleet]`` in loopctl.toml (:class:`loopctl_fleet.config.FleetConfig`), then the local
dev server ``loopctl fleet up`` starts (``127.0.0.1:7233``, namespace ``default``).

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

    from loopctl_fleet.config import FleetConfig

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
    #: ``[plugins.fleet]`` of the project's loopctl.toml.
    config: FleetConfig | None = None
    #: The fleet the command names: with no server named anywhere, the one ``fleet up`` started
    #: it on here; else the default server, which must hold that fleet (``check_fleet``).
    fleet: str | None = None
    #: Refuse a default server that holds no such fleet (off for a worker: it joins one).
    verify_fleet: bool = True


def connect_kwargs(options: ConnectOptions) -> dict[str, Any]:
    """The keyword arguments of :meth:`temporalio.client.Client.connect` for ``options``."""
    return _resolved(options)[0]


def _resolved(options: ConnectOptions) -> tuple[dict[str, Any], bool]:
    """The keyword arguments, and whether the address is the default one (named nowhere)."""
    kwargs: dict[str, Any] = {}
    if options.config is not None:
        kwargs.update(_file_config(options.config))
    if options.use_env:
        kwargs.update(_env_config())
    if options.address:
        kwargs["target_host"] = options.address
    if "target_host" not in kwargs and options.fleet:
        local = _local_fleet(options.fleet)
        if local is not None:
            kwargs["target_host"] = local["address"]
            kwargs.setdefault("namespace", local.get("namespace") or DEFAULT_NAMESPACE)
    defaulted = "target_host" not in kwargs
    kwargs.setdefault("target_host", DEFAULT_ADDRESS)
    if options.namespace:
        kwargs["namespace"] = options.namespace
    kwargs.setdefault("namespace", DEFAULT_NAMESPACE)
    if options.api_key_env:
        kwargs["api_key"] = _api_key(options.api_key_env, "--api-key-env")
    tls = _tls_files(options.tls_cert, options.tls_key, options.tls_ca, _FLAGS)
    if tls is not None:
        kwargs["tls"] = tls
    elif options.tls is not None:
        kwargs["tls"] = options.tls
    if options.identity:
        kwargs["identity"] = options.identity
    return kwargs, defaulted


async def connect(options: ConnectOptions) -> Client:
    """A connected client, or :class:`ConnectError` saying in one line why not. With no server
    named anywhere, the fleet named must be on the default server: never someone else's."""
    from temporalio.client import Client

    kwargs, defaulted = _resolved(options)
    checked = options.fleet if defaulted and options.verify_fleet else None
    try:
        client = await Client.connect(**kwargs)
    except RuntimeError as exc:
        message = unreachable(kwargs["target_host"], exc)
        if checked:
            message += (
                f" (fleet {checked!r} was never started here: `loopctl fleet up --name {checked}`)"
            )
        raise ConnectError(message) from None
    if checked:
        await check_fleet(client, checked)
    return client


async def check_fleet(client: Client, fleet: str) -> None:
    """:class:`ConnectError` unless the server holds ``fleet``: a worker polls its task queue,
    or its ledger (made by the first ``submit`` or ``limits``) is there."""
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
    from temporalio.service import RPCError

    from loopctl_fleet.ledger import ledger_id
    from loopctl_fleet.service import task_queue

    queue = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace, task_queue=TaskQueue(name=task_queue(fleet))
        )
    )
    if queue.pollers:
        return
    try:
        await client.get_workflow_handle(ledger_id(fleet)).describe()
        return
    except RPCError:
        pass
    address = client.service_client.config.target_host
    raise ConnectError(
        f"no fleet {fleet!r} on the Temporal server at {address} (no worker polls it, nothing "
        f"was submitted to it), and it was never started on this machine: start it with "
        f"`loopctl fleet up --name {fleet}`, or name its server with --address"
    )


def _local_fleet(fleet: str) -> dict[str, Any] | None:
    from loopctl_fleet.server import ServerError
    from loopctl_fleet.service import local_server

    try:
        return local_server(fleet)
    except ServerError as exc:
        raise ConnectError(str(exc)) from None


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


def _file_config(config: FleetConfig) -> dict[str, Any]:
    where = "loopctl.toml: plugins.fleet."
    found: dict[str, Any] = {}
    if config.address:
        found["target_host"] = config.address
    if config.namespace:
        found["namespace"] = config.namespace
    if config.api_key_env:
        found["api_key"] = _api_key(config.api_key_env, f"{where}api_key_env")
        found["tls"] = True
    cert, key, ca = (
        Path(name) if name else None for name in (config.tls_cert, config.tls_key, config.tls_ca)
    )
    tls = _tls_files(
        cert, key, ca, tuple(f"{where}{name}" for name in ("tls_cert", "tls_key", "tls_ca"))
    )
    if tls is not None:
        found["tls"] = tls
    elif config.tls is not None:
        found["tls"] = config.tls
    return found


def _api_key(variable: str, where: str) -> str:
    key = os.environ.get(variable)
    if not key:
        raise ConnectError(f"{where} {variable}: that variable is not set")
    return key


_FLAGS = ("--tls-cert", "--tls-key", "--tls-ca")


def _tls_files(cert: Path | None, key: Path | None, ca: Path | None, names: tuple[str, ...]) -> Any:
    """A TLSConfig from the PEM files given (None: none given); ``names`` say where each was."""
    from temporalio.client import TLSConfig

    if not (cert or key or ca):
        return None
    if bool(cert) != bool(key):
        raise ConnectError(f"{names[0]} and {names[1]} go together (a client certificate)")
    return TLSConfig(
        client_cert=_read(cert, names[0]),
        client_private_key=_read(key, names[1]),
        server_root_ca_cert=_read(ca, names[2]),
    )


def _read(path: Path | None, flag: str) -> bytes | None:
    if path is None:
        return None
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ConnectError(f"{flag} {path}: {exc.strerror or exc}") from None
