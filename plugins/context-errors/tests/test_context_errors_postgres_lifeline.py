"""The Postgres server a test session starts ends with it, whatever ends it: a pytest that is
SIGKILLed (a cancelled CI job, an OOM kill) runs no teardown, and its server used to live on
under init."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pg_testkit
import pytest

from loopctl.testing import running

pytestmark = pytest.mark.timing  # SIGKILL, then a watcher's teardown awaited

#: A session that starts the server, says which process it is and where its files are, and
#: waits to be killed.
INNER = """
import json, os, time
from pathlib import Path
from pg_testkit import pg_server

FIXTURES = (pg_server,)


def test_holds_the_server(pg_server):
    with pg_server.admin() as conn:
        backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        stat = Path(f"/proc/{backend}/stat").read_text()
    postmaster = int(stat.rpartition(")")[2].split()[1])
    data = os.readlink(f"/proc/{postmaster}/cwd")
    Path(os.environ["OUT"]).write_text(json.dumps({"postmaster": postmaster, "data": data}))
    time.sleep(1000)
"""


def test_a_killed_pytest_takes_its_postgres_server_with_it(tmp_path: Path) -> None:
    pg_testkit.require_psycopg()
    if os.environ.get(pg_testkit.ENV_URL):
        pytest.skip(f"{pg_testkit.ENV_URL} names a server these tests do not start")
    if pg_testkit._binaries() is None:
        pg_testkit._unavailable(pg_testkit.NO_BINARIES)
    (tmp_path / "test_inner.py").write_text(INNER)
    out = tmp_path / "out.json"
    kit = str(Path(pg_testkit.__file__).parent)
    env = {k: v for k, v in os.environ.items() if k != pg_testkit.ENV_URL}
    env.update(OUT=str(out), PYTHONPATH=os.pathsep.join(filter(None, [kit, env.get("PYTHONPATH")])))
    inner = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_inner.py"],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        pg_testkit.wait_until(lambda: out.exists() or inner.poll() is not None, timeout=180)
        assert inner.poll() is None, "the inner session ended before it held the server"
        found = json.loads(out.read_text())
        assert running(found["postmaster"])
    finally:
        inner.send_signal(signal.SIGKILL)
        inner.wait()
    pg_testkit.wait_until(lambda: not running(found["postmaster"]), timeout=60)  # it ended
    pg_testkit.wait_until(lambda: not Path(found["data"]).exists(), timeout=60)  # and its files
