"""The Temporal dev server a test starts (the SDK spawns it as a child of the test process) ends
with the test process, whatever ends it: a SIGKILLed pytest runs no teardown."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fleet_testkit import alive

pytestmark = [
    pytest.mark.temporal,
    pytest.mark.timing,  # SIGKILL, then a watcher's teardown awaited
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]

#: A session that starts a dev server, says which process it is, and waits to be killed.
INNER = """
import asyncio, json, os, time
from pathlib import Path
from fleet_testkit import _dev_servers, dev_server


def test_holds_the_server():
    async def main():
        async with dev_server():
            Path(os.environ["OUT"]).write_text(json.dumps(sorted(_dev_servers())))
            time.sleep(1000)

    asyncio.run(main())
"""


def test_a_killed_pytest_takes_its_dev_server_with_it(tmp_path: Path) -> None:
    (tmp_path / "test_inner.py").write_text(INNER)
    out = tmp_path / "out.json"
    kit = str(Path(__file__).parent)
    env = {**os.environ, "OUT": str(out)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [kit, env.get("PYTHONPATH")]))
    inner = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_inner.py"],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not (out.exists() and out.read_text()):
            assert inner.poll() is None, "the inner session ended before it held the server"
            assert time.monotonic() < deadline, "the dev server never started"
            time.sleep(0.05)
        (server,) = json.loads(out.read_text())
        assert alive(server)
    finally:
        inner.send_signal(signal.SIGKILL)
        inner.wait()
    deadline = time.monotonic() + 60
    while alive(server):
        assert time.monotonic() < deadline, f"the dev server (pid {server}) outlived its pytest"
        time.sleep(0.05)
