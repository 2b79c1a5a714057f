"""A PostgreSQL server for the Postgres failure-memory tests.

``pg_server`` (session scope, one per xdist worker) is the server at
``LOOPCTL_TEST_POSTGRES_URL`` (a superuser URL; CI starts one) or else a throwaway cluster
started from Debian's binaries (``/usr/lib/postgresql/*/bin``): initdb without fsync, a private
socket directory, loopback on a free port, run as the ``postgres`` user through ``runuser``
when the tests run as root; stopped at the end of the session, and by the process's lifeline
(:func:`loopctl.testing.lifeline`) when the session is not let end (a SIGKILLed pytest). Without either the tests skip,
unless ``LOOPCTL_REQUIRE_POSTGRES=1``, when they fail.

``pg_url`` gives each test its own database, owned by a role with a password, as a
``postgresql://role:password@127.0.0.1:port/db`` URL (so a test can give a wrong password).

Use: ``from pg_testkit import pg_server, pg_url`` in a test module, and name them once at
module level (``FIXTURES = (pg_server, pg_url)``) so that pytest finds them and ruff sees them used.

Outside pytest (the benchmark): ``with running_server() as server:`` gives the same server, and
raises :class:`PgUnavailable` (with the reason) where there is none to be had.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import attrs
import pytest

from loopctl.testing import lifeline

ENV_URL = "LOOPCTL_TEST_POSTGRES_URL"
ENV_REQUIRE = "LOOPCTL_REQUIRE_POSTGRES"
NO_BINARIES = "no PostgreSQL server binaries: apt install postgresql"
NO_PSYCOPG = "psycopg is not installed: pip install 'loopctl-context-errors[postgres]'"
#: Where Debian puts each installed version's server binaries (the newest is used).
BINARIES_GLOB = "/usr/lib/postgresql/*/bin/initdb"


@attrs.frozen
class PgServer:
    """A running server: a superuser URL, and the password every test role gets."""

    admin_url: str
    host: str
    port: int
    role: str
    role_password: str

    def url(self, database: str, *, password: str | None = None, user: str | None = None) -> str:
        given = self.role_password if password is None else password
        return f"postgresql://{user or self.role}:{given}@{self.host}:{self.port}/{database}"

    def admin(self, database: str = "") -> Any:
        """An autocommit superuser connection (to ``database``, else the admin URL's)."""
        import psycopg

        url = self.admin_url
        if database:
            parts = urlsplit(url)
            url = urlunsplit(parts._replace(path=f"/{database}"))
        return psycopg.connect(url, autocommit=True, connect_timeout=10)


class PgUnavailable(Exception):
    """No PostgreSQL server can be had here; the message says why (a test skips with it)."""


def _unavailable(reason: str) -> None:
    if os.environ.get(ENV_REQUIRE) == "1":
        pytest.fail(f"{reason} (and {ENV_REQUIRE}=1)", pytrace=False)
    pytest.skip(reason)


def require_psycopg() -> None:
    """At the top of a test module, before importing the Postgres store: skip the module
    without psycopg (the plugin works without it), fail it when Postgres is required."""
    try:
        import psycopg  # noqa: F401 - only whether it imports
    except ImportError:
        if os.environ.get(ENV_REQUIRE) == "1":
            raise RuntimeError(f"{NO_PSYCOPG} (and {ENV_REQUIRE}=1)") from None
        pytest.skip(NO_PSYCOPG, allow_module_level=True)


def _binaries() -> Path | None:
    found = sorted(glob.glob(BINARIES_GLOB), key=_version_key)
    return Path(found[-1]).parent if found else None


def _version_key(path: str) -> tuple[int, ...]:
    version = Path(path).parent.parent.name
    return tuple(int(part) for part in version.split(".") if part.isdigit())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _Cluster:
    """A throwaway cluster in a private directory."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.as_postgres = os.geteuid() == 0
        self.root = Path(tempfile.mkdtemp(prefix="loopctl-pg."))
        self.password = secrets.token_hex(12)
        self.port = 0
        #: The server is stopped and its directory removed when this process ends, whatever
        #: ends it (a killed pytest runs no teardown): the lifeline's key, 0 once stopped.
        self.lifeline_key = lifeline().register(run=[self._stop_command()], remove=[self.root])

    def _command(self, *argv: str) -> list[str]:
        command = [str(self.bindir / argv[0]), *argv[1:]]
        return ["runuser", "-u", "postgres", "--", *command] if self.as_postgres else command

    def _stop_command(self) -> list[str]:
        return self._command("pg_ctl", "-D", str(self.root / "data"), "-m", "immediate", "-w",
                             "stop")  # fmt: skip

    def _run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self._command(*argv), capture_output=True, text=True, timeout=120)

    def postmaster_pid(self) -> int:
        """The running server's pid (its first line of ``postmaster.pid``)."""
        return int((self.root / "data" / "postmaster.pid").read_text().split()[0])

    def _own(self, path: Path) -> None:
        if self.as_postgres:
            shutil.chown(path, "postgres", "postgres")

    def start(self) -> str:
        self._own(self.root)
        pwfile = self.root / "pw"
        pwfile.write_text(self.password + "\n")
        pwfile.chmod(0o600)
        self._own(pwfile)
        data = self.root / "data"
        initdb = self._run(
            "initdb", "-D", str(data), "-U", "postgres", "-E", "UTF8", "--locale=C.UTF-8",
            "--no-sync", "--auth-local=trust", "--auth-host=scram-sha-256",
            f"--pwfile={pwfile}",
        )  # fmt: skip
        if initdb.returncode != 0:
            raise RuntimeError(f"initdb failed: {initdb.stderr.strip()}")
        for _attempt in range(5):
            self.port = free_port()
            options = (
                f"-k {self.root} -p {self.port} -c listen_addresses=127.0.0.1 -c fsync=off "
                "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
            )
            started = self._run(
                "pg_ctl", "-D", str(data), "-l", str(self.root / "log"), "-w", "-t", "60",
                "-o", options, "start",
            )  # fmt: skip
            if started.returncode == 0:
                # and should the stop command fail then, the server is ended by its pid
                kept = self.lifeline_key
                self.lifeline_key = lifeline().register(
                    run=[self._stop_command()], end=[self.postmaster_pid()], remove=[self.root]
                )
                lifeline().forget(kept)
                return f"postgresql://postgres:{self.password}@127.0.0.1:{self.port}/postgres"
        log = (self.root / "log").read_text(errors="replace")[-2000:]
        raise RuntimeError(f"pg_ctl start failed: {started.stderr.strip()}\n{log}")

    def stop(self) -> None:
        if (self.root / "data" / "postmaster.pid").exists():
            subprocess.run(self._stop_command(), capture_output=True, text=True, timeout=120)
        shutil.rmtree(self.root, ignore_errors=True)
        if self.lifeline_key:
            lifeline().forget(self.lifeline_key)
            self.lifeline_key = 0


def throwaway_cluster() -> tuple[_Cluster, str]:
    """A throwaway cluster from Debian's binaries and its superuser URL. Raises
    :class:`PgUnavailable` where there are none (or, as root, no way to run them), and
    RuntimeError when they fail; nothing is left running then."""
    bindir = _binaries()
    if bindir is None:
        raise PgUnavailable(NO_BINARIES)
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            raise PgUnavailable(
                "running as root and there is no `postgres` user to run the server"
            ) from None
        if shutil.which("runuser") is None:
            raise PgUnavailable("running as root and there is no `runuser` to run the server")
    cluster = _Cluster(bindir)
    try:
        return cluster, cluster.start()
    except Exception:
        cluster.stop()
        raise


def start_cluster() -> tuple[_Cluster, str]:
    """:func:`throwaway_cluster`, which skips (or fails, when Postgres is required) where
    there are no binaries."""
    try:
        return throwaway_cluster()
    except PgUnavailable as exc:
        _unavailable(str(exc))
        raise AssertionError("unreachable") from None


def _make_role(admin_url: str) -> tuple[str, str]:
    import psycopg
    from psycopg import sql

    role = f"loopctl_t_{secrets.token_hex(4)}"
    password = f"pw-{secrets.token_hex(8)}"
    with psycopg.connect(admin_url, autocommit=True, connect_timeout=10) as conn:
        conn.execute(
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                sql.Identifier(role), sql.Literal(password)
            )
        )
    return role, password


def _drop_role(server: PgServer) -> None:
    from psycopg import sql

    with server.admin() as conn:
        conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(server.role)))


@contextmanager
def running_server() -> Iterator[PgServer]:
    """The server at ``LOOPCTL_TEST_POSTGRES_URL``, else a throwaway cluster, with a role of
    its own; afterwards the role is dropped and the cluster stopped (whatever happened).
    Raises :class:`PgUnavailable` without psycopg or binaries."""
    try:
        import psycopg  # noqa: F401 - only whether it imports
    except ImportError:
        raise PgUnavailable(NO_PSYCOPG) from None
    cluster: _Cluster | None = None
    admin_url = os.environ.get(ENV_URL, "")
    if not admin_url:
        cluster, admin_url = throwaway_cluster()
    try:
        parts = urlsplit(admin_url)
        role, password = _make_role(admin_url)
        server = PgServer(
            admin_url=admin_url,
            host=parts.hostname or "127.0.0.1",
            port=parts.port or 5432,
            role=role,
            role_password=password,
        )
        yield server
        _drop_role(server)
    finally:
        if cluster is not None:
            cluster.stop()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    with ExitStack() as stack:
        try:
            server = stack.enter_context(running_server())
        except PgUnavailable as exc:
            _unavailable(str(exc))
            raise AssertionError("unreachable") from None
        yield server


@contextmanager
def database(server: PgServer) -> Iterator[str]:
    """A fresh database owned by the test role, dropped (with its connections) afterwards."""
    from psycopg import sql

    name = f"loopctl_t_{secrets.token_hex(6)}"
    with server.admin() as conn:
        # FILE_COPY (PostgreSQL 15+) makes an empty database in 150 ms instead of 250 ms
        faster = " STRATEGY FILE_COPY" if conn.info.server_version >= 150000 else ""
        conn.execute(
            sql.SQL("CREATE DATABASE {} OWNER {} TEMPLATE template0" + faster).format(
                sql.Identifier(name), sql.Identifier(server.role)
            )
        )
    try:
        yield name
    finally:
        _close_store_connections()
        with server.admin() as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """A URL (role and password) to a database of this test's own."""
    with database(pg_server) as name:
        yield pg_server.url(name)


def _close_store_connections() -> None:
    from loopctl_context_errors import store_postgres

    store_postgres.close_all()


def database_of(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


def dump(server: PgServer, url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every table of the database at ``url``, all rows, in a stable order."""
    from psycopg import sql

    with server.admin(database_of(url)) as conn:
        tables = [
            str(row[0])
            for row in conn.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = 'public' ORDER BY 1"
            )
        ]
        return {
            table: conn.execute(
                sql.SQL("SELECT * FROM {} ORDER BY 1, 2").format(sql.Identifier(table))
            ).fetchall()
            for table in tables
        }


def recount(server: PgServer, url: str) -> tuple[int, int, dict[str, int], dict[str, int]]:
    """(n_failures kept, rows counted, token_df kept, df recounted from the rows)."""
    with server.admin(database_of(url)) as conn:
        kept_n = conn.execute(
            "SELECT value::bigint FROM loopctl_memory_meta WHERE key = 'n_failures'"
        ).fetchone()
        rows = conn.execute("SELECT count(*) FROM loopctl_failures").fetchone()
        kept_df = dict(conn.execute("SELECT term, df FROM loopctl_token_df").fetchall())
        counted = dict(
            conn.execute(
                "SELECT t, count(*) FROM loopctl_failures, unnest(terms) AS t GROUP BY t"
            ).fetchall()
        )
    return int(kept_n[0]), int(rows[0]), kept_df, counted


def concurrent_writer(url: str, index: int, count: int) -> list[str]:
    """One of many processes at once: ``count`` failures (words in a shuffled order shared
    with the others), each followed by a query's reads; the errors met, as lines."""
    import random

    from loopctl_context_errors.store import NewFailure, StoreError, parse_location
    from loopctl_context_errors.store_postgres import PostgresStore

    store = PostgresStore(parse_location(url), timeout_s=5)
    rng = random.Random(index)
    vocabulary = [f"word{i}" for i in range(30)]
    errors: list[str] = []
    for n in range(count):
        terms = tuple(rng.sample(vocabulary, 8))
        row = NewFailure(
            signature=f"sig-{index}-{n}", category="TEST_FAILURE", rule="", stage="tests",
            project="shop", project_id="git:x/shop", project_path="", run_id=f"run-{index}",
            decisive_json="[]", terms=terms, now=time.time(),
        )  # fmt: skip
        try:
            store.add_failure(row, time.monotonic() + 5)
            store.term_stats(terms, time.monotonic() + 5)
            store.postings(terms[:3], 100, time.monotonic() + 5)
        except StoreError as exc:
            errors.append(f"{type(exc).__name__} ({exc.reason}): {exc}")
    store.close()
    return errors


def wait_until(predicate: Any, timeout: float = 30.0, interval: float = 0.02) -> Any:
    """``predicate()`` once it is truthy; AssertionError when it is not within ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout} s: {predicate}")
        time.sleep(interval)


__all__ = [
    "PgServer",
    "PgUnavailable",
    "concurrent_writer",
    "database",
    "database_of",
    "dump",
    "free_port",
    "pg_server",
    "pg_url",
    "recount",
    "require_psycopg",
    "running_server",
    "start_cluster",
    "throwaway_cluster",
    "wait_until",
]


class Proxy:
    """A TCP relay on 127.0.0.1 in front of the server; :meth:`cut` drops every connection and
    stops listening, as a database host that went away does (:meth:`restore` brings it back);
    :meth:`freeze` keeps the connections open but passes nothing more, as a stopped or
    partitioned server does."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.sockets: list[socket.socket] = []
        self.lock = threading.Lock()
        self.frozen = threading.Event()
        self.port = 0
        self._listen()

    def _listen(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", self.port))
        self.port = int(self.listener.getsockname()[1])
        threading.Thread(target=self._accept, args=(self.listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            with self.lock:
                self.sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                if not self.frozen.is_set():
                    sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_RDWR)

    def freeze(self) -> None:
        self.frozen.set()

    def cut(self) -> None:
        # a close alone leaves the socket listening while the accepting thread is blocked in
        # accept() (Linux): one more connection would get through
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        with self.lock:
            for sock in self.sockets:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            self.sockets.clear()

    def restore(self) -> None:
        """After :meth:`cut`: listen again on the same port, as a database host that is back."""
        self._listen()
