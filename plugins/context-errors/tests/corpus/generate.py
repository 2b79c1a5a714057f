"""Generate the labelled corpus of REAL tool output that the categorizer is measured on.

Every case is a small scenario (a program, a test, a config file) written so that it fails in
one known way; the label is that intended way, decided when the scenario was written, never by
looking at what the categorizer says. The generator runs the real tool (Python, pytest, unittest,
mypy, ruff, node, node --test, jest, tsc, npm, cargo, rustc, javac/java, bash and coreutils) in
``/tmp/loopctl-corpus/<id>`` and stores what it printed (stdout and stderr merged, as loopctl's
test runner merges them) in ``cases/<id>.log``; ``manifest.json`` records the label, the tool,
its version, the command and the exit code. Nothing in ``cases/`` is written by hand.

    python plugins/context-errors/tests/corpus/generate.py            # every case
    python plugins/context-errors/tests/corpus/generate.py py-file    # cases whose id starts so

Needs: node/npm (jest and typescript are installed with npm into ~/.cache/loopctl-corpus/npm),
cargo/rustc, a JDK, gcc, curl, setpriv, and a Python with pytest, mypy and ruff (the interpreter
running this script, or $CORPUS_PYTHON). Network: only 127.0.0.1 (small local servers below).
The ecosystem rounds (``e-…``, ``e2-…``) are in ``ecosystems.py``. The ``holdout`` batch (ids
starting with ``h-``) was written after the rules were frozen, to measure how they generalise.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import attrs
import ecosystems

HERE = Path(__file__).resolve().parent
CASES_DIR = HERE / "cases"
MANIFEST = HERE / "manifest.json"
WORK = Path("/tmp/loopctl-corpus")
NPM_TOOLS = Path(os.path.expanduser("~/.cache/loopctl-corpus/npm"))
PY = os.environ.get("CORPUS_PYTHON", sys.executable)
CASE_TIMEOUT_S = 90

CATEGORIES = (
    "FILE_ACCESS",
    "FUNCTION_ERROR",
    "SYNTAX_ERROR",
    "ASSERTION_FAILURE",
    "TYPE_ERROR",
    "TIMEOUT",
    "MEMORY_ERROR",
    "NETWORK_ERROR",
    "RESOURCE_ERROR",
    "UNKNOWN",
)


@attrs.define
class Case:
    id: str
    label: str
    tool: str
    cmd: str
    files: dict[str, str] = attrs.Factory(dict)
    note: str = ""
    #: Shared set-up (a cargo project, a jest config) copied in before the files.
    base: str = ""
    #: The ecosystem of an ``e-…`` case (``ecosystems.py``), reported on its own.
    ecosystem: str = ""

    def __attrs_post_init__(self) -> None:
        assert self.label in CATEGORIES, self.label


def d(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


# --- local servers for network and timeout scenarios (127.0.0.1 only) -------------------------


def _serve(kind: str) -> int:
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []

    def loop() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            if kind == "silent":  # accept and never answer: read timeouts
                held.append(conn)
            elif kind == "reset":  # answer with a TCP RST: connection reset
                conn.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
                )
                try:
                    conn.recv(1024)
                except OSError:
                    pass
                conn.close()
            elif kind == "close":  # read the request, close without a response
                try:
                    conn.recv(65536)
                except OSError:
                    pass
                conn.close()

    threading.Thread(target=loop, daemon=True).start()
    return int(server.getsockname()[1])


def _free_port() -> int:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = int(probe.getsockname()[1])
    probe.close()
    return port


# --- shared bases ------------------------------------------------------------------------------

CARGO_TOML = d(
    """
    [package]
    name = "corpus"
    version = "0.1.0"
    edition = "2021"

    [dependencies]
    """
)

JEST_PACKAGE = json.dumps(
    {"name": "corpus", "version": "1.0.0", "private": True, "scripts": {"test": "jest"}}, indent=2
)

BASES: dict[str, dict[str, str]] = {
    "cargo": {"Cargo.toml": CARGO_TOML},
    "jest": {"package.json": JEST_PACKAGE},
    "tsc": {
        "tsconfig.json": json.dumps(
            {"compilerOptions": {"strict": True, "noEmit": True, "target": "es2020"}}, indent=2
        )
    },
}

JEST = f"{NPM_TOOLS}/node_modules/.bin/jest --ci --colors=false"
TSC = f"{NPM_TOOLS}/node_modules/.bin/tsc -p . --pretty false"
NOBODY = "setpriv --reuid=65534 --regid=65534 --clear-groups"


def cases() -> list[Case]:
    out: list[Case] = []
    add = out.append

    # ---------------------------------------------------------------- Python scripts
    def py(cid: str, label: str, code: str, note: str = "", args: str = "") -> None:
        add(Case(cid, label, "python", f"{PY} {args}main.py", {"main.py": d(code)}, note))

    py(
        "py-file-missing",
        "FILE_ACCESS",
        """
        import json

        def load_settings(path):
            with open(path) as handle:
                return json.load(handle)

        print(load_settings("config/settings.json"))
        """,
    )
    py(
        "py-file-isdir",
        "FILE_ACCESS",
        """
        import os
        os.makedirs("data", exist_ok=True)
        text = open("data").read()
        """,
    )
    py(
        "py-file-notadir",
        "FILE_ACCESS",
        """
        open("notes.txt", "w").write("x")
        open("notes.txt/inner.txt").read()
        """,
    )
    add(
        Case(
            "py-file-permission",
            "FILE_ACCESS",
            "python",
            f"mkdir -p locked && chmod 700 locked && echo secret > locked/a.txt && {NOBODY} {PY} main.py",
            {"main.py": "print(open('locked/a.txt').read())\n"},
            "runs as nobody: root would be allowed",
        )
    )
    py(
        "py-file-shutil",
        "FILE_ACCESS",
        """
        import shutil
        shutil.copy("build/output.bin", "dist/output.bin")
        """,
    )
    py(
        "py-file-readonly-fs",
        "FILE_ACCESS",
        """
        with open("/sys/kernel/loopctl-corpus", "w") as f:
            f.write("x")
        """,
    )
    py(
        "py-func-nameerror",
        "FUNCTION_ERROR",
        """
        def main():
            total = compute_total([1, 2, 3])
            print(total)

        main()
        """,
    )
    py(
        "py-func-module-attr",
        "FUNCTION_ERROR",
        """
        import os.path
        print(os.path.joinpath("a", "b"))
        """,
    )
    py(
        "py-func-importname",
        "FUNCTION_ERROR",
        """
        from json import load_file
        """,
    )
    py(
        "py-func-method",
        "FUNCTION_ERROR",
        """
        name = "loopctl"
        print(name.titlecase())
        """,
    )
    py(
        "py-syntax-colon",
        "SYNTAX_ERROR",
        """
        def greet(name)
            return "hi " + name
        """,
    )
    py(
        "py-syntax-indent",
        "SYNTAX_ERROR",
        """
        def f():
            x = 1
              return x
        """,
    )
    py(
        "py-syntax-unterminated",
        "SYNTAX_ERROR",
        """
        message = "hello
        print(message)
        """,
    )
    py(
        "py-syntax-json",
        "SYNTAX_ERROR",
        """
        import json
        raw = '{"name": "demo", "items": [1, 2,]}'
        print(json.loads(raw))
        """,
    )
    py(
        "py-syntax-toml",
        "SYNTAX_ERROR",
        """
        try:
            import tomllib
        except ImportError:
            import tomli as tomllib
        print(tomllib.loads('[tool]\\nname = "x\\nother = 1\\n'))
        """,
    )
    py(
        "py-assert-plain",
        "ASSERTION_FAILURE",
        """
        def add(a, b):
            return a - b

        assert add(2, 3) == 5, f"add(2, 3) returned {add(2, 3)}"
        """,
    )
    py(
        "py-type-operand",
        "TYPE_ERROR",
        """
        count = "3"
        print(count + 1)
        """,
    )
    py(
        "py-type-missing-arg",
        "TYPE_ERROR",
        """
        def area(width, height):
            return width * height

        print(area(3))
        """,
    )
    py(
        "py-type-none-subscript",
        "TYPE_ERROR",
        """
        def find(items, key):
            for item in items:
                if item["id"] == key:
                    return item

        print(find([{"id": 1}], 2)["name"])
        """,
    )
    py(
        "py-type-none-attr",
        "TYPE_ERROR",
        """
        import re
        match = re.match(r"(\\d+)", "abc")
        print(match.group(1))
        """,
    )
    py(
        "py-type-int-literal",
        "TYPE_ERROR",
        """
        port = int("80a")
        """,
    )
    py(
        "py-timeout-subprocess",
        "TIMEOUT",
        """
        import subprocess, sys
        subprocess.run([sys.executable, "-c", "import time; time.sleep(5)"], timeout=0.3)
        """,
    )
    py(
        "py-timeout-socket",
        "TIMEOUT",
        """
        import os, socket
        conn = socket.create_connection(("127.0.0.1", int(os.environ["PORT_SILENT"])), timeout=0.3)
        conn.sendall(b"PING\\r\\n")
        print(conn.recv(100))
        """,
    )
    py(
        "py-timeout-asyncio",
        "TIMEOUT",
        """
        import asyncio

        async def fetch():
            await asyncio.sleep(5)

        async def main():
            await asyncio.wait_for(fetch(), timeout=0.2)

        asyncio.run(main())
        """,
    )
    py(
        "py-timeout-futures",
        "TIMEOUT",
        """
        import time
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(1) as pool:
            future = pool.submit(time.sleep, 1)
            future.result(timeout=0.1)
        """,
    )
    py(
        "py-mem-huge",
        "MEMORY_ERROR",
        """
        buffer = bytearray(10**14)
        """,
    )
    py(
        "py-mem-recursion",
        "MEMORY_ERROR",
        """
        def depth(n):
            return depth(n + 1) + 1

        depth(0)
        """,
    )
    py(
        "py-mem-segfault",
        "MEMORY_ERROR",
        """
        import ctypes
        ctypes.string_at(0)
        """,
        args="-X faulthandler ",
    )
    py(
        "py-net-refused",
        "NETWORK_ERROR",
        """
        import os, urllib.request
        url = f"http://127.0.0.1:{os.environ['PORT_REFUSED']}/health"
        print(urllib.request.urlopen(url, timeout=5).read())
        """,
    )
    py(
        "py-net-socket-refused",
        "NETWORK_ERROR",
        """
        import os, socket
        socket.create_connection(("127.0.0.1", int(os.environ["PORT_REFUSED"])))
        """,
    )
    py(
        "py-net-reset",
        "NETWORK_ERROR",
        """
        import os, socket
        conn = socket.create_connection(("127.0.0.1", int(os.environ["PORT_RESET"])))
        conn.sendall(b"hello")
        print(conn.recv(100))
        conn.sendall(b"again")
        print(conn.recv(100))
        """,
    )
    py(
        "py-net-remote-closed",
        "NETWORK_ERROR",
        """
        import http.client, os
        conn = http.client.HTTPConnection("127.0.0.1", int(os.environ["PORT_CLOSE"]), timeout=5)
        conn.request("GET", "/api/items")
        print(conn.getresponse().status)
        """,
    )
    py(
        "py-res-module",
        "RESOURCE_ERROR",
        """
        import yaml_schema_toolkit_corpus
        """,
    )
    py(
        "py-res-disk-full",
        "RESOURCE_ERROR",
        """
        with open("/dev/full", "w") as out:
            out.write("x" * 10000)
        """,
    )
    py(
        "py-res-emfile",
        "RESOURCE_ERROR",
        """
        import resource
        resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32))
        handles = [open("main.py") for _ in range(100)]
        """,
    )
    py(
        "py-res-addrinuse",
        "RESOURCE_ERROR",
        """
        import socket
        first = socket.socket()
        first.bind(("127.0.0.1", 0))
        first.listen()
        second = socket.socket()
        second.bind(first.getsockname())
        """,
    )
    py(
        "py-unknown-keyerror",
        "UNKNOWN",
        """
        prices = {"apple": 3}
        print(prices["pear"])
        """,
    )
    py(
        "py-unknown-index",
        "UNKNOWN",
        """
        items = [1, 2, 3]
        print(items[7])
        """,
    )
    py(
        "py-unknown-zerodiv",
        "UNKNOWN",
        """
        def average(values):
            return sum(values) / len(values)

        print(average([]))
        """,
    )
    py(
        "py-unknown-custom",
        "UNKNOWN",
        """
        class InsufficientFunds(Exception):
            pass

        raise InsufficientFunds("balance 10 is below 25")
        """,
    )
    py(
        "py-chained-file",
        "FILE_ACCESS",
        """
        class ConfigError(Exception):
            pass

        def load(path):
            try:
                return open(path).read()
            except OSError as exc:
                raise ConfigError(f"cannot load {path}") from exc

        load("app.cfg")
        """,
        "the decisive exception is the cause, not the wrapper",
    )

    # ---------------------------------------------------------------- pytest
    def pt(cid: str, label: str, files: dict[str, str], note: str = "", args: str = "") -> None:
        add(
            Case(
                cid,
                label,
                "pytest",
                f"{PY} -m pytest -p no:cacheprovider {args}",
                {k: d(v) for k, v in files.items()},
                note,
            )
        )

    pt(
        "pt-assert-eq",
        "ASSERTION_FAILURE",
        {
            "calc.py": "def add(a, b):\n    return a - b\n",
            "test_calc.py": """
            from calc import add

            def test_add():
                assert add(2, 3) == 5

            def test_add_zero():
                assert add(0, 0) == 0
            """,
        },
    )
    pt(
        "pt-assert-str",
        "ASSERTION_FAILURE",
        {
            "test_greet.py": """
            def greet(name):
                return "Hello " + name + "!"

            def test_greet():
                assert greet("Ada") == "Hello, Ada!"
            """
        },
        args="-q",
    )
    pt(
        "pt-assert-dict",
        "ASSERTION_FAILURE",
        {
            "test_cfg.py": """
            def parse(text):
                return dict(line.split("=") for line in text.splitlines())

            def test_parse():
                assert parse("a=1\\nb=2") == {"a": "1", "b": "3"}
            """
        },
        args="-vv",
    )
    pt(
        "pt-raises",
        "ASSERTION_FAILURE",
        {
            "test_val.py": """
            import pytest

            def validate(age):
                return age

            def test_negative_age_rejected():
                with pytest.raises(ValueError):
                    validate(-1)
            """
        },
    )
    pt(
        "pt-approx",
        "ASSERTION_FAILURE",
        {
            "test_avg.py": """
            import pytest

            def mean(xs):
                return sum(xs) / (len(xs) + 1)

            def test_mean():
                assert mean([1.0, 2.0, 3.0]) == pytest.approx(2.0)
            """
        },
        args="-q --tb=short",
    )
    pt(
        "pt-file",
        "FILE_ACCESS",
        {
            "test_data.py": """
            from pathlib import Path

            def test_fixture_file():
                data = Path("tests/fixtures/users.csv").read_text()
                assert "alice" in data
            """
        },
    )
    pt(
        "pt-func-name",
        "FUNCTION_ERROR",
        {
            "shop.py": "def total(items):\n    return sum(price(i) for i in items)\n",
            "test_shop.py": """
            from shop import total

            def test_total():
                assert total([1, 2]) == 3
            """,
        },
    )
    pt(
        "pt-func-fixture",
        "FUNCTION_ERROR",
        {
            "test_db.py": """
            def test_query(db_session):
                assert db_session.query("x") == []
            """
        },
    )
    pt(
        "pt-func-attr",
        "FUNCTION_ERROR",
        {
            "mathx.py": "def square(x):\n    return x * x\n",
            "test_mathx.py": """
            import mathx

            def test_cube():
                assert mathx.cube(2) == 8
            """,
        },
        args="-q",
    )
    pt(
        "pt-type",
        "TYPE_ERROR",
        {
            "report.py": "def line(name, count):\n    return name + ': ' + count\n",
            "test_report.py": """
            from report import line

            def test_line():
                assert line("errors", 3) == "errors: 3"
            """,
        },
    )
    pt(
        "pt-type-args",
        "TYPE_ERROR",
        {
            "test_user.py": """
            class User:
                def __init__(self, name, email):
                    self.name = name
                    self.email = email

            def test_user():
                user = User("ada")
                assert user.name == "ada"
            """
        },
        args="-q",
    )
    pt(
        "pt-syntax",
        "SYNTAX_ERROR",
        {
            "parser.py": "def parse(text):\n    return [int(x) for x in text.split(',')\n",
            "test_parser.py": """
            from parser import parse

            def test_parse():
                assert parse("1,2") == [1, 2]
            """,
        },
    )
    pt(
        "pt-syntax-testfile",
        "SYNTAX_ERROR",
        {
            "test_broken.py": """
            def test_one():
                value = {"a": 1
                assert value
            """
        },
        args="-q",
    )
    pt(
        "pt-res-module",
        "RESOURCE_ERROR",
        {
            "test_http.py": """
            import responses_mock_corpus_toolkit

            def test_get():
                assert responses_mock_corpus_toolkit
            """
        },
    )
    pt(
        "pt-timeout",
        "TIMEOUT",
        {
            "test_worker.py": """
            import subprocess, sys

            def test_worker_finishes():
                subprocess.run([sys.executable, "-c", "import time; time.sleep(3)"], timeout=0.2, check=True)
            """
        },
    )
    pt(
        "pt-net",
        "NETWORK_ERROR",
        {
            "test_api.py": """
            import os, urllib.request

            def test_health():
                port = os.environ["PORT_REFUSED"]
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=3) as r:
                    assert r.status == 200
            """
        },
        args="-q",
    )
    pt(
        "pt-mem",
        "MEMORY_ERROR",
        {
            "test_tree.py": """
            class Node:
                def __init__(self):
                    self.parent = self

                def root(self):
                    return self.parent.root() if self.parent else self

            def test_root():
                assert Node().root()
            """
        },
        args="-q --tb=line",
    )
    pt(
        "pt-unknown-key",
        "UNKNOWN",
        {
            "test_inv.py": """
            STOCK = {"apple": 3}

            def test_stock():
                assert STOCK["pear"] == 0
            """
        },
    )
    pt(
        "pt-mixed-assert-first",
        "ASSERTION_FAILURE",
        {
            "test_mixed.py": """
            def test_a():
                assert [1, 2, 3] == [1, 2, 4]

            def test_b():
                assert {"x": 1}.get("x") == 2
            """
        },
    )

    # ---------------------------------------------------------------- unittest
    def ut(cid: str, label: str, body: str, note: str = "") -> None:
        add(
            Case(
                cid,
                label,
                "unittest",
                f"{PY} -m unittest -v test_mod",
                {"test_mod.py": d(body)},
                note,
            )
        )

    ut(
        "ut-assert-equal",
        "ASSERTION_FAILURE",
        """
        import unittest

        def slug(title):
            return title.lower()

        class SlugTest(unittest.TestCase):
            def test_slug(self):
                self.assertEqual(slug("Hello World"), "hello-world")
        """,
    )
    ut(
        "ut-assert-true",
        "ASSERTION_FAILURE",
        """
        import unittest

        class FlagTest(unittest.TestCase):
            def test_enabled(self):
                flags = {"beta": False}
                self.assertTrue(flags["beta"], "beta flag should be on")
        """,
    )
    ut(
        "ut-file",
        "FILE_ACCESS",
        """
        import unittest

        class LoadTest(unittest.TestCase):
            def test_load(self):
                with open("fixtures/sample.txt") as f:
                    self.assertIn("x", f.read())
        """,
    )
    ut(
        "ut-type",
        "TYPE_ERROR",
        """
        import unittest

        class SumTest(unittest.TestCase):
            def test_sum(self):
                self.assertEqual(sum(["1", "2"]), 3)
        """,
    )
    ut(
        "ut-func",
        "FUNCTION_ERROR",
        """
        import unittest

        class Helper:
            pass

        class HelperTest(unittest.TestCase):
            def test_run(self):
                self.assertEqual(Helper().run(), 1)
        """,
    )

    # ---------------------------------------------------------------- mypy
    def my(cid: str, label: str, code: str, note: str = "") -> None:
        add(
            Case(
                cid,
                label,
                "mypy",
                f"{PY} -m mypy --strict --no-incremental --cache-dir=/dev/null app.py",
                {"app.py": d(code)},
                note,
            )
        )

    my(
        "mypy-assign",
        "TYPE_ERROR",
        """
        def count() -> int:
            total: int = "0"
            return total
        """,
    )
    my(
        "mypy-arg",
        "TYPE_ERROR",
        """
        def greet(name: str) -> str:
            return "hi " + name

        greet(42)
        """,
    )
    my(
        "mypy-return",
        "TYPE_ERROR",
        """
        def ratio(a: int, b: int) -> int:
            return a / b
        """,
    )
    my(
        "mypy-union-attr",
        "TYPE_ERROR",
        """
        from typing import Optional

        def shout(text: Optional[str]) -> str:
            return text.upper()
        """,
    )
    my(
        "mypy-call-arg",
        "TYPE_ERROR",
        """
        def area(w: int, h: int) -> int:
            return w * h

        area(1, 2, 3)
        """,
    )
    my(
        "mypy-name",
        "FUNCTION_ERROR",
        """
        def main() -> None:
            print(format_report())
        """,
    )
    my(
        "mypy-attr",
        "FUNCTION_ERROR",
        """
        import os

        def home() -> str:
            return os.get_home_directory()
        """,
    )
    my(
        "mypy-import",
        "RESOURCE_ERROR",
        """
        import fancy_corpus_missing_lib

        def run() -> None:
            fancy_corpus_missing_lib.go()
        """,
    )
    my(
        "mypy-syntax",
        "SYNTAX_ERROR",
        """
        def broken(:
            pass
        """,
    )

    # ---------------------------------------------------------------- ruff
    def rf(cid: str, label: str, code: str, note: str = "") -> None:
        add(
            Case(
                cid,
                label,
                "ruff",
                f"{PY} -m ruff check --no-cache --isolated --select E,F app.py",
                {"app.py": d(code)},
                note,
            )
        )

    rf(
        "ruff-syntax",
        "SYNTAX_ERROR",
        """
        def f(x:
            return x
        """,
    )
    rf(
        "ruff-undefined",
        "FUNCTION_ERROR",
        """
        def main():
            return build_index()
        """,
    )
    rf(
        "ruff-unused",
        "UNKNOWN",
        """
        import os
        import sys

        print(sys.argv)
        """,
        "a style finding has no category of its own",
    )

    # ---------------------------------------------------------------- node scripts
    def nd(cid: str, label: str, code: str, note: str = "", flags: str = "") -> None:
        add(Case(cid, label, "node", f"node {flags}main.js", {"main.js": d(code)}, note))

    nd(
        "node-file-enoent",
        "FILE_ACCESS",
        """
        const fs = require('fs');
        const config = JSON.parse(fs.readFileSync('config/app.json', 'utf8'));
        console.log(config);
        """,
    )
    nd(
        "node-file-require-relative",
        "FILE_ACCESS",
        """
        const helpers = require('./lib/helpers');
        helpers.run();
        """,
    )
    nd(
        "node-file-eisdir",
        "FILE_ACCESS",
        """
        const fs = require('fs');
        fs.mkdirSync('out', { recursive: true });
        fs.writeFileSync('out', 'data');
        """,
    )
    nd(
        "node-func-reference",
        "FUNCTION_ERROR",
        """
        function main() {
          const total = computeTotal([1, 2, 3]);
          console.log(total);
        }
        main();
        """,
    )
    nd(
        "node-func-notfn",
        "FUNCTION_ERROR",
        """
        const user = { name: 'ada' };
        console.log(user.getName());
        """,
    )
    nd(
        "node-syntax",
        "SYNTAX_ERROR",
        """
        function add(a, b) {
          return a + b;
        }}
        console.log(add(1, 2));
        """,
    )
    nd(
        "node-syntax-json",
        "SYNTAX_ERROR",
        """
        const raw = '{"name": "demo", "tags": ["a", "b",]}';
        console.log(JSON.parse(raw));
        """,
    )
    nd(
        "node-assert",
        "ASSERTION_FAILURE",
        """
        const assert = require('assert');
        function slug(s) { return s.toLowerCase(); }
        assert.strictEqual(slug('Hello World'), 'hello-world');
        """,
    )
    nd(
        "node-assert-deep",
        "ASSERTION_FAILURE",
        """
        const assert = require('node:assert/strict');
        assert.deepStrictEqual({ a: 1, b: [1, 2] }, { a: 1, b: [1, 3] });
        """,
    )
    nd(
        "node-type-undefined",
        "TYPE_ERROR",
        """
        const settings = {};
        console.log(settings.database.host);
        """,
    )
    nd(
        "node-type-null-obj",
        "TYPE_ERROR",
        """
        const data = null;
        console.log(Object.keys(data));
        """,
    )
    nd(
        "node-type-bigint",
        "TYPE_ERROR",
        """
        const big = 10n;
        console.log(big + 1);
        """,
    )
    nd(
        "node-timeout-fetch",
        "TIMEOUT",
        """
        async function main() {
          const res = await fetch(`http://127.0.0.1:${process.env.PORT_SILENT}/slow`, {
            signal: AbortSignal.timeout(200),
          });
          console.log(res.status);
        }
        main();
        """,
    )
    nd(
        "node-timeout-race",
        "TIMEOUT",
        """
        function withTimeout(promise, ms) {
          return Promise.race([
            promise,
            new Promise((_, reject) =>
              setTimeout(() => reject(new Error(`operation timed out after ${ms} ms`)), ms)),
          ]);
        }
        withTimeout(new Promise(() => {}), 100).catch((err) => { console.error(err); process.exit(1); });
        """,
    )
    nd(
        "node-mem-heap",
        "MEMORY_ERROR",
        """
        const hoard = [];
        while (true) { hoard.push(new Array(100000).fill('x')); }
        """,
        flags="--max-old-space-size=24 ",
    )
    nd(
        "node-mem-stack",
        "MEMORY_ERROR",
        """
        function walk(n) { return walk(n + 1) + 1; }
        walk(0);
        """,
    )
    nd(
        "node-net-refused",
        "NETWORK_ERROR",
        """
        const http = require('http');
        http.get(`http://127.0.0.1:${process.env.PORT_REFUSED}/health`, (res) => {
          console.log(res.statusCode);
        });
        """,
    )
    nd(
        "node-net-fetch",
        "NETWORK_ERROR",
        """
        fetch(`http://127.0.0.1:${process.env.PORT_REFUSED}/api`).then((r) => console.log(r.status));
        """,
        "fetch reports a TypeError whose cause is the refused connection",
    )
    nd(
        "node-net-reset",
        "NETWORK_ERROR",
        """
        const http = require('http');
        const req = http.request({ host: '127.0.0.1', port: process.env.PORT_RESET, path: '/' });
        req.end('hello');
        """,
    )
    nd(
        "node-res-module",
        "RESOURCE_ERROR",
        """
        const pad = require('left-pad-corpus-missing');
        console.log(pad('x', 3));
        """,
    )
    nd(
        "node-res-addrinuse",
        "RESOURCE_ERROR",
        """
        const net = require('net');
        const a = net.createServer().listen(0, '127.0.0.1', () => {
          net.createServer().listen(a.address().port, '127.0.0.1');
        });
        """,
    )
    add(
        Case(
            "node-res-emfile",
            "RESOURCE_ERROR",
            "node",
            "ulimit -n 40 && node main.js",
            {
                "main.js": d(
                    """
                    const fs = require('fs');
                    const fds = [];
                    for (let i = 0; i < 200; i++) fds.push(fs.openSync('main.js', 'r'));
                    """
                )
            },
        )
    )
    nd(
        "node-unknown-throw",
        "UNKNOWN",
        """
        function withdraw(balance, amount) {
          if (amount > balance) throw new Error(`insufficient funds: ${balance} < ${amount}`);
          return balance - amount;
        }
        withdraw(10, 25);
        """,
    )
    nd(
        "node-unknown-range",
        "UNKNOWN",
        """
        console.log((12.5).toFixed(200));
        """,
    )

    # ---------------------------------------------------------------- node --test
    def nt(cid: str, label: str, code: str, note: str = "") -> None:
        add(Case(cid, label, "node-test", "node --test", {"test/app.test.js": d(code)}, note))

    nt(
        "nodetest-assert",
        "ASSERTION_FAILURE",
        """
        const test = require('node:test');
        const assert = require('node:assert');

        test('adds numbers', () => {
          assert.strictEqual(1 + 1, 3);
        });
        """,
    )
    nt(
        "nodetest-deep",
        "ASSERTION_FAILURE",
        """
        const { test } = require('node:test');
        const assert = require('node:assert/strict');

        test('builds the list', () => {
          assert.deepEqual(['a', 'b'].map((s) => s.toUpperCase()), ['A', 'C']);
        });
        """,
    )
    nt(
        "nodetest-timeout",
        "TIMEOUT",
        """
        const { test } = require('node:test');

        test('waits for the queue', { timeout: 100 }, async () => {
          await new Promise((resolve) => setTimeout(resolve, 5000));
        });
        """,
    )
    nt(
        "nodetest-type",
        "TYPE_ERROR",
        """
        const { test } = require('node:test');

        test('reads the config', () => {
          const cfg = undefined;
          return cfg.port;
        });
        """,
    )
    nt(
        "nodetest-file",
        "FILE_ACCESS",
        """
        const { test } = require('node:test');
        const fs = require('node:fs');

        test('loads fixtures', () => {
          fs.readFileSync('test/fixtures/users.json', 'utf8');
        });
        """,
    )
    nt(
        "nodetest-func",
        "FUNCTION_ERROR",
        """
        const { test } = require('node:test');

        test('formats', () => {
          formatPrice(3);
        });
        """,
    )

    # ---------------------------------------------------------------- jest
    def js(cid: str, label: str, files: dict[str, str], note: str = "") -> None:
        add(Case(cid, label, "jest", JEST, {k: d(v) for k, v in files.items()}, note, "jest"))

    js(
        "jest-tobe",
        "ASSERTION_FAILURE",
        {
            "sum.js": "module.exports = (a, b) => a - b;\n",
            "sum.test.js": """
            const sum = require('./sum');
            test('adds 1 + 2 to equal 3', () => {
              expect(sum(1, 2)).toBe(3);
            });
            """,
        },
    )
    js(
        "jest-toequal",
        "ASSERTION_FAILURE",
        {
            "user.test.js": """
            test('builds a user', () => {
              const user = { name: 'ada', roles: ['admin'] };
              expect(user).toEqual({ name: 'ada', roles: ['admin', 'dev'] });
            });
            """
        },
    )
    js(
        "jest-tothrow",
        "ASSERTION_FAILURE",
        {
            "val.test.js": """
            const validate = (age) => age;
            test('rejects negative ages', () => {
              expect(() => validate(-1)).toThrow('negative');
            });
            """
        },
    )
    js(
        "jest-timeout",
        "TIMEOUT",
        {
            "slow.test.js": """
            test('waits for the worker', async () => {
              await new Promise(() => {});
            }, 200);
            """
        },
    )
    js(
        "jest-type",
        "TYPE_ERROR",
        {
            "cart.js": "module.exports = (cart) => cart.items.length;\n",
            "cart.test.js": """
            const count = require('./cart');
            test('counts items', () => {
              expect(count({})).toBe(0);
            });
            """,
        },
    )
    js(
        "jest-func",
        "FUNCTION_ERROR",
        {
            "fmt.test.js": """
            const lib = { format: (x) => String(x) };
            test('formats money', () => {
              expect(lib.formatMoney(3)).toBe('3.00');
            });
            """
        },
    )
    js(
        "jest-reference",
        "FUNCTION_ERROR",
        {
            "ref.test.js": """
            test('parses', () => {
              expect(parseQuery('a=1')).toEqual({ a: '1' });
            });
            """
        },
    )
    js(
        "jest-syntax",
        "SYNTAX_ERROR",
        {
            "calc.js": "module.exports = function (a, b) {\n  return a +* b;\n};\n",
            "calc.test.js": """
            const calc = require('./calc');
            test('calc', () => { expect(calc(1, 2)).toBe(3); });
            """,
        },
    )
    js(
        "jest-res-module",
        "RESOURCE_ERROR",
        {
            "dep.test.js": """
            const dayjs = require('dayjs-corpus-missing');
            test('dates', () => { expect(dayjs).toBeDefined(); });
            """
        },
    )
    js(
        "jest-file-relative",
        "FILE_ACCESS",
        {
            "rel.test.js": """
            const helpers = require('./helpers/strings');
            test('trims', () => { expect(helpers.trim(' a ')).toBe('a'); });
            """
        },
    )
    js(
        "jest-net",
        "NETWORK_ERROR",
        {
            "api.test.js": """
            test('health endpoint answers', async () => {
              const res = await fetch(`http://127.0.0.1:${process.env.PORT_REFUSED}/health`);
              expect(res.status).toBe(200);
            });
            """
        },
    )

    # ---------------------------------------------------------------- tsc
    def ts(cid: str, label: str, files: dict[str, str], note: str = "") -> None:
        add(Case(cid, label, "tsc", TSC, {k: d(v) for k, v in files.items()}, note, "tsc"))

    ts(
        "tsc-assign",
        "TYPE_ERROR",
        {"index.ts": "const count: number = 'three';\nexport { count };\n"},
    )
    ts(
        "tsc-arg",
        "TYPE_ERROR",
        {
            "index.ts": """
            function greet(name: string): string {
              return `hi ${name}`;
            }
            greet(42);
            """
        },
    )
    ts(
        "tsc-arity",
        "TYPE_ERROR",
        {
            "index.ts": """
            function area(w: number, h: number): number {
              return w * h;
            }
            export const a = area(1, 2, 3);
            """
        },
    )
    ts(
        "tsc-possibly-undefined",
        "TYPE_ERROR",
        {
            "index.ts": """
            const users = new Map<string, { name: string }>();
            export const name = users.get('ada').name;
            """
        },
    )
    ts(
        "tsc-cannot-find-name",
        "FUNCTION_ERROR",
        {"index.ts": "export const total = computeTotal([1, 2]);\n"},
    )
    ts(
        "tsc-property",
        "FUNCTION_ERROR",
        {
            "index.ts": """
            const user = { name: 'ada' };
            export const email = user.email;
            """
        },
    )
    ts(
        "tsc-syntax",
        "SYNTAX_ERROR",
        {
            "index.ts": """
            export function add(a: number, b: number) {
              return a + b
            export const x = 1;
            """
        },
    )
    ts(
        "tsc-module-missing",
        "RESOURCE_ERROR",
        {
            "index.ts": "import express from 'express-corpus-missing';\nexport const app = express;\n"
        },
    )
    ts(
        "tsc-relative-missing",
        "FILE_ACCESS",
        {"index.ts": "import { helper } from './lib/helper';\nexport const h = helper;\n"},
    )

    # ---------------------------------------------------------------- npm
    add(
        Case(
            "npm-missing-script",
            "FUNCTION_ERROR",
            "npm",
            "npm run build",
            {
                "package.json": json.dumps(
                    {"name": "app", "version": "1.0.0", "scripts": {"test": "node --test"}}
                )
            },
            "the project has no script by that name",
        )
    )
    add(
        Case(
            "npm-bad-json",
            "SYNTAX_ERROR",
            "npm",
            "npm install --offline --no-audit --no-fund",
            {
                "package.json": '{\n  "name": "app",\n  "version": "1.0.0",\n  "dependencies": {\n}\n'
            },
        )
    )
    add(
        Case(
            "npm-test-wraps-node-test",
            "ASSERTION_FAILURE",
            "npm",
            "npm test",
            {
                "package.json": json.dumps(
                    {"name": "app", "version": "1.0.0", "scripts": {"test": "node --test"}}
                ),
                "test/math.test.js": d(
                    """
                    const test = require('node:test');
                    const assert = require('node:assert');
                    test('multiplies', () => { assert.equal(2 * 3, 5); });
                    """
                ),
            },
            "npm's own lines come last; the decisive line is the test's",
        )
    )
    add(
        Case(
            "npm-test-wraps-jest",
            "TYPE_ERROR",
            "npm",
            "npm test",
            {
                "package.json": json.dumps(
                    {
                        "name": "app",
                        "version": "1.0.0",
                        "scripts": {"test": f"{NPM_TOOLS}/node_modules/.bin/jest --ci"},
                    }
                ),
                "total.test.js": d(
                    """
                    const total = (order) => order.lines.reduce((s, l) => s + l.price, 0);
                    test('totals an order', () => { expect(total({})).toBe(0); });
                    """
                ),
            },
        )
    )
    add(
        Case(
            "npm-registry-refused",
            "NETWORK_ERROR",
            "npm",
            "npm install --no-audit --no-fund --fetch-retries=0 --registry=http://127.0.0.1:$PORT_REFUSED/ left-pad",
            {"package.json": json.dumps({"name": "app", "version": "1.0.0"})},
        )
    )
    add(
        Case(
            "npm-start-missing-file",
            "FILE_ACCESS",
            "npm",
            "npm start",
            {
                "package.json": json.dumps(
                    {
                        "name": "app",
                        "version": "1.0.0",
                        "scripts": {"start": "node server/index.js"},
                    }
                )
            },
        )
    )

    # ---------------------------------------------------------------- cargo / rustc
    def cg(
        cid: str, label: str, main: str, note: str = "", cmd: str = "cargo run -q --offline"
    ) -> None:
        add(Case(cid, label, "cargo", cmd, {"src/main.rs": d(main)}, note, "cargo"))

    cg(
        "cargo-fn-missing",
        "FUNCTION_ERROR",
        """
        fn main() {
            let total = compute_total(&[1, 2, 3]);
            println!("{}", total);
        }
        """,
    )
    cg(
        "cargo-method-missing",
        "FUNCTION_ERROR",
        """
        struct Cart { items: Vec<u32> }

        fn main() {
            let cart = Cart { items: vec![1, 2] };
            println!("{}", cart.total());
        }
        """,
    )
    cg(
        "cargo-mismatch",
        "TYPE_ERROR",
        """
        fn count() -> u32 {
            "three"
        }

        fn main() {
            println!("{}", count());
        }
        """,
    )
    cg(
        "cargo-trait-bound",
        "TYPE_ERROR",
        """
        struct Point { x: i32 }

        fn main() {
            let p = Point { x: 1 };
            println!("{}", p);
        }
        """,
    )
    cg(
        "cargo-moved",
        "TYPE_ERROR",
        """
        fn consume(v: Vec<i32>) -> usize { v.len() }

        fn main() {
            let v = vec![1, 2, 3];
            consume(v);
            println!("{:?}", v);
        }
        """,
        "ownership errors count as the compiler's type checks",
    )
    cg(
        "cargo-arity",
        "TYPE_ERROR",
        """
        fn area(w: u32, h: u32) -> u32 { w * h }

        fn main() {
            println!("{}", area(1));
        }
        """,
    )
    cg(
        "cargo-syntax",
        "SYNTAX_ERROR",
        """
        fn main() {
            let x = 5
            println!("{}", x);
        }
        """,
    )
    cg(
        "cargo-syntax-delim",
        "SYNTAX_ERROR",
        """
        fn main() {
            let items = vec![1, 2, 3;
            println!("{:?}", items);
        }
        """,
    )
    cg(
        "cargo-crate-missing",
        "RESOURCE_ERROR",
        """
        use serde_json::Value;

        fn main() {
            let v: Value = serde_json::from_str("{}").unwrap();
            println!("{}", v);
        }
        """,
    )
    cg(
        "cargo-file",
        "FILE_ACCESS",
        """
        fn main() {
            let text = std::fs::read_to_string("config/app.toml").unwrap();
            println!("{}", text);
        }
        """,
    )
    cg(
        "cargo-file-expect",
        "FILE_ACCESS",
        """
        use std::fs::File;

        fn main() {
            let _f = File::open("data/input.csv").expect("failed to open input");
        }
        """,
    )
    cg(
        "cargo-net",
        "NETWORK_ERROR",
        """
        use std::net::TcpStream;

        fn main() {
            let port = std::env::var("PORT_REFUSED").unwrap();
            let _s = TcpStream::connect(format!("127.0.0.1:{}", port)).unwrap();
        }
        """,
    )
    cg(
        "cargo-timeout-channel",
        "TIMEOUT",
        """
        use std::sync::mpsc;
        use std::time::Duration;

        fn main() {
            let (_tx, rx) = mpsc::channel::<u32>();
            let value = rx.recv_timeout(Duration::from_millis(100)).unwrap();
            println!("{}", value);
        }
        """,
    )
    cg(
        "cargo-timeout-read",
        "TIMEOUT",
        """
        use std::io::Read;
        use std::net::TcpStream;
        use std::time::Duration;

        fn main() {
            let port = std::env::var("PORT_SILENT").unwrap();
            let mut s = TcpStream::connect(format!("127.0.0.1:{}", port)).unwrap();
            s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
            let mut buf = [0u8; 16];
            s.read(&mut buf).expect("read reply");
        }
        """,
        "on Linux a socket read timeout surfaces as WouldBlock (EAGAIN)",
    )
    cg(
        "cargo-mem-stack",
        "MEMORY_ERROR",
        """
        fn depth(n: u64) -> u64 {
            let pad = [n; 64];
            depth(pad[1] + 1) + pad[0]
        }

        fn main() {
            println!("{}", depth(0));
        }
        """,
    )
    cg(
        "cargo-mem-alloc",
        "MEMORY_ERROR",
        """
        fn main() {
            let n: usize = std::env::args().count() << 46;
            let v: Vec<u8> = Vec::with_capacity(n);
            println!("{}", v.capacity());
        }
        """,
    )
    cg(
        "cargo-type-parse",
        "TYPE_ERROR",
        """
        fn main() {
            let port: u16 = "80a".parse().unwrap();
            println!("{}", port);
        }
        """,
    )
    cg(
        "cargo-unknown-index",
        "UNKNOWN",
        """
        fn main() {
            let v = vec![1, 2, 3];
            let i = v.len() + std::env::args().count() + 3;
            println!("{}", v[i]);
        }
        """,
    )
    cg(
        "cargo-type-none",
        "TYPE_ERROR",
        """
        fn main() {
            let name: Option<&str> = std::env::args().nth(5).map(|_| "x");
            println!("{}", name.unwrap());
        }
        """,
        "unwrap on None is Rust's null dereference (relabelled from UNKNOWN when that definition was written)",
    )
    cg(
        "cargo-unknown-panic",
        "UNKNOWN",
        """
        fn main() {
            let balance = 10;
            if balance < 25 {
                panic!("insufficient funds: balance {} below {}", balance, 25);
            }
        }
        """,
    )
    add(
        Case(
            "cargo-test-assert-eq",
            "ASSERTION_FAILURE",
            "cargo",
            "cargo test -q --offline",
            {
                "src/lib.rs": d(
                    """
                    pub fn add(a: i32, b: i32) -> i32 { a - b }

                    #[cfg(test)]
                    mod tests {
                        use super::*;

                        #[test]
                        fn adds() {
                            assert_eq!(add(2, 3), 5);
                        }

                        #[test]
                        fn zero() {
                            assert_eq!(add(0, 0), 0);
                        }
                    }
                    """
                ),
            },
            base="cargo",
        )
    )
    add(
        Case(
            "cargo-test-assert",
            "ASSERTION_FAILURE",
            "cargo",
            "cargo test --offline",
            {
                "src/lib.rs": d(
                    """
                    pub fn is_even(n: u32) -> bool { n % 2 == 1 }

                    #[test]
                    fn four_is_even() {
                        assert!(is_even(4), "4 should be even");
                    }
                    """
                ),
            },
            base="cargo",
        )
    )
    add(
        Case(
            "cargo-dep-offline",
            "RESOURCE_ERROR",
            "cargo",
            "cargo build --offline",
            {
                "Cargo.toml": CARGO_TOML + 'corpus-missing-crate-xyz = "1.0"\n',
                "src/main.rs": "fn main() {}\n",
            },
        )
    )
    add(
        Case(
            "rustc-fn-missing",
            "FUNCTION_ERROR",
            "rustc",
            "rustc --edition 2021 main.rs",
            {"main.rs": 'fn main() {\n    let s = make_label(3);\n    println!("{}", s);\n}\n'},
        )
    )
    add(
        Case(
            "rustc-mismatch",
            "TYPE_ERROR",
            "rustc",
            "rustc --edition 2021 main.rs",
            {"main.rs": 'fn main() {\n    let n: i32 = "7";\n    println!("{}", n);\n}\n'},
        )
    )

    # ---------------------------------------------------------------- Java
    def jv(cid: str, label: str, code: str, note: str = "", run: str = "java Main") -> None:
        cmd = f"javac Main.java && {run}" if run else "javac Main.java"
        add(Case(cid, label, "java", cmd, {"Main.java": d(code)}, note))

    jv(
        "java-syntax-semicolon",
        "SYNTAX_ERROR",
        """
        public class Main {
            public static void main(String[] args) {
                int x = 5
                System.out.println(x);
            }
        }
        """,
    )
    jv(
        "java-syntax-eof",
        "SYNTAX_ERROR",
        """
        public class Main {
            public static void main(String[] args) {
                System.out.println("hi");
            }
        """,
    )
    jv(
        "java-symbol-method",
        "FUNCTION_ERROR",
        """
        public class Main {
            public static void main(String[] args) {
                System.out.println(computeTotal(new int[] {1, 2}));
            }
        }
        """,
    )
    jv(
        "java-symbol-var",
        "FUNCTION_ERROR",
        """
        import java.util.List;

        public class Main {
            public static void main(String[] args) {
                List<String> names = List.of("a");
                System.out.println(names.length());
            }
        }
        """,
    )
    jv(
        "java-incompatible",
        "TYPE_ERROR",
        """
        public class Main {
            public static void main(String[] args) {
                int count = "three";
                System.out.println(count);
            }
        }
        """,
    )
    jv(
        "java-npe",
        "TYPE_ERROR",
        """
        import java.util.HashMap;
        import java.util.Map;

        public class Main {
            public static void main(String[] args) {
                Map<String, String> env = new HashMap<>();
                System.out.println(env.get("HOME").length());
            }
        }
        """,
    )
    jv(
        "java-classcast",
        "TYPE_ERROR",
        """
        public class Main {
            public static void main(String[] args) {
                Object value = "42";
                Integer n = (Integer) value;
                System.out.println(n);
            }
        }
        """,
    )
    jv(
        "java-numberformat",
        "TYPE_ERROR",
        """
        public class Main {
            public static void main(String[] args) {
                int port = Integer.parseInt("80a");
                System.out.println(port);
            }
        }
        """,
    )
    jv(
        "java-package-missing",
        "RESOURCE_ERROR",
        """
        import org.junit.jupiter.api.Test;

        public class Main {
            @Test
            public void works() {}
            public static void main(String[] args) {}
        }
        """,
    )
    jv(
        "java-classnotfound",
        "RESOURCE_ERROR",
        """
        public class Main {
            public static void main(String[] args) throws Exception {
                Class<?> driver = Class.forName("org.postgresql.Driver");
                System.out.println(driver);
            }
        }
        """,
    )
    jv(
        "java-file",
        "FILE_ACCESS",
        """
        import java.io.FileReader;

        public class Main {
            public static void main(String[] args) throws Exception {
                FileReader reader = new FileReader("config/app.properties");
                System.out.println(reader.read());
            }
        }
        """,
    )
    jv(
        "java-nosuchfile",
        "FILE_ACCESS",
        """
        import java.nio.file.Files;
        import java.nio.file.Path;

        public class Main {
            public static void main(String[] args) throws Exception {
                System.out.println(Files.readString(Path.of("data/users.csv")));
            }
        }
        """,
    )
    jv(
        "java-assert",
        "ASSERTION_FAILURE",
        """
        public class Main {
            static int add(int a, int b) { return a - b; }
            public static void main(String[] args) {
                int got = add(2, 3);
                assert got == 5 : "expected 5 but was " + got;
            }
        }
        """,
        run="java -ea Main",
    )
    jv(
        "java-oom",
        "MEMORY_ERROR",
        """
        import java.util.ArrayList;
        import java.util.List;

        public class Main {
            public static void main(String[] args) {
                List<long[]> hoard = new ArrayList<>();
                while (true) hoard.add(new long[1_000_000]);
            }
        }
        """,
        run="java -Xmx32m Main",
    )
    jv(
        "java-stackoverflow",
        "MEMORY_ERROR",
        """
        public class Main {
            static int depth(int n) { return depth(n + 1) + 1; }
            public static void main(String[] args) {
                System.out.println(depth(0));
            }
        }
        """,
    )
    jv(
        "java-net",
        "NETWORK_ERROR",
        """
        import java.net.Socket;

        public class Main {
            public static void main(String[] args) throws Exception {
                int port = Integer.parseInt(System.getenv("PORT_REFUSED"));
                try (Socket s = new Socket("127.0.0.1", port)) {
                    System.out.println(s.isConnected());
                }
            }
        }
        """,
    )
    jv(
        "java-timeout-future",
        "TIMEOUT",
        """
        import java.util.concurrent.*;

        public class Main {
            public static void main(String[] args) throws Exception {
                ExecutorService pool = Executors.newSingleThreadExecutor();
                Future<String> f = pool.submit(() -> { Thread.sleep(5000); return "done"; });
                try {
                    System.out.println(f.get(100, TimeUnit.MILLISECONDS));
                } finally {
                    pool.shutdownNow();
                }
            }
        }
        """,
    )
    jv(
        "java-timeout-socket",
        "TIMEOUT",
        """
        import java.net.Socket;

        public class Main {
            public static void main(String[] args) throws Exception {
                int port = Integer.parseInt(System.getenv("PORT_SILENT"));
                try (Socket s = new Socket("127.0.0.1", port)) {
                    s.setSoTimeout(200);
                    System.out.println(s.getInputStream().read());
                }
            }
        }
        """,
    )
    jv(
        "java-unknown-index",
        "UNKNOWN",
        """
        public class Main {
            public static void main(String[] args) {
                int[] values = {1, 2, 3};
                System.out.println(values[5]);
            }
        }
        """,
    )
    jv(
        "java-unknown-state",
        "UNKNOWN",
        """
        public class Main {
            public static void main(String[] args) {
                throw new IllegalStateException("order already shipped");
            }
        }
        """,
    )

    # ---------------------------------------------------------------- shell
    def sh(cid: str, label: str, script: str, note: str = "", runner: str = "bash") -> None:
        add(Case(cid, label, "shell", f"{runner} build.sh", {"build.sh": d(script)}, note))

    sh(
        "sh-file-cat",
        "FILE_ACCESS",
        """
        set -e
        echo "collecting release notes"
        cat docs/CHANGES.md > release.txt
        """,
    )
    sh(
        "sh-file-cd",
        "FILE_ACCESS",
        """
        set -e
        cd frontend/dist
        ls
        """,
    )
    add(
        Case(
            "sh-file-noexec",
            "FILE_ACCESS",
            "shell",
            "printf 'echo hi\\n' > deploy.sh && chmod 644 deploy.sh && ./deploy.sh",
            {},
            "a script without the execute bit",
        )
    )
    sh(
        "sh-file-cp",
        "FILE_ACCESS",
        """
        set -e
        mkdir -p out
        cp build/app.tar.gz out/
        """,
    )
    sh(
        "sh-syntax-fi",
        "SYNTAX_ERROR",
        """
        if [ -f config ]; then
          echo found
        fi
        fi
        """,
    )
    sh(
        "sh-syntax-eof",
        "SYNTAX_ERROR",
        """
        for f in *.txt; do
          echo "$f"
        """,
    )
    sh(
        "sh-func-undefined",
        "FUNCTION_ERROR",
        """
        set -e
        prepare_workspace() { mkdir -p work; }
        prepare_workspace
        run_migrations --all
        """,
        "an undefined shell function reads exactly like a missing program",
    )
    sh(
        "sh-res-command",
        "RESOURCE_ERROR",
        """
        set -e
        echo "building"
        protoc-corpus-missing --version
        """,
    )
    sh(
        "sh-res-disk",
        "RESOURCE_ERROR",
        """
        set -e
        echo "writing cache" > /dev/full
        """,
    )
    sh(
        "sh-type-integer",
        "TYPE_ERROR",
        """
        count="many"
        if [ "$count" -gt 3 ]; then echo lots; fi
        exit 2
        """,
    )
    sh(
        "sh-timeout",
        "TIMEOUT",
        """
        timeout --verbose 0.3 sleep 5
        """,
    )
    sh(
        "sh-net-curl",
        "NETWORK_ERROR",
        """
        set -e
        curl -sS --fail "http://127.0.0.1:$PORT_REFUSED/health"
        """,
    )
    sh(
        "sh-net-devtcp",
        "NETWORK_ERROR",
        """
        exec 3<>"/dev/tcp/127.0.0.1/$PORT_REFUSED"
        """,
    )
    add(
        Case(
            "sh-mem-segfault",
            "MEMORY_ERROR",
            "shell",
            "gcc -o crash crash.c && bash -c ./crash",
            {"crash.c": "int main(void) { int *p = 0; return *p; }\n"},
        )
    )
    sh(
        "sh-mem-ulimit",
        "MEMORY_ERROR",
        f"""
        ulimit -v 200000
        {PY} -c 'data = "x" * (10**9)'
        """,
    )
    sh(
        "sh-unknown-exit",
        "UNKNOWN",
        """
        echo "checking release"
        echo "version tag missing"
        exit 3
        """,
    )
    sh(
        "sh-unknown-grep",
        "UNKNOWN",
        """
        set -e
        printf 'alpha\\nbeta\\n' > list.txt
        grep -q gamma list.txt
        """,
    )
    out.extend(holdout_cases())
    return out


def holdout_cases() -> list[Case]:
    """Written after the rules were frozen; measured once, reported separately."""
    out: list[Case] = []
    add = out.append

    def py(cid: str, label: str, code: str, note: str = "") -> None:
        add(Case(cid, label, "python", f"{PY} main.py", {"main.py": d(code)}, note))

    py(
        "h-py-file-write",
        "FILE_ACCESS",
        """
        with open("out/report.txt", "w") as handle:
            handle.write("done")
        """,
    )
    py(
        "h-py-func-unbound",
        "FUNCTION_ERROR",
        """
        def total(items):
            for item in items:
                subtotal = item
            return subtotal

        print(total([]))
        """,
    )
    py(
        "h-py-func-not-callable",
        "FUNCTION_ERROR",
        """
        limit = 5
        print(limit(3))
        """,
    )
    py(
        "h-py-syntax-fstring",
        "SYNTAX_ERROR",
        """
        name = "x"
        print(f"hello {name!}")
        """,
    )
    py(
        "h-py-timeout-queue",
        "TIMEOUT",
        """
        import queue
        jobs = queue.Queue()
        print(jobs.get(timeout=0.1))
        """,
        "a queue read that timed out raises Empty, with no word about time",
    )
    py(
        "h-py-net-reset-http",
        "NETWORK_ERROR",
        """
        import http.client, os
        conn = http.client.HTTPConnection("127.0.0.1", int(os.environ["PORT_RESET"]), timeout=5)
        conn.request("POST", "/upload", body=b"x" * 100)
        print(conn.getresponse().status)
        """,
    )
    py(
        "h-py-mem-list",
        "MEMORY_ERROR",
        """
        grid = [0] * (10**12)
        """,
    )
    py(
        "h-py-res-dist",
        "RESOURCE_ERROR",
        """
        from importlib.metadata import version
        print(version("corpus-missing-distribution"))
        """,
        "a distribution that is not installed",
    )
    add(
        Case(
            "h-py-syntax-json-file",
            "SYNTAX_ERROR",
            "python",
            f"{PY} main.py",
            {
                "settings.json": '{"debug": true, "level": }\n',
                "main.py": "import json\nprint(json.load(open('settings.json')))\n",
            },
        )
    )
    py(
        "h-py-type-unhashable",
        "TYPE_ERROR",
        """
        seen = {}
        seen[[1, 2]] = True
        """,
    )
    py(
        "h-py-unknown-stopiteration",
        "UNKNOWN",
        """
        print(next(iter([])))
        """,
    )
    py(
        "h-py-unknown-valueerror",
        "UNKNOWN",
        """
        def withdraw(amount):
            if amount <= 0:
                raise ValueError("amount must be positive")

        withdraw(-5)
        """,
    )

    def pt(cid: str, label: str, files: dict[str, str], note: str = "") -> None:
        add(
            Case(
                cid,
                label,
                "pytest",
                f"{PY} -m pytest -p no:cacheprovider -q",
                {k: d(v) for k, v in files.items()},
                note,
            )
        )

    pt(
        "h-pt-assert-in",
        "ASSERTION_FAILURE",
        {
            "test_tags.py": """
        def tags(text):
            return text.split(",")

        def test_tags():
            assert "beta" in tags("alpha, beta")
        """
        },
    )
    pt(
        "h-pt-file-fixture",
        "FILE_ACCESS",
        {
            "test_cfg.py": """
        import pytest

        @pytest.fixture
        def config():
            with open("conf/test.ini") as handle:
                return handle.read()

        def test_has_section(config):
            assert "[main]" in config
        """
        },
    )
    pt(
        "h-pt-import-name",
        "FUNCTION_ERROR",
        {
            "helpers.py": "def slugify(text):\n    return text.lower()\n",
            "test_helpers.py": """
        from helpers import titlecase

        def test_titlecase():
            assert titlecase("a b") == "A B"
        """,
        },
    )
    pt(
        "h-pt-type-len-none",
        "TYPE_ERROR",
        {
            "test_rows.py": """
        def load_rows():
            return None

        def test_rows():
            assert len(load_rows()) == 3
        """
        },
    )
    pt(
        "h-pt-timeout-socket",
        "TIMEOUT",
        {
            "test_ping.py": """
        import os, socket

        def test_ping():
            conn = socket.create_connection(("127.0.0.1", int(os.environ["PORT_SILENT"])), timeout=0.2)
            conn.sendall(b"PING\\n")
            assert conn.recv(10) == b"PONG\\n"
        """
        },
    )
    pt(
        "h-pt-net-http",
        "NETWORK_ERROR",
        {
            "test_client.py": """
        import http.client, os

        def test_status():
            conn = http.client.HTTPConnection("127.0.0.1", int(os.environ["PORT_REFUSED"]))
            conn.request("GET", "/")
            assert conn.getresponse().status == 200
        """
        },
    )
    pt(
        "h-pt-syntax-json",
        "SYNTAX_ERROR",
        {
            "test_payload.py": """
        import json

        def test_payload():
            payload = json.loads("{'id': 1}")
            assert payload["id"] == 1
        """
        },
    )

    def ut(cid: str, label: str, body: str) -> None:
        add(Case(cid, label, "unittest", f"{PY} -m unittest test_mod", {"test_mod.py": d(body)}))

    ut(
        "h-ut-assert-in",
        "ASSERTION_FAILURE",
        """
        import unittest

        class RolesTest(unittest.TestCase):
            def test_admin(self):
                self.assertIn("admin", ["user", "guest"])
        """,
    )
    ut(
        "h-ut-net",
        "NETWORK_ERROR",
        """
        import os, socket, unittest

        class PingTest(unittest.TestCase):
            def test_connect(self):
                socket.create_connection(("127.0.0.1", int(os.environ["PORT_REFUSED"]))).close()
        """,
    )

    def my(cid: str, label: str, code: str) -> None:
        add(
            Case(
                cid,
                label,
                "mypy",
                f"{PY} -m mypy --no-incremental --cache-dir=/dev/null app.py",
                {"app.py": d(code)},
            )
        )

    my(
        "h-mypy-index",
        "TYPE_ERROR",
        """
        count: int = 3
        first = count[0]
        """,
    )
    my(
        "h-mypy-override",
        "TYPE_ERROR",
        """
        class Base:
            def run(self, n: int) -> int:
                return n

        class Child(Base):
            def run(self, n: str) -> int:
                return 0
        """,
    )
    my(
        "h-mypy-import-attr",
        "FUNCTION_ERROR",
        """
        from os import get_everything
        """,
    )
    my(
        "h-mypy-kwarg",
        "TYPE_ERROR",
        """
        def greet(name: str) -> str:
            return name

        greet(nam="x")
        """,
    )

    def rf(cid: str, label: str, code: str) -> None:
        add(
            Case(
                cid,
                label,
                "ruff",
                f"{PY} -m ruff check --no-cache --isolated app.py",
                {"app.py": d(code)},
            )
        )

    rf(
        "h-ruff-undefined-method",
        "FUNCTION_ERROR",
        """
        class Cart:
            def total(self):
                return subtotal(self) + tax(self)
        """,
    )
    rf(
        "h-ruff-syntax-bracket",
        "SYNTAX_ERROR",
        """
        values = [1, 2, 3
        print(values)
        """,
    )

    def nd(cid: str, label: str, code: str, note: str = "") -> None:
        add(Case(cid, label, "node", "node main.js", {"main.js": d(code)}, note))

    nd(
        "h-node-file-readdir",
        "FILE_ACCESS",
        """
        const fs = require('fs');
        for (const name of fs.readdirSync('templates')) console.log(name);
        """,
    )
    nd(
        "h-node-func-method",
        "FUNCTION_ERROR",
        """
        class Queue { push(x) { this.items = [x]; } }
        const q = new Queue();
        q.enqueue(1);
        """,
    )
    nd(
        "h-node-type-null-prop",
        "TYPE_ERROR",
        """
        const user = null;
        console.log(user.name);
        """,
    )
    nd(
        "h-node-syntax-regex",
        "SYNTAX_ERROR",
        """
        const pattern = /(unclosed/;
        console.log(pattern.test('x'));
        """,
    )
    nd(
        "h-node-assert-ok",
        "ASSERTION_FAILURE",
        """
        const assert = require('assert');
        const ready = false;
        assert.ok(ready, 'service should be ready');
        """,
    )
    nd(
        "h-node-net-socket",
        "NETWORK_ERROR",
        """
        const net = require('net');
        net.connect(Number(process.env.PORT_REFUSED), '127.0.0.1');
        """,
    )
    nd(
        "h-node-timeout-abort",
        "TIMEOUT",
        """
        const { setTimeout: sleep } = require('timers/promises');
        sleep(5000, null, { signal: AbortSignal.timeout(50) }).then(() => console.log('done'));
        """,
    )
    nd(
        "h-node-res-spawn",
        "RESOURCE_ERROR",
        """
        const { spawn } = require('child_process');
        spawn('corpus-missing-tool', ['--version']);
        """,
        "spawning a program that is not installed",
    )
    nd(
        "h-node-unknown-custom",
        "UNKNOWN",
        """
        class QuotaExceeded extends Error {}
        throw new QuotaExceeded('plan allows 3 projects');
        """,
    )

    def nt(cid: str, label: str, code: str) -> None:
        add(Case(cid, label, "node-test", "node --test", {"test/x.test.js": d(code)}))

    nt(
        "h-nodetest-reject",
        "UNKNOWN",
        """
        const { test } = require('node:test');
        test('publishes', async () => { throw new Error('publish rejected by server'); });
        """,
    )
    nt(
        "h-nodetest-deep-object",
        "ASSERTION_FAILURE",
        """
        const { test } = require('node:test');
        const assert = require('node:assert/strict');
        test('merges', () => { assert.deepEqual({ a: 1, b: 2 }, { a: 1, b: 3 }); });
        """,
    )
    nt(
        "h-nodetest-syntax",
        "SYNTAX_ERROR",
        """
        const { test } = require('node:test');
        test('x', () => { const a = ; });
        """,
    )

    def js(cid: str, label: str, files: dict[str, str]) -> None:
        add(Case(cid, label, "jest", JEST, {k: d(v) for k, v in files.items()}, "", "jest"))

    js(
        "h-jest-tocontain",
        "ASSERTION_FAILURE",
        {
            "list.test.js": """
        test('contains 3', () => { expect([1, 2]).toContain(3); });
        """
        },
    )
    js(
        "h-jest-called",
        "ASSERTION_FAILURE",
        {
            "mock.test.js": """
        test('notifies', () => {
          const notify = jest.fn();
          expect(notify).toHaveBeenCalledWith('saved');
        });
        """
        },
    )
    js(
        "h-jest-file",
        "FILE_ACCESS",
        {
            "read.test.js": """
        const fs = require('fs');
        test('reads fixture', () => {
          expect(fs.readFileSync('fixtures/data.txt', 'utf8')).toMatch('x');
        });
        """
        },
    )
    js(
        "h-jest-timeout-done",
        "TIMEOUT",
        {
            "cb.test.js": """
        test('calls back', (done) => {
          setTimeout(() => {}, 10);
        }, 150);
        """
        },
    )
    js(
        "h-jest-not-function",
        "FUNCTION_ERROR",
        {
            "api.test.js": """
        const api = {};
        test('loads', () => { expect(api.load()).toBe(1); });
        """
        },
    )

    def ts(cid: str, label: str, files: dict[str, str]) -> None:
        add(Case(cid, label, "tsc", TSC, {k: d(v) for k, v in files.items()}, "", "tsc"))

    ts(
        "h-tsc-missing-prop",
        "TYPE_ERROR",
        {
            "index.ts": """
        interface Point { x: number; y: number }
        export const p: Point = { x: 1 };
        """
        },
    )
    ts(
        "h-tsc-implicit-any",
        "TYPE_ERROR",
        {
            "index.ts": """
        export function double(x) { return x * 2; }
        """
        },
    )
    ts(
        "h-tsc-no-export",
        "FUNCTION_ERROR",
        {
            "lib.ts": "export const a = 1;\n",
            "index.ts": "import { b } from './lib';\nexport const c = b;\n",
        },
    )
    ts(
        "h-tsc-unterminated",
        "SYNTAX_ERROR",
        {
            "index.ts": """
        export const s = "open;
        """
        },
    )

    add(
        Case(
            "h-npm-test-missing-tool",
            "RESOURCE_ERROR",
            "npm",
            "npm test",
            {
                "package.json": json.dumps(
                    {
                        "name": "app",
                        "version": "1.0.0",
                        "scripts": {"test": "corpus-missing-runner --ci"},
                    }
                )
            },
        )
    )
    add(
        Case(
            "h-npm-install-missing-dir",
            "FILE_ACCESS",
            "npm",
            "npm install --offline --no-audit --no-fund ./vendor/widget",
            {"package.json": json.dumps({"name": "app", "version": "1.0.0"})},
        )
    )

    def cg(cid: str, label: str, main: str, note: str = "") -> None:
        add(
            Case(
                cid,
                label,
                "cargo",
                "cargo run -q --offline",
                {"src/main.rs": d(main)},
                note,
                "cargo",
            )
        )

    cg(
        "h-cargo-private",
        "FUNCTION_ERROR",
        """
        mod shop {
            fn total() -> u32 { 3 }
        }

        fn main() {
            println!("{}", shop::total());
        }
        """,
        "a function that exists but is private to its module",
    )
    cg(
        "h-cargo-overflow",
        "UNKNOWN",
        """
        fn main() {
            let n: u8 = 250 + std::env::args().count() as u8 * 10;
            println!("{}", n);
        }
        """,
    )
    cg(
        "h-cargo-file-write",
        "FILE_ACCESS",
        """
        fn main() {
            std::fs::write("target-out/report.txt", "done").unwrap();
        }
        """,
    )
    cg(
        "h-cargo-syntax-string",
        "SYNTAX_ERROR",
        """
        fn main() {
            let s = "open;
            println!("{}", s);
        }
        """,
    )
    add(
        Case(
            "h-cargo-test-assert-ne",
            "ASSERTION_FAILURE",
            "cargo",
            "cargo test -q --offline",
            {
                "src/lib.rs": d("""
            pub fn id(n: u32) -> u32 { n }

            #[test]
            fn changes_value() {
                assert_ne!(id(4), 4, "id must change the value");
            }
            """)
            },
            base="cargo",
        )
    )

    def jv(cid: str, label: str, code: str, run: str = "java Main") -> None:
        add(Case(cid, label, "java", f"javac Main.java && {run}", {"Main.java": d(code)}))

    jv(
        "h-java-args",
        "TYPE_ERROR",
        """
        public class Main {
            static String greet(String name) { return "hi " + name; }
            public static void main(String[] args) {
                System.out.println(greet("a", "b"));
            }
        }
        """,
    )
    jv(
        "h-java-illegalarg",
        "UNKNOWN",
        """
        public class Main {
            public static void main(String[] args) {
                throw new IllegalArgumentException("quantity must be positive");
            }
        }
        """,
    )
    add(
        Case(
            "h-java-file-permission",
            "FILE_ACCESS",
            "java",
            f"mkdir -p secret && echo x > secret/key.txt && chmod 700 secret && javac Main.java "
            f"&& {NOBODY} java Main",
            {
                "Main.java": d("""
                import java.io.FileReader;

                public class Main {
                    public static void main(String[] args) throws Exception {
                        System.out.println(new FileReader("secret/key.txt").read());
                    }
                }
                """)
            },
        )
    )
    jv(
        "h-java-syntax-string",
        "SYNTAX_ERROR",
        """
        public class Main {
            public static void main(String[] args) {
                String s = "open;
            }
        }
        """,
    )
    jv(
        "h-java-timeout-completable",
        "TIMEOUT",
        """
        import java.util.concurrent.*;

        public class Main {
            public static void main(String[] args) throws Exception {
                CompletableFuture<String> f = new CompletableFuture<String>()
                    .orTimeout(100, TimeUnit.MILLISECONDS);
                System.out.println(f.get());
            }
        }
        """,
    )

    def sh(cid: str, label: str, script: str) -> None:
        add(Case(cid, label, "shell", "bash build.sh", {"build.sh": d(script)}))

    sh(
        "h-sh-file-source",
        "FILE_ACCESS",
        """
        set -e
        source ./env/production.sh
        echo "$API_URL"
        """,
    )
    sh(
        "h-sh-res-python-module",
        "RESOURCE_ERROR",
        f"""
        {PY} -m corpus_missing_tool_module --help
        """,
    )
    sh(
        "h-sh-syntax-done",
        "SYNTAX_ERROR",
        """
        while true
          echo waiting
        done
        """,
    )
    sh(
        "h-sh-timeout-curl",
        "TIMEOUT",
        """
        curl -sS --max-time 0.3 "http://127.0.0.1:$PORT_SILENT/slow"
        """,
    )
    sh(
        "h-sh-net-curl-reset",
        "NETWORK_ERROR",
        """
        curl -sS "http://127.0.0.1:$PORT_RESET/" -d 'x=1'
        """,
    )
    sh(
        "h-sh-res-dd",
        "RESOURCE_ERROR",
        """
        dd if=/dev/zero of=/dev/full bs=1k count=1
        """,
    )
    sh(
        "h-sh-type-printf",
        "TYPE_ERROR",
        """
        printf '%d items\\n' "twelve"
        exit 1
        """,
    )
    sh(
        "h-sh-unknown-message",
        "UNKNOWN",
        """
        echo "deploy step failed: release notes are empty"
        exit 1
        """,
    )
    out.extend(ecosystems.cases(Case))
    return out


# --- running -----------------------------------------------------------------------------------


def tool_versions() -> dict[str, str]:
    def first_line(argv: list[str]) -> str:
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            return "missing"
        return (
            (done.stdout or done.stderr).strip().splitlines()[0]
            if (done.stdout or done.stderr).strip()
            else "?"
        )

    return {
        "python": first_line([PY, "--version"]),
        "pytest": first_line([PY, "-m", "pytest", "--version"]),
        "mypy": first_line([PY, "-m", "mypy", "--version"]),
        "ruff": first_line([PY, "-m", "ruff", "--version"]),
        "node": first_line(["node", "--version"]),
        "npm": first_line(["npm", "--version"]),
        "jest": first_line([f"{NPM_TOOLS}/node_modules/.bin/jest", "--version"]),
        "tsc": first_line([f"{NPM_TOOLS}/node_modules/.bin/tsc", "--version"]),
        "cargo": first_line(["cargo", "--version"]),
        "rustc": first_line(["rustc", "--version"]),
        "javac": first_line(["javac", "-version"]),
        "java": first_line(["java", "-version"]),
        "bash": first_line(["bash", "--version"]),
        "gcc": first_line(["gcc", "--version"]),
        **ecosystem_versions(first_line),
    }


def ecosystem_versions(first_line: Callable[[list[str]], str]) -> dict[str, str]:
    """The tools of the ecosystem batch (``ecosystems.py``)."""
    eco = ecosystems.ECO_BIN
    return {
        "ruby": first_line(["ruby", "--version"]),
        "rspec": first_line(["rspec", "--version"]),
        "bundler": first_line(["bundle", "--version"]),
        "php": first_line(["php", "--version"]),
        "phpunit": first_line(["phpunit", "--version"]),
        "composer": first_line(["composer", "--version", "--no-ansi"]),
        "elixir": first_line(["elixir", "--short-version"]),
        "ghc": first_line(["ghc", "--version"]),
        "cabal": first_line(["cabal", "--version"]),
        # these print a JVM warning or a banner first: their Debian package's version
        "kotlinc": first_line(["dpkg-query", "-W", "-f=kotlin ${Version}", "kotlin"]),
        "gradle": first_line(["dpkg-query", "-W", "-f=gradle ${Version}", "gradle"]),
        "junit": first_line(["dpkg-query", "-W", "-f=junit4 ${Version}", "junit4"]),
        "nix": first_line(["nix-instantiate", "--version"]),
        "bazel": first_line(
            ["dpkg-query", "-W", "-f=bazel-bootstrap ${Version}", "bazel-bootstrap"]
        ),
        "cmake": first_line(["cmake", "--version"]),
        "conan": first_line([f"{eco}/conan", "--version"]),
        "pre-commit": first_line([f"{eco}/pre-commit", "--version"]),
        "go": first_line(["go", "version"]),
        "g++": first_line(["g++", "--version"]),
        **{
            tool: first_line(["/bin/sh", "-c", command])
            for tool, command in ecosystems.fresh_round.VERSIONS.items()
        },
        "pytest-timeout": first_line(
            [
                f"{eco}/python",
                "-c",
                "import importlib.metadata as m; print(m.version('pytest-timeout'))",
            ]
        ),
    }


def run_case(case: Case, env: dict[str, str]) -> tuple[str, int | None, float]:
    where = WORK / case.id
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True)
    if case.base == "cargo":
        # one shared target dir keeps cargo fast; each case still builds its own crate
        env = {**env, "CARGO_TARGET_DIR": str(WORK / "_cargo-target")}
    for name, text in {**BASES.get(case.base, {}), **case.files}.items():
        target = where / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    started = time.monotonic()
    try:
        done = subprocess.run(
            ["/bin/sh", "-c", case.cmd],
            cwd=where,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=CASE_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        output = exc.stdout or b""
        return output.decode("utf-8", "replace"), None, time.monotonic() - started
    return done.stdout.decode("utf-8", "replace"), done.returncode, time.monotonic() - started


def main(argv: list[str]) -> int:
    prefix = argv[0] if argv else ""
    ports = {
        "PORT_REFUSED": str(_free_port()),
        "PORT_SILENT": str(_serve("silent")),
        "PORT_RESET": str(_serve("reset")),
        "PORT_CLOSE": str(_serve("close")),
    }
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/root"),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "FORCE_COLOR": "0",
        "CI": "true",
        "RUST_BACKTRACE": "0",
        "npm_config_update_notifier": "false",
        **ports,
    }
    for key in ("CARGO_HOME", "RUSTUP_HOME", "JAVA_HOME"):
        if key in os.environ:
            env[key] = os.environ[key]
    manifest = json.loads(MANIFEST.read_text()) if MANIFEST.exists() else {"cases": []}
    entries = {entry["id"]: entry for entry in manifest.get("cases", [])}
    selected = [case for case in cases() if case.id.startswith(prefix)]
    ids = [case.id for case in cases()]
    assert len(ids) == len(set(ids)), "duplicate case ids"
    CASES_DIR.mkdir(parents=True, exist_ok=True)
    for case in selected:
        output, code, took = run_case(case, env)
        for port in ports.values():  # the ports change from run to run; the logs should not
            output = output.replace(port, "PORT")
        (CASES_DIR / f"{case.id}.log").write_text(output, encoding="utf-8")
        entries[case.id] = {
            "id": case.id,
            "label": case.label,
            "tool": case.tool,
            "command": case.cmd.replace(str(NPM_TOOLS), "$NPM_TOOLS")
            .replace(ecosystems.ECO_BIN, "$ECO_BIN")
            .replace(PY, "python"),
            "exit_code": code,
            "note": case.note,
            "file": f"cases/{case.id}.log",
            **({"ecosystem": case.ecosystem} if case.ecosystem else {}),
        }
        status = "ok" if code not in (0, None) else f"CHECK exit={code}"
        print(f"{case.id:32} {case.label:18} {took:6.1f}s {status}", flush=True)
    ecosystems.stop_daemons({case.tool for case in selected})
    known = set(ids)
    manifest = {
        "generated_by": "tests/corpus/generate.py",
        "generated_at": time.strftime("%Y-%m-%d"),
        # a tool missing now keeps the version its cases were made with
        "tools": {
            **manifest.get("tools", {}),
            **{tool: v for tool, v in tool_versions().items() if v != "missing"},
        },
        "cases": [entries[i] for i in ids if i in entries and i in known],
    }
    MANIFEST.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
