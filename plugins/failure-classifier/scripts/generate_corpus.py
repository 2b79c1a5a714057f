"""Build the labelled corpus of real failure output under ``tests/corpus/cases/``.

Every case is made by running a real tool on a small real project: pytest, unittest, mypy, pip
and uv (against the real package index, for names and versions that do not exist), node, npm
(against the real npm registry), tsc, cargo and rustc (offline), go (module proxy off), javac
and Maven (offline); and by running real loopctl loops (the scripted agent, real test commands,
real git) for the cases that need a history: flaky tests, infinite loops, context exhaustion.
Flaky tests really flip: they depend on ``random`` or the clock, and the generator runs them
until it has seen both outcomes.

Each case directory holds ``case.json`` (label, tool, command, tool version, description), the
output (``logs/N.log`` in iteration order, maybe ``rerun.log``) or a loop's state directory
(``state/``), and ``workdir/``: the project's own small files, so the classifier can tell the
project's modules from packages. Absolute paths of the temporary project are replaced by
``{WORKDIR}``; the accuracy script puts them back.

The cases across ecosystems (poetry, tox, nox, pytest plugins, pnpm, jest, vitest, make, gcc,
g++, ld, pkg-config, CMake, cargo, go, Maven, java) run offline: a dependency failure is a
package missing from the case's own wheel directory (real wheels written by ``wheel()``) or an
empty registry cache, a header, library or tool that is not installed, a version of Python,
Rust, Go or Java the machine does not have, or a stale lock file. Their tools come from
``$FC_TOOLS`` (default ``/tmp/fc-tools``): ``python -m venv $FC_TOOLS/uvenv &&
$FC_TOOLS/uvenv/bin/pip install uv poetry tox nox pytest-timeout`` and ``cd $FC_TOOLS && npm
install pnpm jest vitest typescript``; Maven uses the machine's local repository, offline.
``case.json`` records each tool's version.

Usage: ``python scripts/generate_corpus.py [--only PREFIX[,PREFIX…]] [--keep] [--heldout]``
(needs node, npm, cargo, go, java/mvn, gcc, make, cmake, and network access to PyPI and npm for
the first cases; a case whose tool is missing is skipped and reported, and existing cases are
kept).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

#: The one test of a project whose run fails before any test runs (a tool or plugin missing).
PASSING_TEST = "def test_x():\n    assert sum([1, 2]) == 3\n"

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parent / "tests" / "corpus" / "cases"
TOOLS = Path(os.environ.get("FC_TOOLS", "/tmp/fc-tools"))
PY = sys.executable
MAX_LOG = 200_000
SKIP_COPY = {"node_modules", "target", ".git", ".loopctl", "__pycache__", ".mypy_cache", ".venv"}
SKIP_COPY |= {".pytest_cache", "package-lock.json", "Cargo.lock", "go.sum", "loopctl.toml"}
SKIP_COPY |= {"dist-newstyle", "_build", ".gradle", "build", "out"}
SKIP_COPY |= {"autom4te.cache", "config.log", "config.status", "erl_crash.dump"}


class Skip(Exception):
    """A tool this case needs is not installed."""


class Case:
    def __init__(self, case_id: str, label: str, tool: str, description: str) -> None:
        self.id, self.label, self.tool, self.description = case_id, label, tool, description
        self.tmp = Path(tempfile.mkdtemp(prefix="fc-corpus-"))
        self.workdir = self.tmp / "project"
        self.workdir.mkdir()
        self.logs: list[str] = []
        self.rerun: str | None = None
        self.same_code = False
        self.commands: list[str] = []
        self.state: Path | None = None
        self.versions: dict[str, str] = {}
        self.last_exit = 0
        #: The context-error category the case was written to produce, where it has one.
        self.category: str | None = None
        #: The ecosystem, where the tool alone does not tell it (``make`` under Autotools).
        self.ecosystem: str | None = None

    def write(self, relative: str, text: str) -> None:
        path = self.workdir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    def sh(self, command: str, *, env: dict[str, str] | None = None, timeout: float = 300) -> str:
        done = subprocess.run(
            command,
            shell=True,
            cwd=self.workdir,
            capture_output=True,
            timeout=timeout,
            env={**os.environ, "NO_COLOR": "1", "FORCE_COLOR": "0", **(env or {})},
        )
        self.last_exit = done.returncode
        return (done.stdout + done.stderr).decode("utf-8", errors="replace")

    def run(self, command: str, *, passes: bool = False, **kwargs: Any) -> str:
        """Run the case's test command and keep its output as the next iteration's log; a run
        expected to fail that passes is a broken case (a package that is installed after all)."""
        self.commands.append(command)
        out = self.sh(command, **kwargs)
        if self.last_exit == 0 and not passes:
            raise Skip(f"`{command}` passed, but the case needs it to fail")
        self.logs.append(out)
        return out

    def need(self, tool: str, version_cmd: str) -> None:
        if shutil.which(tool) is None and not Path(tool).exists():
            raise Skip(f"{tool} is not installed")
        self.versions[tool] = self.sh(version_cmd).strip().splitlines()[0][:100]


CASES: list[tuple[str, str, str, str, Callable[[Case], None]]] = []
#: Cases written after the rules were frozen and never used to tune them (``--heldout``).
HELDOUT: list[tuple[str, str, str, str, Callable[[Case], None]]] = []
HELDOUT_DIR = HERE.parent / "tests" / "corpus" / "heldout"


def case(
    case_id: str, label: str, tool: str, description: str, *, heldout: bool = False
) -> Callable[..., Any]:
    def register(function: Callable[[Case], None]) -> Callable[[Case], None]:
        (HELDOUT if heldout else CASES).append((case_id, label, tool, description, function))
        return function

    return register


def py_version(c: Case) -> None:
    c.versions["python"] = sys.version.split()[0]
    c.versions["pytest"] = c.sh(f"{PY} -m pytest --version").strip()


PYTEST = f"{PY} -m pytest -q -p no:cacheprovider"
UNITTEST = f"{PY} -m unittest"

# --- Python code errors -------------------------------------------------------------------------


@case("py-assert", "code_error", "pytest", "an assertion fails: wrong arithmetic")
def _(c: Case) -> None:
    py_version(c)
    c.write("calc.py", "def add(a, b):\n    return a - b\n")
    c.write("test_calc.py", "from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    c.run(PYTEST)


@case("py-typeerror", "code_error", "pytest", "a call with the wrong number of arguments")
def _(c: Case) -> None:
    py_version(c)
    c.write("shop/__init__.py", "")
    c.write("shop/cart.py", "def total(items, tax):\n    return sum(items) * (1 + tax)\n")
    c.write(
        "tests/test_cart.py",
        "from shop.cart import total\n\ndef test_total():\n    assert total([1, 2]) == 3\n",
    )
    c.run(PYTEST)


@case("py-attributeerror", "code_error", "pytest", "AttributeError on None")
def _(c: Case) -> None:
    py_version(c)
    c.write(
        "users.py",
        "def find(name):\n    return None\n\ndef email(name):\n    return find(name).email\n",
    )
    c.write(
        "test_users.py",
        "from users import email\n\ndef test_email():\n    assert email('ann') == 'ann@x.org'\n",
    )
    c.run(PYTEST)


@case("py-nameerror", "code_error", "pytest", "an undefined name")
def _(c: Case) -> None:
    py_version(c)
    c.write("report.py", "def render(rows):\n    return '\\n'.join(fmt(r) for r in rows)\n")
    c.write(
        "test_report.py",
        "from report import render\n\ndef test_render():\n    assert render([1]) == '1'\n",
    )
    c.run(PYTEST)


@case("py-syntaxerror", "code_error", "pytest", "a syntax error in the module under test")
def _(c: Case) -> None:
    py_version(c)
    c.write("parse.py", "def parse(text)\n    return text.split(',')\n")
    c.write(
        "test_parse.py",
        "from parse import parse\n\ndef test_parse():\n    assert parse('a,b') == ['a', 'b']\n",
    )
    c.run(PYTEST)


@case("py-indentation", "code_error", "unittest", "an indentation error")
def _(c: Case) -> None:
    py_version(c)
    c.write("geo.py", "def area(w, h):\n  x = w\n    return x * h\n")
    c.write(
        "test_geo.py",
        "import unittest\nfrom geo import area\n\nclass T(unittest.TestCase):\n"
        "    def test_area(self):\n        self.assertEqual(area(2, 3), 6)\n",
    )
    c.run(f"{UNITTEST} discover -q")


@case("py-keyerror", "code_error", "pytest", "a KeyError from a missing config key")
def _(c: Case) -> None:
    py_version(c)
    c.write("settings.py", "DEFAULTS = {'host': 'x'}\n\ndef port():\n    return DEFAULTS['port']\n")
    c.write(
        "test_settings.py",
        "from settings import port\n\ndef test_port():\n    assert port() == 80\n",
    )
    c.run(PYTEST)


@case("py-own-submodule", "code_error", "pytest", "a missing module of the project's own package")
def _(c: Case) -> None:
    py_version(c)
    c.write("billing/__init__.py", "")
    c.write(
        "billing/invoice.py",
        "from billing.rates import vat\n\ndef gross(n):\n    return n * (1 + vat())\n",
    )
    c.write(
        "tests/test_invoice.py",
        "from billing.invoice import gross\n\ndef test_gross():\n    assert gross(100) == 120\n",
    )
    c.run(PYTEST)


@case("py-own-helper", "code_error", "pytest", "a test imports a helper module the agent renamed")
def _(c: Case) -> None:
    py_version(c)
    c.write("app/__init__.py", "")
    c.write("app/core.py", "def double(x):\n    return 2 * x\n")
    c.write("tests/helpers_new.py", "def sample():\n    return 21\n")
    c.write(
        "tests/test_core.py",
        "from app.core import double\nfrom helpers import sample\n\ndef test_double():\n    assert double(sample()) == 42\n",
    )
    c.run(PYTEST)


@case("py-own-cannot-import", "code_error", "pytest", "importing a name the project's module lacks")
def _(c: Case) -> None:
    py_version(c)
    c.write("store/__init__.py", "")
    c.write("store/models.py", "class Item:\n    pass\n")
    c.write(
        "test_store.py",
        "from store.models import Item, Order\n\ndef test_order():\n    assert Order\n",
    )
    c.run(PYTEST)


@case(
    "py-third-party-bad-name",
    "code_error",
    "pytest",
    "a name that an installed package does not have (a made-up API)",
)
def _(c: Case) -> None:
    py_version(c)
    c.write(
        "test_api.py",
        "from attrs import define_everything\n\ndef test_x():\n    assert define_everything\n",
    )
    c.run(PYTEST)


@case(
    "py-conn-refused",
    "code_error",
    "pytest",
    "a client test against a service that is never started (deterministic ECONNREFUSED)",
)
def _(c: Case) -> None:
    py_version(c)
    c.write(
        "test_client.py",
        "import socket\n\ndef test_ping():\n    s = socket.create_connection(('127.0.0.1', 1), timeout=1)\n    s.close()\n",
    )
    c.run(PYTEST)


@case(
    "py-port-in-use",
    "code_error",
    "pytest",
    "a test binds a port the module already holds (deterministic EADDRINUSE)",
)
def _(c: Case) -> None:
    py_version(c)
    c.write(
        "server.py",
        "import socket\nHOLD = socket.socket()\nHOLD.bind(('127.0.0.1', 0))\nHOLD.listen()\nPORT = HOLD.getsockname()[1]\n\n"
        "def start():\n    s = socket.socket()\n    s.bind(('127.0.0.1', PORT))\n    return s\n",
    )
    c.write("test_server.py", "from server import start\n\ndef test_start():\n    assert start()\n")
    c.run(PYTEST)


@case("py-timeout", "code_error", "pytest", "a deterministic TimeoutError raised by the code")
def _(c: Case) -> None:
    py_version(c)
    c.write(
        "jobs.py", "def wait(job):\n    raise TimeoutError(f'job {job} did not finish in 30 s')\n"
    )
    c.write(
        "test_jobs.py", "from jobs import wait\n\ndef test_wait():\n    assert wait('a') is None\n"
    )
    c.run(PYTEST)


@case("py-fixture-missing", "code_error", "pytest", "a test asks for a fixture that does not exist")
def _(c: Case) -> None:
    py_version(c)
    c.write("test_db.py", "def test_rows(database):\n    assert database.rows() == []\n")
    c.run(PYTEST)


@case(
    "py-message-mentions-module",
    "code_error",
    "pytest",
    "a test of an error formatter whose expected text mentions a missing module",
)
def _(c: Case) -> None:
    py_version(c)
    c.write("fmt.py", "def explain(name):\n    return f\"No module named '{name}'\"\n")
    c.write(
        "test_fmt.py",
        "from fmt import explain\n\ndef test_explain():\n"
        "    assert explain('yaml') == \"ModuleNotFoundError: No module named 'yaml' (pip install pyyaml)\"\n",
    )
    c.run(PYTEST)


@case("py-unittest-assert", "code_error", "unittest", "a unittest assertion fails")
def _(c: Case) -> None:
    py_version(c)
    c.write("slug.py", "def slug(s):\n    return s.lower()\n")
    c.write(
        "test_slug.py",
        "import unittest\nfrom slug import slug\n\nclass SlugTest(unittest.TestCase):\n"
        "    def test_spaces(self):\n        self.assertEqual(slug('A B'), 'a-b')\n"
        "    def test_lower(self):\n        self.assertEqual(slug('AB'), 'ab')\n",
    )
    c.run(f"{UNITTEST} discover -v")


@case(
    "py-unittest-own-import",
    "code_error",
    "unittest",
    "unittest: the project's module is missing a submodule",
)
def _(c: Case) -> None:
    py_version(c)
    c.write("inventory/__init__.py", "")
    c.write(
        "test_stock.py",
        "import unittest\nfrom inventory.stock import total\n\nclass T(unittest.TestCase):\n"
        "    def test_total(self):\n        self.assertEqual(total([]), 0)\n",
    )
    c.run(f"{UNITTEST} discover -q")


@case("py-mypy-type", "code_error", "mypy", "mypy: incompatible types")
def _(c: Case) -> None:
    c.versions["mypy"] = c.sh(f"{PY} -m mypy --version").strip()
    c.write(
        "app.py", "def count(xs: list[int]) -> int:\n    return len(xs)\n\nn: str = count([1])\n"
    )
    c.run(f"{PY} -m mypy --no-incremental app.py")


@case(
    "py-mypy-own-missing",
    "code_error",
    "mypy",
    "mypy: a missing module of the project's own package",
)
def _(c: Case) -> None:
    c.versions["mypy"] = c.sh(f"{PY} -m mypy --version").strip()
    c.write("pkg/__init__.py", "")
    c.write("pkg/main.py", "from pkg.helpers import run\n\nrun()\n")
    c.run(f"{PY} -m mypy --no-incremental pkg")


@case("py-script-zerodiv", "code_error", "python", "a plain script fails with ZeroDivisionError")
def _(c: Case) -> None:
    py_version(c)
    c.write("check.py", "def mean(xs):\n    return sum(xs) / len(xs)\n\nassert mean([]) == 0\n")
    c.run(f"{PY} check.py")


@case("py-recursion", "code_error", "pytest", "unbounded recursion")
def _(c: Case) -> None:
    py_version(c)
    c.write("tree.py", "def depth(n):\n    return 1 + depth(n)\n")
    c.write(
        "test_tree.py", "from tree import depth\n\ndef test_depth():\n    assert depth(3) == 3\n"
    )
    c.run(PYTEST)


@case("py-many-failures", "code_error", "pytest", "ten parametrised failures")
def _(c: Case) -> None:
    py_version(c)
    c.write("conv.py", "def c2f(c):\n    return c * 9 / 5\n")
    c.write(
        "test_conv.py",
        "import pytest\nfrom conv import c2f\n\n@pytest.mark.parametrize('c', range(10))\n"
        "def test_c2f(c):\n    assert c2f(c) == c * 9 / 5 + 32\n",
    )
    c.run(PYTEST)


@case("py-hypothesis", "code_error", "pytest+hypothesis", "a property test finds a counterexample")
def _(c: Case) -> None:
    py_version(c)
    c.write(
        "enc.py",
        "def encode(s):\n    return s.encode('ascii')\n\ndef decode(b):\n    return b.decode('ascii')\n",
    )
    c.write(
        "test_enc.py",
        "from hypothesis import given, strategies as st\nfrom enc import encode, decode\n\n"
        "@given(st.text())\ndef test_roundtrip(s):\n    assert decode(encode(s)) == s\n",
    )
    c.run(PYTEST)


@case("py-doctest", "code_error", "pytest", "a doctest fails")
def _(c: Case) -> None:
    py_version(c)
    c.write(
        "words.py",
        'def title(s):\n    """\n    >>> title(\'hello world\')\n    \'Hello World\'\n    """\n    return s.capitalize()\n',
    )
    c.run(f"{PYTEST} --doctest-modules words.py")


# --- Python dependency issues ---------------------------------------------------------------------


@case(
    "py-dep-pytest", "dependency_issue", "pytest", "a test imports a package that is not installed"
)
def _(c: Case) -> None:
    py_version(c)
    c.write(
        "test_feed.py",
        "import feedparser_nonexistent_xyz\n\ndef test_feed():\n    assert feedparser_nonexistent_xyz\n",
    )
    c.run(PYTEST)


@case(
    "py-dep-in-module",
    "dependency_issue",
    "pytest",
    "the module under test imports a third-party package that is not installed",
)
def _(c: Case) -> None:
    py_version(c)
    c.write("app/__init__.py", "")
    c.write("app/http.py", "import requests\n\ndef get(url):\n    return requests.get(url).text\n")
    c.write("tests/test_http.py", "from app.http import get\n\ndef test_get():\n    assert get\n")
    c.run(PYTEST)


@case("py-dep-unittest", "dependency_issue", "unittest", "unittest: a third-party import fails")
def _(c: Case) -> None:
    py_version(c)
    c.write(
        "test_yaml.py",
        "import unittest\nimport xmltodict\n\nclass T(unittest.TestCase):\n    def test_load(self):\n"
        "        self.assertEqual(xmltodict.parse('<a>1</a>'), {'a': '1'})\n",
    )
    c.run(f"{UNITTEST} discover -q")


@case(
    "py-dep-script", "dependency_issue", "python", "a script's third-party submodule import fails"
)
def _(c: Case) -> None:
    py_version(c)
    c.write("main.py", "from numpy_nonexistent_xyz.linalg import norm\nprint(norm([3, 4]))\n")
    c.run(f"{PY} main.py")


@case(
    "pip-no-distribution",
    "dependency_issue",
    "pip",
    "pip: a requirement that does not exist on PyPI",
)
def _(c: Case) -> None:
    c.versions["pip"] = c.sh(f"{PY} -m pip --version").strip()[:60]
    c.write("requirements.txt", "loopctl-corpus-nonexistent-package-xyz==1.0\n")
    c.run(f"{PY} -m pip install --dry-run --no-cache-dir -r requirements.txt && {PYTEST}")


@case(
    "pip-no-version",
    "dependency_issue",
    "pip",
    "pip: a version of a real package that does not exist",
)
def _(c: Case) -> None:
    c.versions["pip"] = c.sh(f"{PY} -m pip --version").strip()[:60]
    c.run(f"{PY} -m pip install --dry-run --no-cache-dir 'attrs==999.0.0'")


@case("pip-conflict", "dependency_issue", "pip", "pip: two requirements that cannot both hold")
def _(c: Case) -> None:
    c.versions["pip"] = c.sh(f"{PY} -m pip --version").strip()[:60]
    c.write("requirements.txt", "attrs==23.1.0\nattrs==23.2.0\n")
    c.run(f"{PY} -m pip install --dry-run --no-cache-dir -r requirements.txt")


@case("uv-no-solution", "dependency_issue", "uv", "uv: a requirement that is not in the registry")
def _(c: Case) -> None:
    uv = TOOLS / "uvenv" / "bin" / "uv"
    c.need(str(uv), f"{uv} --version")
    c.write(
        "pyproject.toml",
        "[project]\nname = 'demo'\nversion = '0.1.0'\nrequires-python = '>=3.10'\ndependencies = ['loopctl-corpus-nonexistent-xyz>=1']\n",
    )
    c.run(f"{uv} lock --no-cache", env={"UV_PYTHON": PY})


@case("uv-conflict", "dependency_issue", "uv", "uv: conflicting version constraints")
def _(c: Case) -> None:
    uv = TOOLS / "uvenv" / "bin" / "uv"
    c.need(str(uv), f"{uv} --version")
    c.write(
        "pyproject.toml",
        "[project]\nname = 'demo'\nversion = '0.1.0'\nrequires-python = '>=3.10'\ndependencies = ['attrs<20', 'attrs>=23']\n",
    )
    c.run(f"{uv} lock --no-cache", env={"UV_PYTHON": PY})


@case("mypy-missing-stubs", "dependency_issue", "mypy", "mypy: library stubs are not installed")
def _(c: Case) -> None:
    c.versions["mypy"] = c.sh(f"{PY} -m mypy --version").strip()
    c.write(
        "fetch.py", "import requests\n\ndef get(u: str) -> str:\n    return requests.get(u).text\n"
    )
    c.run(f"{PY} -m mypy --no-incremental fetch.py")


@case(
    "mypy-missing-package",
    "dependency_issue",
    "mypy",
    "mypy: a third-party package is not installed",
)
def _(c: Case) -> None:
    c.versions["mypy"] = c.sh(f"{PY} -m mypy --version").strip()
    c.write("plot.py", "import matplotlib_nonexistent_xyz as m\n\nm.show()\n")
    c.run(f"{PY} -m mypy --no-incremental plot.py")


@case("py-shared-library", "dependency_issue", "python", "a system library is missing")
def _(c: Case) -> None:
    py_version(c)
    c.write(
        "test_native.py",
        "import ctypes\n\ndef test_lib():\n    assert ctypes.CDLL('libloopctlcorpusxyz.so.1')\n",
    )
    c.run(PYTEST)


@case("py-metadata-missing", "dependency_issue", "python", "a distribution's metadata is missing")
def _(c: Case) -> None:
    py_version(c)
    c.write(
        "version.py",
        "from importlib.metadata import version\nprint(version('loopctl-corpus-nonexistent-xyz'))\n",
    )
    c.run(f"{PY} version.py")


@case("sh-runner-missing", "dependency_issue", "sh", "the test runner is not installed")
def _(c: Case) -> None:
    c.write("test_x.py", "def test_x():\n    pass\n")
    c.run("nose2-loopctl-corpus -v")


# --- JavaScript and TypeScript ---------------------------------------------------------------------

NODE_TEST = "node --test"


def node_version(c: Case) -> None:
    c.need("node", "node --version")


@case("node-assert", "code_error", "node --test", "a strictEqual assertion fails")
def _(c: Case) -> None:
    node_version(c)
    c.write("sum.js", "exports.sum = (a, b) => a - b;\n")
    c.write(
        "sum.test.js",
        "const test = require('node:test');\nconst assert = require('node:assert');\nconst { sum } = require('./sum');\ntest('sum', () => { assert.strictEqual(sum(2, 3), 5); });\n",
    )
    c.run(NODE_TEST)


@case("node-typeerror", "code_error", "node --test", "x is not a function")
def _(c: Case) -> None:
    node_version(c)
    c.write("api.js", "exports.client = { fetch: 1 };\n")
    c.write(
        "api.test.js",
        "const test = require('node:test');\nconst { client } = require('./api');\ntest('fetch', () => { client.fetch('/x'); });\n",
    )
    c.run(NODE_TEST)


@case("node-referenceerror", "code_error", "node --test", "an undefined variable")
def _(c: Case) -> None:
    node_version(c)
    c.write("cart.js", "exports.total = (items) => items.reduce((a, b) => a + b, tax);\n")
    c.write(
        "cart.test.js",
        "const test = require('node:test');\nconst assert = require('node:assert');\nconst { total } = require('./cart');\ntest('total', () => { assert.equal(total([1]), 1); });\n",
    )
    c.run(NODE_TEST)


@case(
    "node-own-module", "code_error", "node --test", "require of a project file that does not exist"
)
def _(c: Case) -> None:
    node_version(c)
    c.write("lib/index.js", "const { fmt } = require('./format');\nexports.show = (x) => fmt(x);\n")
    c.write(
        "index.test.js",
        "const test = require('node:test');\nconst { show } = require('./lib/index');\ntest('show', () => { show(1); });\n",
    )
    c.run(NODE_TEST)


@case(
    "node-esm-own", "code_error", "node", "an ES module imports a project file that does not exist"
)
def _(c: Case) -> None:
    node_version(c)
    c.write("package.json", '{"type": "module"}\n')
    c.write("main.js", "import { parse } from './parser.js';\nconsole.log(parse('x'));\n")
    c.run("node main.js")


@case("node-syntax", "code_error", "node --test", "a syntax error")
def _(c: Case) -> None:
    node_version(c)
    c.write("util.js", "exports.f = (x) => { return x +; };\n")
    c.write(
        "util.test.js",
        "const test = require('node:test');\nconst { f } = require('./util');\ntest('f', () => f(1));\n",
    )
    c.run(NODE_TEST)


@case(
    "node-npm-test-fails",
    "code_error",
    "npm test",
    "npm test runs failing tests (npm reports the script failed)",
)
def _(c: Case) -> None:
    node_version(c)
    c.versions["npm"] = c.sh("npm --version").strip()
    c.write(
        "package.json", '{"name": "demo", "version": "1.0.0", "scripts": {"test": "node --test"}}\n'
    )
    c.write("clamp.js", "exports.clamp = (x, lo, hi) => Math.max(x, lo);\n")
    c.write(
        "clamp.test.js",
        "const test = require('node:test');\nconst assert = require('node:assert');\nconst { clamp } = require('./clamp');\ntest('clamp', () => { assert.strictEqual(clamp(9, 0, 5), 5); });\n",
    )
    c.run("npm test")


@case(
    "node-message-mentions-module",
    "code_error",
    "node --test",
    "a test's expected text mentions a missing module",
)
def _(c: Case) -> None:
    node_version(c)
    c.write("explain.js", "exports.explain = (m) => `missing ${m}`;\n")
    c.write(
        "explain.test.js",
        "const test = require('node:test');\nconst assert = require('node:assert');\nconst { explain } = require('./explain');\ntest('explain', () => { assert.strictEqual(explain('lodash'), \"Cannot find module 'lodash'\"); });\n",
    )
    c.run(NODE_TEST)


def tsc(c: Case) -> str:
    binary = TOOLS / "node_modules" / ".bin" / "tsc"
    c.need(str(binary), f"{binary} --version")
    return str(binary)


@case("tsc-type", "code_error", "tsc", "a type error")
def _(c: Case) -> None:
    binary = tsc(c)
    c.write(
        "app.ts",
        "function area(w: number, h: number): number { return w * h; }\nconst a: string = area(2, 3);\nconsole.log(a);\n",
    )
    c.run(f"{binary} --noEmit --strict app.ts")


@case("tsc-own-missing", "code_error", "tsc", "an import of a project file that does not exist")
def _(c: Case) -> None:
    binary = tsc(c)
    c.write("src/app.ts", "import { router } from './routes';\nconsole.log(router);\n")
    c.run(f"{binary} --noEmit --strict src/app.ts")


@case("tsc-arg-type", "code_error", "tsc", "an argument of the wrong type")
def _(c: Case) -> None:
    binary = tsc(c)
    c.write(
        "user.ts",
        "interface User { id: number; name: string }\nfunction greet(u: User) { return u.name; }\ngreet({ id: '1', name: 'a' });\n",
    )
    c.run(f"{binary} --noEmit --strict user.ts")


@case(
    "node-dep-require",
    "dependency_issue",
    "node --test",
    "require of a package that is not installed",
)
def _(c: Case) -> None:
    node_version(c)
    c.write(
        "pad.js", "const pad = require('left-pad-loopctl-corpus');\nexports.p = (s) => pad(s, 4);\n"
    )
    c.write(
        "pad.test.js",
        "const test = require('node:test');\nconst { p } = require('./pad');\ntest('p', () => p('a'));\n",
    )
    c.run(NODE_TEST)


@case(
    "node-dep-esm",
    "dependency_issue",
    "node",
    "an ES module imports a package that is not installed",
)
def _(c: Case) -> None:
    node_version(c)
    c.write("package.json", '{"type": "module"}\n')
    c.write("main.js", "import chalk from 'chalk';\nconsole.log(chalk.red('x'));\n")
    c.run("node main.js")


@case(
    "npm-e404",
    "dependency_issue",
    "npm",
    "npm install of a package that does not exist in the registry",
)
def _(c: Case) -> None:
    node_version(c)
    c.versions["npm"] = c.sh("npm --version").strip()
    c.write(
        "package.json",
        '{"name": "demo", "version": "1.0.0", "dependencies": {"loopctl-corpus-nonexistent-xyz": "^1.0.0"}}\n',
    )
    c.run("npm install --no-audit --no-fund && npm test")


@case("npm-etarget", "dependency_issue", "npm", "npm install of a version that does not exist")
def _(c: Case) -> None:
    node_version(c)
    c.versions["npm"] = c.sh("npm --version").strip()
    c.write(
        "package.json",
        '{"name": "demo", "version": "1.0.0", "dependencies": {"left-pad": "999.0.0"}}\n',
    )
    c.run("npm install --no-audit --no-fund")


@case("npm-eresolve", "dependency_issue", "npm", "npm: conflicting peer dependencies")
def _(c: Case) -> None:
    node_version(c)
    c.versions["npm"] = c.sh("npm --version").strip()
    c.write(
        "package.json",
        '{"name": "demo", "version": "1.0.0", "dependencies": {"react": "17.0.2", "react-dom": "18.2.0"}}\n',
    )
    c.run("npm install --no-audit --no-fund --dry-run")


@case("npm-ci-no-lock", "dependency_issue", "npm", "npm ci without a lock file")
def _(c: Case) -> None:
    node_version(c)
    c.versions["npm"] = c.sh("npm --version").strip()
    c.write(
        "package.json",
        '{"name": "demo", "version": "1.0.0", "dependencies": {"left-pad": "1.3.0"}}\n',
    )
    c.run("npm ci --no-audit --no-fund")


@case("tsc-dep-missing", "dependency_issue", "tsc", "an import of a package that is not installed")
def _(c: Case) -> None:
    binary = tsc(c)
    c.write("app.ts", "import _ from 'lodash';\nconsole.log(_.chunk([1, 2], 1));\n")
    c.run(f"{binary} --noEmit --strict --esModuleInterop app.ts")


@case(
    "tsc-dep-no-types",
    "dependency_issue",
    "tsc",
    "a package without type declarations (@types missing)",
)
def _(c: Case) -> None:
    binary = tsc(c)
    c.write(
        "node_modules/tinycolor-corpus/package.json",
        '{"name": "tinycolor-corpus", "version": "1.0.0", "main": "index.js"}\n',
    )
    c.write("node_modules/tinycolor-corpus/index.js", "module.exports = (s) => s;\n")
    c.write("app.ts", "import color from 'tinycolor-corpus';\nconsole.log(color('red'));\n")
    c.run(f"{binary} --noEmit --strict --esModuleInterop app.ts")


@case(
    "sh-jest-missing", "dependency_issue", "npm test", "npm test needs jest, which is not installed"
)
def _(c: Case) -> None:
    node_version(c)
    c.write("package.json", '{"name": "demo", "version": "1.0.0", "scripts": {"test": "jest"}}\n')
    c.run("npm test")


# --- Rust -------------------------------------------------------------------------------------------

CARGO_TOML = '[package]\nname = "demo"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\n'


def cargo(c: Case) -> None:
    c.need("cargo", "cargo --version")


@case("cargo-assert", "code_error", "cargo test", "an assert_eq! fails")
def _(c: Case) -> None:
    cargo(c)
    c.write("Cargo.toml", CARGO_TOML)
    c.write(
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 { a - b }\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() { assert_eq!(super::add(2, 3), 5); }\n}\n",
    )
    c.run("cargo test --offline --quiet")


@case("cargo-mismatched", "code_error", "cargo test", "mismatched types (E0308)")
def _(c: Case) -> None:
    cargo(c)
    c.write("Cargo.toml", CARGO_TOML)
    c.write("src/lib.rs", "pub fn name() -> String { 42 }\n")
    c.run("cargo test --offline --quiet")


@case(
    "cargo-own-module",
    "code_error",
    "cargo test",
    "an import of the crate's own module that does not exist",
)
def _(c: Case) -> None:
    cargo(c)
    c.write("Cargo.toml", CARGO_TOML)
    c.write("src/lib.rs", "use crate::parser::parse;\n\npub fn run() -> i32 { parse() }\n")
    c.run("cargo test --offline --quiet")


@case("cargo-borrow", "code_error", "cargo build", "a borrow-checker error")
def _(c: Case) -> None:
    cargo(c)
    c.write("Cargo.toml", CARGO_TOML)
    c.write(
        "src/lib.rs",
        "pub fn f() -> usize {\n    let mut v = vec![1];\n    let first = &v[0];\n    v.push(2);\n    *first\n}\n",
    )
    c.run("cargo build --offline --quiet")


@case("cargo-panic", "code_error", "cargo test", "a test panics on unwrap of None")
def _(c: Case) -> None:
    cargo(c)
    c.write("Cargo.toml", CARGO_TOML)
    c.write(
        "src/lib.rs",
        "pub fn first(v: &[i32]) -> Option<i32> { v.first().copied() }\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn empty() { assert_eq!(super::first(&[]).unwrap(), 0); }\n}\n",
    )
    c.run("cargo test --offline --quiet")


@case(
    "cargo-dep-offline",
    "dependency_issue",
    "cargo",
    "a crate the manifest asks for cannot be fetched",
)
def _(c: Case) -> None:
    cargo(c)
    c.write("Cargo.toml", CARGO_TOML + 'serde = "1"\n')
    c.write("src/lib.rs", "pub fn f() {}\n")
    c.run("cargo test --offline --quiet", env={"CARGO_HOME": str(c.tmp / "cargo-home")})


@case(
    "rust-unlinked-crate",
    "dependency_issue",
    "cargo",
    "the code uses a crate Cargo.toml does not declare",
)
def _(c: Case) -> None:
    cargo(c)
    c.write("Cargo.toml", CARGO_TOML)
    c.write(
        "src/lib.rs",
        "use rand::Rng;\n\npub fn roll() -> u8 { rand::thread_rng().gen_range(1..7) }\n",
    )
    c.run("cargo build --offline --quiet")


@case("cargo-path-dep", "dependency_issue", "cargo", "a path dependency is missing")
def _(c: Case) -> None:
    cargo(c)
    c.write("Cargo.toml", CARGO_TOML + 'utils = { path = "../utils" }\n')
    c.write("src/lib.rs", "pub fn f() {}\n")
    c.run("cargo build --offline --quiet")


# --- Go ---------------------------------------------------------------------------------------------

GO_ENV = {"GOPROXY": "off", "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"}


def go(c: Case) -> None:
    c.need("go", "go version")
    c.write("go.mod", "module example.com/demo\n\ngo 1.19\n")


@case("go-test-fail", "code_error", "go test", "t.Errorf in a test")
def _(c: Case) -> None:
    go(c)
    c.write("sum.go", "package demo\n\nfunc Sum(a, b int) int { return a - b }\n")
    c.write(
        "sum_test.go",
        'package demo\n\nimport "testing"\n\nfunc TestSum(t *testing.T) {\n\tif got := Sum(2, 3); got != 5 {\n\t\tt.Errorf("Sum(2, 3) = %d, want 5", got)\n\t}\n}\n',
    )
    c.run("go test ./...", env={**GO_ENV, "GOCACHE": str(c.tmp / "gocache")})


@case("go-undefined", "code_error", "go test", "an undefined name")
def _(c: Case) -> None:
    go(c)
    c.write("calc.go", "package demo\n\nfunc Double(x int) int { return times(x, 2) }\n")
    c.run("go test ./...", env={**GO_ENV, "GOCACHE": str(c.tmp / "gocache")})


@case(
    "go-own-package",
    "code_error",
    "go build",
    "an import of the module's own package that does not exist",
)
def _(c: Case) -> None:
    go(c)
    c.write(
        "main.go",
        'package main\n\nimport "example.com/demo/internal/store"\n\nfunc main() { store.Open() }\n',
    )
    c.run("go build ./...", env={**GO_ENV, "GOCACHE": str(c.tmp / "gocache")})


@case("go-dep-missing", "dependency_issue", "go build", "an import no required module provides")
def _(c: Case) -> None:
    go(c)
    c.write(
        "main.go",
        'package main\n\nimport "github.com/pkg/errors"\n\nfunc main() { _ = errors.New("x") }\n',
    )
    c.run(
        "go vet ./...",
        env={"GOPROXY": "off", "GOTOOLCHAIN": "local", "GOCACHE": str(c.tmp / "gocache")},
    )


@case("go-dep-lookup", "dependency_issue", "go build", "a required module cannot be downloaded")
def _(c: Case) -> None:
    go(c)
    c.write(
        "go.mod", "module example.com/demo\n\ngo 1.19\n\nrequire github.com/google/uuid v1.6.0\n"
    )
    c.write(
        "main.go",
        'package main\n\nimport "github.com/google/uuid"\n\nfunc main() { _ = uuid.New() }\n',
    )
    c.run(
        "go build ./...",
        env={**GO_ENV, "GOCACHE": str(c.tmp / "gocache"), "GOPATH": str(c.tmp / "gopath")},
    )


# --- Java -------------------------------------------------------------------------------------------


@case("javac-type", "code_error", "javac", "incompatible types")
def _(c: Case) -> None:
    c.need("javac", "javac -version")
    c.write(
        "src/App.java",
        'public class App {\n  public static void main(String[] a) {\n    int n = "x";\n  }\n}\n',
    )
    c.run("javac -d out src/App.java")


@case("javac-symbol", "code_error", "javac", "cannot find symbol")
def _(c: Case) -> None:
    c.need("javac", "javac -version")
    c.write(
        "src/App.java",
        "public class App {\n  public static void main(String[] a) {\n    System.out.println(total(3));\n  }\n}\n",
    )
    c.run("javac -d out src/App.java")


@case(
    "javac-dep", "dependency_issue", "javac", "an import of a library that is not on the class path"
)
def _(c: Case) -> None:
    c.need("javac", "javac -version")
    c.write(
        "src/App.java",
        'import org.apache.commons.lang3.StringUtils;\n\npublic class App {\n  public static void main(String[] a) {\n    System.out.println(StringUtils.capitalize("x"));\n  }\n}\n',
    )
    c.run("javac -d out src/App.java")


@case(
    "mvn-offline-dep",
    "dependency_issue",
    "mvn",
    "Maven cannot resolve a dependency (offline, empty local repository)",
)
def _(c: Case) -> None:
    c.need("mvn", "mvn -v")
    c.write(
        "pom.xml",
        "<project><modelVersion>4.0.0</modelVersion><groupId>x</groupId><artifactId>demo</artifactId>"
        "<version>1</version><dependencies><dependency><groupId>org.apache.commons</groupId>"
        "<artifactId>commons-lang3</artifactId><version>3.14.0</version></dependency></dependencies></project>\n",
    )
    c.write("src/main/java/App.java", "public class App {}\n")
    c.run(f"mvn -o -q -B -Dmaven.repo.local={c.tmp / 'm2'} test")


# --- flaky tests (real flips) -----------------------------------------------------------------------

RANDOM_TEST = (
    "import random\n\ndef test_sample():\n    assert random.random() < 0.5, 'unlucky draw'\n"
)


def until_both(c: Case, command: str, *, first: str, then: str, limit: int = 60) -> None:
    """Run ``command`` until its output has failed (``first``) and then passed (``then``)."""
    outputs: list[tuple[bool, str]] = []
    for _ in range(limit):
        out = c.sh(command)
        passed = _passed(out)
        outputs.append((passed, out))
        want_first = first == "pass"
        seen_first = [o for p, o in outputs if p == want_first]
        if (
            seen_first
            and passed == (then == "pass")
            and len(outputs) > 1
            and outputs[-2][0] == want_first
        ):
            c.logs.extend([outputs[-2][1], outputs[-1][1]])
            c.commands.append(command)
            return
    raise Skip(f"never saw {first} then {then} in {limit} runs")


def _passed(out: str) -> bool:
    low = out.lower()
    return ("failed" not in low and "error" not in low and "fail " not in low) and (
        " passed" in low or "\nok" in low or "pass " in low or "test result: ok" in low
    )


@case(
    "flaky-pytest-history",
    "test_flakiness",
    "pytest",
    "a random test failed, then passed on the same code",
)
def _(c: Case) -> None:
    py_version(c)
    c.write("test_random.py", RANDOM_TEST)
    c.same_code = True
    until_both(c, PYTEST, first="fail", then="pass")


@case("flaky-pytest-rerun", "test_flakiness", "pytest", "a timing test failed; pytest --lf passed")
def _(c: Case) -> None:
    py_version(c)
    c.write(
        "test_timing.py",
        "import random, time\n\ndef test_fast_enough():\n    start = time.perf_counter()\n"
        "    time.sleep(random.choice([0.0, 0.0, 0.05]))\n    assert time.perf_counter() - start < 0.03, 'too slow'\n",
    )
    cmd = f"{PY} -m pytest -q"
    for _ in range(60):
        out = c.sh(cmd)
        if not _passed(out):
            again = c.sh(cmd + " --lf")
            if _passed(again):
                c.logs.append(out)
                c.rerun = again
                c.commands.append(cmd)
                return
    raise Skip("no fail-then-pass")


@case(
    "flaky-unittest-rerun",
    "test_flakiness",
    "unittest",
    "a random unittest failed, then passed on rerun",
)
def _(c: Case) -> None:
    py_version(c)
    c.write(
        "test_dice.py",
        "import random, unittest\n\nclass Dice(unittest.TestCase):\n    def test_roll(self):\n        self.assertLess(random.randint(1, 6), 4)\n",
    )
    cmd = f"{UNITTEST} discover -v"
    for _ in range(60):
        out = c.sh(cmd)
        if "FAILED" in out:
            again = c.sh(f"{UNITTEST} test_dice.Dice.test_roll -v")
            if "OK" in again and "FAILED" not in again:
                c.logs.append(out)
                c.rerun = again
                c.commands.append(cmd)
                return
    raise Skip("no fail-then-pass")


@case(
    "flaky-node-rerun",
    "test_flakiness",
    "node --test",
    "a random node test failed, then passed on rerun",
)
def _(c: Case) -> None:
    node_version(c)
    c.write(
        "coin.test.js",
        "const test = require('node:test');\nconst assert = require('node:assert');\ntest('coin', () => { assert.ok(Math.random() < 0.5, 'tails'); });\n",
    )
    for _ in range(60):
        out = c.sh(NODE_TEST)
        if "# fail 1" in out:
            again = c.sh(NODE_TEST)
            if "# fail 0" in again:
                c.logs.append(out)
                c.rerun = again
                c.commands.append(NODE_TEST)
                return
    raise Skip("no fail-then-pass")


@case(
    "flaky-port",
    "test_flakiness",
    "pytest",
    "a test binds a fixed port another process held; the rerun passed",
)
def _(c: Case) -> None:
    py_version(c)
    import socket

    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    port = holder.getsockname()[1]
    holder.listen()
    c.write(
        "test_srv.py",
        f"import socket\n\ndef test_listen():\n    s = socket.socket()\n    s.bind(('127.0.0.1', {port}))\n    s.close()\n",
    )
    c.logs.append(c.sh(PYTEST))
    holder.close()
    c.rerun = c.sh(PYTEST)
    c.commands.append(PYTEST)


@case(
    "flaky-cargo-rerun",
    "test_flakiness",
    "cargo test",
    "a clock-based Rust test failed, then passed on rerun",
)
def _(c: Case) -> None:
    cargo(c)
    c.write("Cargo.toml", CARGO_TOML)
    c.write(
        "src/lib.rs",
        '#[cfg(test)]\nmod tests {\n    #[test]\n    fn even_nanos() {\n        let n = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();\n        assert!(n % 2 == 0, "odd nanos {}", n);\n    }\n}\n',
    )
    c.sh("cargo test --offline --quiet")
    for _ in range(40):
        out = c.sh("cargo test --offline --quiet")
        if "FAILED" in out:
            again = c.sh("cargo test --offline --quiet")
            if "test result: ok" in again:
                c.logs.append(out)
                c.rerun = again
                c.commands.append("cargo test --offline --quiet")
                return
    raise Skip("no fail-then-pass")


@case(
    "flaky-go-history",
    "test_flakiness",
    "go test",
    "a clock-based Go test failed, then passed on the same code",
)
def _(c: Case) -> None:
    go(c)
    c.write(
        "clock_test.go",
        'package demo\n\nimport (\n\t"testing"\n\t"time"\n)\n\nfunc TestEven(t *testing.T) {\n\tif time.Now().Nanosecond()%2 != 0 {\n\t\tt.Fatal("odd nanosecond")\n\t}\n}\n',
    )
    env = {**GO_ENV, "GOCACHE": str(c.tmp / "gocache")}
    c.same_code = True
    for _ in range(40):
        out = c.sh("go test -count=1 ./...", env=env)
        if "FAIL" in out:
            again = c.sh("go test -count=1 ./...", env=env)
            if "FAIL" not in again and "ok" in again:
                c.logs += [out, again]
                c.commands.append("go test -count=1 ./...")
                return
    raise Skip("no fail-then-pass")


@case("flaky-pytest-three", "test_flakiness", "pytest", "fail, pass, fail on the same code")
def _(c: Case) -> None:
    py_version(c)
    c.write("test_random.py", RANDOM_TEST)
    c.same_code = True
    seen: list[tuple[bool, str]] = []
    for _ in range(80):
        out = c.sh(PYTEST)
        seen.append((_passed(out), out))
        tail = [p for p, _ in seen[-3:]]
        if tail == [False, True, False]:
            c.logs += [o for _, o in seen[-3:]]
            c.commands.append(PYTEST)
            return
    raise Skip("no fail-pass-fail")


# negatives for flakiness: confirmation attempts that fail


@case(
    "flaky-neg-rerun-fails", "code_error", "pytest", "a deterministic failure whose rerun fails too"
)
def _(c: Case) -> None:
    py_version(c)
    c.write("test_det.py", "def test_det():\n    assert sorted([3, 1, 2]) == [3, 2, 1]\n")
    c.logs.append(c.sh(PYTEST))
    c.rerun = c.sh(PYTEST)
    c.commands.append(PYTEST)


@case(
    "flaky-neg-port-rerun-fails",
    "code_error",
    "pytest",
    "EADDRINUSE that is deterministic: the rerun fails the same way",
)
def _(c: Case) -> None:
    py_version(c)
    c.write(
        "test_bind.py",
        "import socket\n\ndef test_bind():\n    a = socket.socket(); a.bind(('127.0.0.1', 0)); a.listen()\n    b = socket.socket(); b.bind(a.getsockname())\n",
    )
    c.logs.append(c.sh(PYTEST))
    c.rerun = c.sh(PYTEST)
    c.commands.append(PYTEST)


@case(
    "flaky-neg-code-changed",
    "code_error",
    "pytest",
    "pass, then fail after a code change (the agent broke it)",
)
def _(c: Case) -> None:
    py_version(c)
    c.write("m.py", "def f():\n    return 1\n")
    c.write("test_m.py", "from m import f\n\ndef test_f():\n    assert f() == 1\n")
    c.run(PYTEST, passes=True)
    c.write("m.py", "def f():\n    return 2\n")
    c.run(PYTEST)


@case(
    "flaky-neg-timeout-rerun-fails", "code_error", "node --test", "a test that times out every time"
)
def _(c: Case) -> None:
    node_version(c)
    c.write(
        "slow.test.js",
        "const test = require('node:test');\ntest('slow', { timeout: 100 }, async () => { await new Promise((r) => setTimeout(r, 1000)); });\n",
    )
    c.logs.append(c.sh(NODE_TEST))
    c.rerun = c.sh(NODE_TEST)
    c.commands.append(NODE_TEST)


# --- repeated failures from raw logs -----------------------------------------------------------------


@case("loop-logs-pytest", "infinite_loop", "pytest", "the same failure in three runs")
def _(c: Case) -> None:
    py_version(c)
    c.write("calc.py", "def mul(a, b):\n    return a + b\n")
    c.write("test_calc.py", "from calc import mul\n\ndef test_mul():\n    assert mul(3, 4) == 12\n")
    for _ in range(3):
        c.run(PYTEST)


@case("loop-logs-cargo", "infinite_loop", "cargo", "the same compile error in three runs")
def _(c: Case) -> None:
    cargo(c)
    c.write("Cargo.toml", CARGO_TOML)
    c.write("src/lib.rs", 'pub fn n() -> u8 { "x" }\n')
    for _ in range(3):
        c.run("cargo build --offline --quiet")


@case("loop-logs-node", "infinite_loop", "node --test", "the same failure in four runs")
def _(c: Case) -> None:
    node_version(c)
    c.write("v.js", "exports.valid = (s) => s.length > 3;\n")
    c.write(
        "v.test.js",
        "const test = require('node:test');\nconst assert = require('node:assert');\nconst { valid } = require('./v');\ntest('short', () => { assert.strictEqual(valid('abc'), true); });\n",
    )
    for _ in range(4):
        c.run(NODE_TEST)


@case("loop-neg-progress", "code_error", "pytest", "three runs, each fixing one more test")
def _(c: Case) -> None:
    py_version(c)
    c.write(
        "test_steps.py",
        "import os\n\ndef test_a():\n    assert os.path.exists('a')\n\ndef test_b():\n    assert os.path.exists('b')\n\ndef test_c():\n    assert os.path.exists('c')\n",
    )
    c.run(PYTEST)
    c.write("a", "")
    c.run(PYTEST)
    c.write("b", "")
    c.run(PYTEST)


@case("loop-neg-different", "code_error", "pytest", "three runs with three different failures")
def _(c: Case) -> None:
    py_version(c)
    c.write("test_x.py", "def test_x():\n    assert 1 == 2\n")
    c.run(PYTEST)
    c.write("test_x.py", "def test_x():\n    raise KeyError('k')\n")
    c.run(PYTEST)
    c.write("test_x.py", "def test_x():\n    return undefined_name\n")
    c.run(PYTEST)


@case("loop-neg-two", "code_error", "pytest", "the same failure twice only (below the window)")
def _(c: Case) -> None:
    py_version(c)
    c.write("test_y.py", "def test_y():\n    assert 'a' * 2 == 'aaa'\n")
    c.run(PYTEST)
    c.run(PYTEST)


# --- real loops (state directories) ----------------------------------------------------------------


def loop_case(
    c: Case,
    files: dict[str, str],
    turns: Sequence[Sequence[dict[str, Any]]],
    *,
    test_cmd: str | None = None,
    config: dict[str, Any] | None = None,
) -> None:
    from loopctl.testing import make_project, python_test_cmd, run_loop

    c.versions["loopctl"] = __import__("loopctl").__version__
    shutil.rmtree(c.workdir)
    project = make_project(c.workdir)
    for name, text in files.items():
        project.write(name, text)
    project.commit("corpus project")
    result = run_loop(
        project,
        "make the tests pass",
        turns=turns,
        test_cmd=test_cmd or python_test_cmd(),
        config=config or {},
    )
    c.commands.append(f"loopctl run (scripted agent), ended {result.status}")
    c.state = result.state_dir


CALC = {
    "calc.py": "def add(a, b):\n    return a - b\n",
    "test_calc.py": "import unittest\nfrom calc import add\n\nclass T(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(add(1, 2), 3)\n",
}


@case(
    "state-loop-stuck",
    "infinite_loop",
    "loopctl",
    "the agent changes nothing; the engine's stuck detection stops the loop",
)
def _(c: Case) -> None:
    loop_case(c, CALC, [[{"say": "The code looks right to me."}]])


@case(
    "state-loop-window",
    "infinite_loop",
    "loopctl",
    "three identical failures with no change (stopped at max_iterations 3)",
)
def _(c: Case) -> None:
    loop_case(
        c,
        CALC,
        [[{"say": "Running the tests again."}, {"run": "true"}]],
        config={"limits": {"max_iterations": 3}},
    )


@case(
    "state-loop-oscillate",
    "infinite_loop",
    "loopctl",
    "the agent flips the code between two wrong versions",
)
def _(c: Case) -> None:
    a = {"write": "calc.py", "content": "def add(a, b):\n    return a * b\n"}
    b = {"write": "calc.py", "content": "def add(a, b):\n    return a - b  # fixed\n"}
    turns = [[a], [b], [a], [b]]
    loop_case(
        c,
        {**CALC, "calc.py": "def add(a, b):\n    return a * b\n"},
        turns,
        config={"limits": {"max_iterations": 4}, "stuck": {"enabled": False}},
    )


@case(
    "state-loop-churn",
    "infinite_loop",
    "loopctl",
    "the agent edits a comment each time; the failure never changes",
)
def _(c: Case) -> None:
    turns = [[{"write": "notes.txt", "content": f"attempt {i}\n"}] for i in range(1, 8)]
    loop_case(c, CALC, turns, config={"limits": {"max_iterations": 7}, "stuck": {"enabled": False}})


@case(
    "state-loop-pytest-stuck",
    "infinite_loop",
    "loopctl",
    "pytest suite, the agent only talks; stuck",
)
def _(c: Case) -> None:
    files = {
        "text.py": "def words(s):\n    return s.split(',')\n",
        "test_text.py": "from text import words\n\ndef test_words():\n    assert words('a b') == ['a', 'b']\n",
    }
    loop_case(
        c,
        files,
        [[{"say": "Let me think about it."}]],
        test_cmd=f"{PY} -m pytest -q -p no:cacheprovider",
        config={"limits": {"max_iterations": 4}},
    )


@case(
    "state-neg-progress",
    "code_error",
    "loopctl",
    "the agent fixes one test per iteration; still failing at the end",
)
def _(c: Case) -> None:
    files = {
        "m.py": "def a():\n    return 0\n\ndef b():\n    return 0\n\ndef c():\n    return 0\n",
        "test_m.py": "import unittest\nimport m\n\nclass T(unittest.TestCase):\n    def test_a(self):\n        self.assertEqual(m.a(), 1)\n"
        "    def test_b(self):\n        self.assertEqual(m.b(), 1)\n    def test_c(self):\n        self.assertEqual(m.c(), 1)\n",
    }
    turns = [
        [{"replace": "m.py", "old": "def a():\n    return 0", "new": "def a():\n    return 1"}],
        [{"replace": "m.py", "old": "def b():\n    return 0", "new": "def b():\n    return 1"}],
        [{"say": "next"}],
    ]
    loop_case(c, files, turns, config={"limits": {"max_iterations": 2}})


@case(
    "state-neg-new-error",
    "code_error",
    "loopctl",
    "each iteration's change causes a different failure",
)
def _(c: Case) -> None:
    turns = [
        [{"write": "calc.py", "content": "def add(a, b):\n    return a * b\n"}],
        [{"write": "calc.py", "content": "def add(a, b):\n    return a + c\n"}],
        [{"write": "calc.py", "content": "def add(a, b)\n    return a + b\n"}],
    ]
    loop_case(c, CALC, turns, config={"limits": {"max_iterations": 3}})


FLAKY_FILES = {
    "test_coin.py": "import random, unittest\n\nclass Coin(unittest.TestCase):\n    def test_heads(self):\n        self.assertLess(random.random(), 0.5)\n\n    def test_sum(self):\n        self.assertEqual(1 + 1, 2)\n",
}


@case(
    "state-flaky-pass",
    "test_flakiness",
    "loopctl",
    "a random test fails, the agent changes nothing, it passes: a flaky pass",
)
def _(c: Case) -> None:
    for _ in range(30):
        loop_case(
            c,
            FLAKY_FILES,
            [[{"say": "I did not change anything."}]],
            config={"limits": {"max_iterations": 6}, "stuck": {"enabled": False}},
        )
        assert c.state is not None
        rows = [
            json.loads(line) for line in (c.state / "iterations.jsonl").read_text().splitlines()
        ]
        if len(rows) >= 2 and rows[-1]["tests_passed"] and not rows[-2]["tests_passed"]:
            return
        c.workdir.mkdir(exist_ok=True)
    raise Skip("the random test never failed first")


@case(
    "state-flaky-flip-back",
    "test_flakiness",
    "loopctl",
    "a random test passes, then fails on the same code (completion signal missing kept the loop going)",
)
def _(c: Case) -> None:
    for _ in range(30):
        loop_case(
            c,
            FLAKY_FILES,
            [[{"say": "Nothing to change."}]],
            config={
                "limits": {"max_iterations": 4},
                "stuck": {"enabled": False},
                "completion_signal": "NEVER-SAID",
            },
        )
        assert c.state is not None
        rows = [
            json.loads(line) for line in (c.state / "iterations.jsonl").read_text().splitlines()
        ]
        for end in range(len(rows), 1, -1):
            if not rows[end - 1]["tests_passed"] and rows[end - 2]["tests_passed"]:
                lines = (c.state / "iterations.jsonl").read_text().splitlines()[:end]
                (c.state / "iterations.jsonl").write_text("\n".join(lines) + "\n")
                return
        c.workdir.mkdir(exist_ok=True)
    raise Skip("never saw pass then fail")


@case(
    "state-context-overflow",
    "context_exhaustion",
    "loopctl",
    "the agent runs out of context in its first turn",
)
def _(c: Case) -> None:
    loop_case(
        c,
        CALC,
        [
            [
                {"say": "Reading everything."},
                {"error": "context_overflow", "message": "Prompt is too long"},
            ]
        ],
        config={"limits": {"max_iterations": 1}},
    )


@case(
    "state-context-late",
    "context_exhaustion",
    "loopctl",
    "three normal failing iterations, then the context overflows",
)
def _(c: Case) -> None:
    turns = [
        [{"write": "calc.py", "content": "def add(a, b):\n    return a * b\n"}],
        [{"write": "calc.py", "content": "def add(a, b):\n    return b - a\n"}],
        [{"write": "calc.py", "content": "def add(a, b):\n    return a ** b\n"}],
        [
            {"say": "Let me re-read the whole repository."},
            {
                "error": "context_overflow",
                "message": "input length and `max_tokens` exceed context limit: 198000 + 8192 > 200000",
            },
        ],
    ]
    loop_case(c, CALC, turns, config={"limits": {"max_iterations": 4}})


@case(
    "state-context-restarts",
    "context_exhaustion",
    "loopctl",
    "the context overflows in every session",
)
def _(c: Case) -> None:
    loop_case(
        c,
        CALC,
        [
            [
                {
                    "error": "context_overflow",
                    "message": "Your input exceeds the context window of this model.",
                }
            ]
        ],
        config={"limits": {"max_iterations": 3}},
    )


@case(
    "state-context-tests-pass",
    "context_exhaustion",
    "loopctl",
    "the agent overflows after fixing the code: the tests pass, the turn did not",
)
def _(c: Case) -> None:
    turns = [
        [
            {"replace": "calc.py", "old": "a - b", "new": "a + b"},
            {
                "error": "context_overflow",
                "message": "prompt is too long: 201000 tokens > 200000 maximum",
            },
        ]
    ]
    loop_case(c, CALC, turns, config={"limits": {"max_iterations": 1}})


@case(
    "state-neg-rate-limit",
    "code_error",
    "loopctl",
    "an agent network error; the code is still wrong",
)
def _(c: Case) -> None:
    turns = [
        [{"write": "calc.py", "content": "def add(a, b):\n    return a * b\n"}],
        [{"error": "network", "message": "connection reset by peer"}],
    ]
    loop_case(c, CALC, turns, config={"limits": {"max_iterations": 2}})


@case(
    "state-dep",
    "dependency_issue",
    "loopctl",
    "the agent adds an import of a package that is not installed",
)
def _(c: Case) -> None:
    turns = [
        [
            {
                "write": "calc.py",
                "content": "import numpy_loopctl_corpus as np\n\ndef add(a, b):\n    return int(np.add(a, b))\n",
            }
        ]
    ]
    loop_case(c, CALC, turns, config={"limits": {"max_iterations": 2}})


@case(
    "state-own-module",
    "code_error",
    "loopctl",
    "the agent imports a project module it has not written yet",
)
def _(c: Case) -> None:
    files = {**CALC, "mathlib/__init__.py": ""}
    turns = [
        [
            {
                "write": "calc.py",
                "content": "from mathlib.ops import plus\n\ndef add(a, b):\n    return plus(a, b)\n",
            }
        ]
    ]
    loop_case(c, files, turns, config={"limits": {"max_iterations": 2}})


# --- across ecosystems: the failures a user's first loop meets, and code errors from the same tools --
#
# Every one of these runs offline: a "dependency failure" is a package missing from a local
# wheel directory or registry cache, a header or library that is not installed, a tool that is
# not on PATH, or a version of Python, Rust, Go or Java the project asks for and this machine
# does not have. Tools that come from a package registry (uv, poetry, tox, nox, pytest plugins,
# pnpm, jest, vitest, typescript) are installed once into ``$FC_TOOLS`` (see ``tools()``).


def tools(c: Case, name: str) -> str:
    """The path of a tool installed into ``$FC_TOOLS``: Python tools in ``uvenv/bin``, npm
    tools in ``node_modules/.bin``. Set them up with
    ``python -m venv $FC_TOOLS/uvenv && $FC_TOOLS/uvenv/bin/pip install uv poetry tox nox
    pytest-timeout`` and ``cd $FC_TOOLS && npm install pnpm jest vitest typescript``."""
    for where in (TOOLS / "uvenv" / "bin" / name, TOOLS / "node_modules" / ".bin" / name):
        if where.exists():
            c.versions[name] = c.sh(f"{where} --version").strip().splitlines()[0][:100]
            return str(where)
    raise Skip(f"{name} is not installed in {TOOLS}")


def wheel(
    directory: Path,
    name: str,
    version: str,
    files: dict[str, str],
    *,
    requires_python: str | None = None,
    requires: Sequence[str] = (),
) -> Path:
    """A real (pure-Python) wheel, written directly: no build backend, no network."""
    import base64
    import hashlib
    import zipfile

    info = f"{name}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    if requires_python:
        meta += f"Requires-Python: {requires_python}\n"
    meta += "".join(f"Requires-Dist: {r}\n" for r in requires)
    entries = {
        **files,
        f"{info}/METADATA": meta,
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: corpus\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in entries.items():
        digest = hashlib.sha256(text.encode()).digest()
        encoded = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
        record.append(f"{path},sha256={encoded},{len(text.encode())}")
    entries[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(target, "w") as archive:
        for path, text in entries.items():
            archive.writestr(path, text)
    return target


#: pip looks only in the case's own wheel directory: offline, and the machine's index settings
#: (extra index URLs, find-links) do not leak into the output.
PIP_OFFLINE = {"PIP_CONFIG_FILE": "/dev/null", "PIP_FIND_LINKS": "", "PIP_NO_INDEX": "1"}


def venv(c: Case, *, system_site: bool = False, pip: bool = False) -> Path:
    """A fresh virtual environment outside the project (``{TMP}/env``)."""
    env = c.tmp / "env"
    flags = ("--system-site-packages " if system_site else "") + ("" if pip else "--without-pip")
    c.sh(f"{sys.base_prefix}/bin/python3 -m venv {flags} {env}")
    if not (env / "bin" / "python").exists():
        raise Skip("could not make a virtual environment")
    return env


@case(
    "py-dep-runner-module",
    "dependency_issue",
    "python -m",
    "python -m pytest in a virtual environment without pytest",
)
def _(c: Case) -> None:
    py_version(c)
    env = venv(c)
    c.write("test_calc.py", "def test_add():\n    assert 1 + 1 == 2\n")
    c.run(f"{env}/bin/python -m pytest -q")


@case(
    "py-dep-runner-module-mypy",
    "dependency_issue",
    "python -m",
    "python -m mypy in a virtual environment without mypy",
)
def _(c: Case) -> None:
    py_version(c)
    env = venv(c)
    c.write("calc.py", "def add(a: int, b: int) -> int:\n    return a + b\n")
    c.run(f"{env}/bin/python -m mypy calc.py")


@case(
    "py-dep-installed-mismatch",
    "dependency_issue",
    "pytest",
    "an installed package imports a name its installed dependency lacks (versions disagree)",
)
def _(c: Case) -> None:
    py_version(c)
    wheels = c.tmp / "wheels"
    wheel(wheels, "gridkit", "2.0", {"gridkit/__init__.py": "from tablecore import render_grid\n"})
    wheel(wheels, "tablecore", "1.0", {"tablecore/__init__.py": "def render_table():\n    pass\n"})
    env = venv(c, system_site=True, pip=True)
    c.sh(f"{env}/bin/pip install -q --no-deps {wheels}/*.whl", env=PIP_OFFLINE)
    c.write("grid.py", "import gridkit\n\ndef cells(n):\n    return [gridkit] * n\n")
    c.write(
        "test_grid.py",
        "from grid import cells\n\ndef test_cells():\n    assert len(cells(2)) == 2\n",
    )
    c.run(f"{env}/bin/python -m pytest -q -p no:cacheprovider")


@case(
    "py-dep-installed-mismatch-script",
    "dependency_issue",
    "python",
    "a script: an installed package's import of its dependency fails (versions disagree)",
)
def _(c: Case) -> None:
    py_version(c)
    wheels = c.tmp / "wheels"
    wheel(
        wheels,
        "chartlib",
        "3.1",
        {
            "chartlib/__init__.py": "from chartlib.axes import Axis\n",
            "chartlib/axes.py": "from colormath2 import Palette, blend\n\nclass Axis:\n    pass\n",
        },
    )
    wheel(wheels, "colormath2", "1.0", {"colormath2/__init__.py": "class Palette:\n    pass\n"})
    env = venv(c, pip=True)
    c.sh(f"{env}/bin/pip install -q --no-deps {wheels}/*.whl", env=PIP_OFFLINE)
    c.write("plot.py", "import chartlib\n\nprint(chartlib.Axis())\n")
    c.run(f"{env}/bin/python plot.py")


@case(
    "py-installed-name-own-code",
    "code_error",
    "pytest",
    "the project asks an installed package for a name it never had (the code is wrong)",
)
def _(c: Case) -> None:
    py_version(c)
    wheels = c.tmp / "wheels"
    wheel(wheels, "tablecore", "1.0", {"tablecore/__init__.py": "def render_table():\n    pass\n"})
    env = venv(c, system_site=True, pip=True)
    c.sh(f"{env}/bin/pip install -q --no-deps {wheels}/*.whl", env=PIP_OFFLINE)
    c.write("view.py", "from tablecore import render_tabel\n\ndef show():\n    render_tabel()\n")
    c.write("test_view.py", "from view import show\n\ndef test_show():\n    show()\n")
    c.run(f"{env}/bin/python -m pytest -q -p no:cacheprovider")


@case(
    "pip-requires-python-project",
    "dependency_issue",
    "pip",
    "pip install -e . of a project that requires a newer Python",
)
def _(c: Case) -> None:
    c.versions["pip"] = c.sh(f"{PY} -m pip --version").strip()[:60]
    wheels = c.tmp / "wheels"
    wheel(wheels, "fastcalc", "2.0", {"fastcalc/__init__.py": ""}, requires_python=">=3.99")
    c.run(f"{PY} -m pip install --dry-run --find-links {wheels} fastcalc==2.0", env=PIP_OFFLINE)


@case(
    "pip-requires-python-ignored",
    "dependency_issue",
    "pip",
    "pip: every version of a requirement needs a different Python",
)
def _(c: Case) -> None:
    c.versions["pip"] = c.sh(f"{PY} -m pip --version").strip()[:60]
    wheels = c.tmp / "wheels"
    wheel(wheels, "fastcalc", "2.0", {"fastcalc/__init__.py": ""}, requires_python=">=3.99")
    wheel(wheels, "fastcalc", "2.1", {"fastcalc/__init__.py": ""}, requires_python=">=3.99")
    c.write("requirements.txt", "fastcalc>=2\n")
    c.run(
        f"{PY} -m pip install --dry-run --find-links {wheels} -r requirements.txt", env=PIP_OFFLINE
    )


@case(
    "pip-offline-missing",
    "dependency_issue",
    "pip",
    "pip offline: a requirement is not in the local wheel directory",
)
def _(c: Case) -> None:
    c.versions["pip"] = c.sh(f"{PY} -m pip --version").strip()[:60]
    wheels = c.tmp / "wheels"
    wheel(wheels, "gridkit", "2.0", {"gridkit/__init__.py": ""}, requires=["tablecore>=2"])
    c.run(f"{PY} -m pip install --dry-run --find-links {wheels} gridkit", env=PIP_OFFLINE)


@case(
    "pip-build-missing-header",
    "dependency_issue",
    "pip",
    "pip builds a C extension whose system header is not installed",
)
def _(c: Case) -> None:
    c.versions["pip"] = c.sh(f"{PY} -m pip --version").strip()[:60]
    c.write(
        "setup.py",
        "from setuptools import Extension, setup\n\nsetup(name='fastzip', version='0.1', "
        "ext_modules=[Extension('fastzip', ['fastzip.c'])])\n",
    )
    c.write("fastzip.c", "#include <Python.h>\n#include <zstdx.h>\n\nint f(void) { return 0; }\n")
    # The build backend comes from the machine's local package index (offline).
    c.run(f"{PY} -m pip install --no-cache-dir --no-deps .")


@case(
    "uv-requires-python",
    "dependency_issue",
    "uv",
    "uv: a requirement needs a newer Python than the project allows",
)
def _(c: Case) -> None:
    uv = tools(c, "uv")
    wheels = c.tmp / "wheels"
    wheel(wheels, "fastcalc", "2.0", {"fastcalc/__init__.py": ""}, requires_python=">=3.99")
    c.write(
        "pyproject.toml",
        "[project]\nname = 'demo'\nversion = '0.1.0'\nrequires-python = '>=3.10'\n"
        "dependencies = ['fastcalc>=2']\n",
    )
    c.run(f"{uv} lock --no-cache --offline --no-index --find-links {wheels}", env={"UV_PYTHON": PY})


@case(
    "uv-project-python",
    "dependency_issue",
    "uv",
    "uv sync: the project needs a Python that is not installed",
)
def _(c: Case) -> None:
    uv = tools(c, "uv")
    c.write(
        "pyproject.toml",
        "[project]\nname = 'demo'\nversion = '0.1.0'\nrequires-python = '>=3.99'\ndependencies = []\n",
    )
    c.run(
        f"{uv} sync --no-cache --offline --no-python-downloads",
        env={"UV_PYTHON_INSTALL_DIR": str(c.tmp / "pythons")},
    )


@case(
    "uv-offline-missing",
    "dependency_issue",
    "uv",
    "uv pip install offline: the package is not in the cache",
)
def _(c: Case) -> None:
    uv = tools(c, "uv")
    env = venv(c)
    c.run(
        f"{uv} pip install --offline --no-cache --python {env}/bin/python tablecore",
        env={"UV_INDEX_URL": "", "UV_EXTRA_INDEX_URL": ""},
    )


@case(
    "uv-run-missing-tool",
    "dependency_issue",
    "uv",
    "uv run pytest in a project environment without pytest",
)
def _(c: Case) -> None:
    uv = tools(c, "uv")
    c.write(
        "pyproject.toml",
        "[project]\nname = 'demo'\nversion = '0.1.0'\nrequires-python = '>=3.10'\ndependencies = []\n"
        "\n[tool.uv]\npackage = false\n",
    )
    c.write("test_x.py", PASSING_TEST)
    c.run(
        f"{uv} run --no-cache --offline --python {sys.base_prefix}/bin/python3 pytest -q",
        env={"VIRTUAL_ENV": "", "PATH": "/usr/bin:/bin"},
    )


@case(
    "uv-locked-stale",
    "dependency_issue",
    "uv",
    "uv sync --locked: the lock file no longer fits pyproject.toml",
)
def _(c: Case) -> None:
    uv = tools(c, "uv")
    project = "[project]\nname = 'demo'\nversion = '0.1.0'\nrequires-python = '>=3.10'\ndependencies = []\n"
    c.write("pyproject.toml", project)
    c.sh(f"{uv} lock --no-cache --offline")
    c.write("pyproject.toml", project.replace(">=3.10", ">=3.11"))
    c.run(f"{uv} sync --locked --no-cache --offline", env={"VIRTUAL_ENV": ""})


@case("uv-run-assert", "code_error", "uv", "uv run: a test fails")
def _(c: Case) -> None:
    uv = tools(c, "uv")
    c.write("calc.py", "def half(x):\n    return x // 3\n")
    c.write("test_calc.py", "from calc import half\n\ndef test_half():\n    assert half(8) == 4\n")
    c.run(f"{uv} run --no-project --offline --python {PY} python -m pytest -q -p no:cacheprovider")


def poetry(c: Case) -> tuple[str, dict[str, str]]:
    """poetry, and an environment that keeps its cache and virtualenvs in the case's temp dir."""
    binary = tools(c, "poetry")
    env = {
        "POETRY_NO_INTERACTION": "1",
        "POETRY_CACHE_DIR": str(c.tmp / "poetry-cache"),
        "POETRY_VIRTUALENVS_PATH": str(c.tmp / "poetry-venvs"),
        "VIRTUAL_ENV": "",
        **PIP_OFFLINE,
    }
    return binary, env


@case(
    "poetry-requires-python",
    "dependency_issue",
    "poetry",
    "poetry: the project's Python range is not allowed by a path dependency",
)
def _(c: Case) -> None:
    binary, env = poetry(c)
    c.write(
        "lib/pyproject.toml",
        "[project]\nname = 'fastcalc'\nversion = '2.0'\nrequires-python = '>=3.99'\n"
        "[build-system]\nrequires = ['poetry-core']\nbuild-backend = 'poetry.core.masonry.api'\n",
    )
    c.write("lib/fastcalc/__init__.py", "")
    c.write(
        "pyproject.toml",
        "[project]\nname = 'demo'\nversion = '0.1.0'\nrequires-python = '>=3.10'\n"
        f"dependencies = ['fastcalc @ file://{c.workdir}/lib']\n\n[tool.poetry]\npackage-mode = false\n",
    )
    c.run(f"{binary} lock", env=env)


@case(
    "poetry-lock-stale",
    "dependency_issue",
    "poetry",
    "poetry install: the lock file no longer matches pyproject.toml",
)
def _(c: Case) -> None:
    binary, env = poetry(c)
    c.write(
        "pyproject.toml",
        "[project]\nname = 'demo'\nversion = '0.1.0'\nrequires-python = '>=3.10'\ndependencies = []\n"
        "\n[tool.poetry]\npackage-mode = false\n",
    )
    c.sh(f"{binary} lock", env=env)
    c.write(
        "pyproject.toml",
        "[project]\nname = 'demo'\nversion = '0.1.0'\nrequires-python = '>=3.10'\n"
        "dependencies = ['attrs>=23']\n\n[tool.poetry]\npackage-mode = false\n",
    )
    c.run(f"{binary} install", env=env)


@case(
    "poetry-run-missing",
    "dependency_issue",
    "poetry",
    "poetry run pytest where pytest is not in the project's environment",
)
def _(c: Case) -> None:
    binary, env = poetry(c)
    c.write(
        "pyproject.toml",
        "[project]\nname = 'demo'\nversion = '0.1.0'\nrequires-python = '>=3.10'\ndependencies = []\n"
        "\n[tool.poetry]\npackage-mode = false\n",
    )
    c.write("test_x.py", PASSING_TEST)
    c.run(f"{binary} run pytest -q", env={**env, "PATH": "/usr/bin:/bin"})


@case("poetry-run-assert", "code_error", "poetry", "poetry run: a test fails")
def _(c: Case) -> None:
    binary, env = poetry(c)
    c.write(
        "pyproject.toml",
        "[project]\nname = 'demo'\nversion = '0.1.0'\nrequires-python = '>=3.10'\ndependencies = []\n"
        "\n[tool.poetry]\npackage-mode = false\n",
    )
    c.write("calc.py", "def mean(xs):\n    return sum(xs) / (len(xs) + 1)\n")
    c.write(
        "test_calc.py", "from calc import mean\n\ndef test_mean():\n    assert mean([2, 4]) == 3\n"
    )
    c.run(
        f"{binary} run python -m pytest -q -p no:cacheprovider",
        env={**env, "VIRTUAL_ENV": PY.rsplit("/bin/", 1)[0]},
    )


TOX_ENV = {**PIP_OFFLINE}


@case(
    "tox-missing-interpreter",
    "dependency_issue",
    "tox",
    "tox: the environment's Python is not installed",
)
def _(c: Case) -> None:
    binary = tools(c, "tox")
    c.write(
        "tox.ini",
        "[tox]\nenvlist = py399\nskip_missing_interpreters = false\n\n[testenv]\nskip_install = true\ncommands = python -c 'print(1)'\n",
    )
    c.run(f"{binary} -e py399 --workdir {c.tmp / 'tox'}", env=TOX_ENV)


@case(
    "tox-deps-missing",
    "dependency_issue",
    "tox",
    "tox: a test dependency cannot be installed (offline, not in the wheel directory)",
)
def _(c: Case) -> None:
    binary = tools(c, "tox")
    c.write(
        "tox.ini",
        "[tox]\nenvlist = tests\n\n[testenv:tests]\nskip_install = true\n"
        "deps = loopctl-corpus-missing-xyz>=1\ncommands = python -c 'print(1)'\n",
    )
    c.run(f"{binary} -e tests --workdir {c.tmp / 'tox'}", env=TOX_ENV)


@case(
    "tox-command-missing",
    "dependency_issue",
    "tox",
    "tox: the test command is not installed in the environment",
)
def _(c: Case) -> None:
    binary = tools(c, "tox")
    c.write(
        "tox.ini",
        "[tox]\nenvlist = tests\n\n[testenv:tests]\nskip_install = true\ncommands = pytest -q\n",
    )
    c.write("test_x.py", PASSING_TEST)
    c.run(f"{binary} -e tests --workdir {c.tmp / 'tox'}", env=TOX_ENV)


@case("tox-assert", "code_error", "tox", "tox: a test fails in the environment")
def _(c: Case) -> None:
    binary = tools(c, "tox")
    c.write(
        "tox.ini",
        "[tox]\nenvlist = tests\n\n[testenv:tests]\nskip_install = true\nsystem_site_packages = true\n"
        "commands = python -m pytest -q -p no:cacheprovider\n",
    )
    c.write("calc.py", "def sign(x):\n    return 1 if x > 0 else 1\n")
    c.write(
        "test_calc.py", "from calc import sign\n\ndef test_sign():\n    assert sign(-2) == -1\n"
    )
    c.run(f"{binary} -e tests --workdir {c.tmp / 'tox'}", env=TOX_ENV)


@case(
    "nox-missing-interpreter",
    "dependency_issue",
    "nox",
    "nox: the session's Python is not installed",
)
def _(c: Case) -> None:
    binary = tools(c, "nox")
    c.write(
        "noxfile.py",
        "import nox\n\n@nox.session(python='3.99')\ndef tests(session):\n    session.run('python', '-c', 'print(1)')\n",
    )
    c.run(f"{binary} --error-on-missing-interpreters --envdir {c.tmp / 'nox'}", env=PIP_OFFLINE)


@case(
    "nox-install-missing",
    "dependency_issue",
    "nox",
    "nox: session.install of a package that is not available offline",
)
def _(c: Case) -> None:
    binary = tools(c, "nox")
    c.write(
        "noxfile.py",
        "import nox\n\n@nox.session(venv_backend='venv')\ndef tests(session):\n"
        "    session.install('loopctl-corpus-missing-xyz')\n    session.run('pytest')\n",
    )
    c.run(f"{binary} --envdir {c.tmp / 'nox'}", env=PIP_OFFLINE)


@case("nox-assert", "code_error", "nox", "nox: a test fails in the session")
def _(c: Case) -> None:
    binary = tools(c, "nox")
    c.write(
        "noxfile.py",
        "import nox\n\n@nox.session(python=False)\ndef tests(session):\n"
        f"    session.run({PY!r}, '-m', 'pytest', '-q', '-p', 'no:cacheprovider')\n",
    )
    c.write("calc.py", "def clamp(x, lo, hi):\n    return max(lo, x)\n")
    c.write(
        "test_calc.py",
        "from calc import clamp\n\ndef test_clamp():\n    assert clamp(9, 0, 5) == 5\n",
    )
    c.run(f"{binary} --envdir {c.tmp / 'nox'}", env=PIP_OFFLINE)


@case(
    "pytest-plugin-option",
    "dependency_issue",
    "pytest",
    "pytest --timeout without pytest-timeout installed",
)
def _(c: Case) -> None:
    env = venv(c, system_site=True)
    c.write("test_x.py", PASSING_TEST)
    c.run(f"{env}/bin/python -m pytest -q -p no:cacheprovider --timeout=30")


@case(
    "pytest-plugin-addopts",
    "dependency_issue",
    "pytest",
    "pytest.ini adds --cov, and pytest-cov is not installed",
)
def _(c: Case) -> None:
    env = venv(c, system_site=True)
    c.write("pytest.ini", "[pytest]\naddopts = --cov=calc --cov-report=term\n")
    c.write("calc.py", "def one():\n    return 1\n")
    c.write("test_calc.py", "from calc import one\n\ndef test_one():\n    assert one() == 1\n")
    c.run(f"{env}/bin/python -m pytest -q -p no:cacheprovider")


@case(
    "pytest-required-plugins",
    "dependency_issue",
    "pytest",
    "pytest's required_plugins names a plugin that is not installed",
)
def _(c: Case) -> None:
    env = venv(c, system_site=True)
    c.write("pytest.ini", "[pytest]\nrequired_plugins = pytest-timeout>=2\n")
    c.write("test_x.py", PASSING_TEST)
    c.run(f"{env}/bin/python -m pytest -q -p no:cacheprovider")


@case(
    "pytest-plugin-fixture",
    "dependency_issue",
    "pytest",
    "a test uses pytest-mock's mocker fixture, and pytest-mock is not installed",
)
def _(c: Case) -> None:
    env = venv(c, system_site=True)
    c.write("clock.py", "import time\n\ndef now():\n    return time.time()\n")
    c.write(
        "test_clock.py",
        "import clock\n\ndef test_now(mocker):\n    mocker.patch('time.time', return_value=5)\n"
        "    assert clock.now() == 5\n",
    )
    c.run(f"{env}/bin/python -m pytest -q -p no:cacheprovider")


@case(
    "pytest-timeout-plugin", "code_error", "pytest", "pytest-timeout stops a test that never ends"
)
def _(c: Case) -> None:
    c.write("spin.py", "def spin():\n    while True:\n        pass\n")
    c.write("test_spin.py", "from spin import spin\n\ndef test_spin():\n    spin()\n")
    tools(c, "pytest")
    c.run(f"{TOOLS}/uvenv/bin/python -m pytest -q -p no:cacheprovider --timeout=2")


@case(
    "mypy-plugin-missing",
    "dependency_issue",
    "mypy",
    "mypy's config names a plugin whose package is not installed",
)
def _(c: Case) -> None:
    c.versions["mypy"] = c.sh(f"{PY} -m mypy --version").strip()
    c.write("mypy.ini", "[mypy]\nplugins = pydantic_corpus_xyz.mypy\n")
    c.write("m.py", "x: int = 1\n")
    c.run(f"{PY} -m mypy --no-incremental m.py")


@case("mypy-attr", "code_error", "mypy", "mypy: an attribute the class does not have")
def _(c: Case) -> None:
    c.versions["mypy"] = c.sh(f"{PY} -m mypy --version").strip()
    c.write(
        "shapes.py",
        "class Box:\n    def __init__(self) -> None:\n        self.width = 1\n\n"
        "def area(b: Box) -> int:\n    return b.width * b.height\n",
    )
    c.run(f"{PY} -m mypy --no-incremental shapes.py")


# shell and build tools ------------------------------------------------------------------------------


@case(
    "bash-command-not-found",
    "dependency_issue",
    "bash",
    "bash runs a test command that is not installed",
)
def _(c: Case) -> None:
    c.need("bash", "bash --version")
    c.write("meson.build", "project('demo', 'c')\n")
    c.run("bash -c 'meson test -C build'")


@case(
    "bash-script-command-not-found",
    "dependency_issue",
    "bash",
    "a bash test script calls a build tool that is not installed",
)
def _(c: Case) -> None:
    c.need("bash", "bash --version")
    c.write("run-tests.sh", "#!/bin/bash\nset -e\necho building\nbazel test //...\n")
    c.sh("chmod +x run-tests.sh")
    c.run("./run-tests.sh")


@case(
    "make-tool-missing",
    "dependency_issue",
    "make",
    "make: a recipe's program is not installed (exit 127)",
)
def _(c: Case) -> None:
    c.need("make", "make --version")
    c.write("Makefile", "test:\n\tmeson test -C build\n")
    c.run("make test")


@case(
    "make-tool-missing-shell",
    "dependency_issue",
    "make",
    "make: a recipe run through the shell needs a program that is not installed",
)
def _(c: Case) -> None:
    c.need("make", "make --version")
    c.write("Makefile", "test:\n\tcd build && ctest-corpus-xyz --output-on-failure\n")
    c.sh("mkdir -p build")
    c.run("make test")


@case(
    "make-compiler-missing",
    "dependency_issue",
    "make",
    "make CC=clang where clang is not installed",
)
def _(c: Case) -> None:
    c.need("make", "make --version")
    if shutil.which("clang"):
        raise Skip("clang is installed")
    c.write(
        "Makefile",
        "CC = clang\n\ntest: calc_test\n\t./calc_test\n\ncalc_test: calc.c calc_test.c\n\t$(CC) -o $@ $^\n",
    )
    c.write("calc.c", "int add(int a, int b) { return a + b; }\n")
    c.write(
        "calc_test.c",
        "#include <assert.h>\nint add(int, int);\nint main(void) { assert(add(2, 3) == 5); return 0; }\n",
    )
    c.run("make test")


C_TEST = "#include <assert.h>\nint add(int, int);\nint main(void) { assert(add(2, 3) == 5); return 0; }\n"
C_MAKEFILE = "CFLAGS = -Wall -Werror\n\ntest: calc_test\n\t./calc_test\n\ncalc_test: calc.c calc_test.c\n\t$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)\n"


def cc(c: Case) -> None:
    c.need("make", "make --version")
    c.need("gcc", "gcc --version")


@case("gcc-header-missing", "dependency_issue", "gcc", "a system header that is not installed")
def _(c: Case) -> None:
    cc(c)
    c.write("Makefile", C_MAKEFILE)
    c.write("calc.c", "#include <zstd_corpus.h>\nint add(int a, int b) { return a + b; }\n")
    c.write("calc_test.c", C_TEST)
    c.run("make test")


@case("gxx-header-missing", "dependency_issue", "g++", "a C++ library header that is not installed")
def _(c: Case) -> None:
    c.need("g++", "g++ --version")
    c.write(
        "calc.cpp",
        "#include <boost/optional.hpp>\n#include <cassert>\n\nint main() {\n"
        "  boost::optional<int> x = 3;\n  assert(*x == 3);\n}\n",
    )
    c.run("g++ -std=c++17 -o calc calc.cpp && ./calc")


@case("ld-library-missing", "dependency_issue", "ld", "the linker cannot find a library")
def _(c: Case) -> None:
    cc(c)
    c.write("Makefile", C_MAKEFILE.replace("$(LDLIBS)", "-lzstdcorpus"))
    c.write("calc.c", "int add(int a, int b) { return a + b; }\n")
    c.write("calc_test.c", C_TEST)
    c.run("make test")


@case("pkg-config-missing", "dependency_issue", "make", "pkg-config does not know a library")
def _(c: Case) -> None:
    cc(c)
    c.need("pkg-config", "pkg-config --version")
    c.write(
        "Makefile",
        "CFLAGS = $(shell pkg-config --cflags libzstdcorpus) \nLDLIBS = $(shell pkg-config --libs libzstdcorpus)\n\n"
        + C_MAKEFILE.split("\n", 2)[2],
    )
    c.write("calc.c", "int add(int a, int b) { return a + b; }\n")
    c.write("calc_test.c", C_TEST + "int x = ZSTD_VERSION;\n")
    c.run("make test")


@case("gcc-own-header", "code_error", "gcc", "a header of the project that the agent renamed")
def _(c: Case) -> None:
    cc(c)
    c.write("Makefile", C_MAKEFILE)
    c.write("calc_ops.h", "int add(int a, int b);\n")
    c.write("calc.c", '#include "calc.h"\nint add(int a, int b) { return a + b; }\n')
    c.write("calc_test.c", C_TEST)
    c.run("make test")


@case("gcc-undeclared", "code_error", "gcc", "an undeclared identifier")
def _(c: Case) -> None:
    cc(c)
    c.write("Makefile", C_MAKEFILE)
    c.write("calc.c", "int add(int a, int b) { return a + c; }\n")
    c.write("calc_test.c", C_TEST)
    c.run("make test")


@case("gcc-syntax", "code_error", "gcc", "a missing semicolon")
def _(c: Case) -> None:
    cc(c)
    c.write("Makefile", C_MAKEFILE)
    c.write("calc.c", "int add(int a, int b) {\n  int s = a + b\n  return s;\n}\n")
    c.write("calc_test.c", C_TEST)
    c.run("make test")


@case("gcc-werror", "code_error", "gcc", "a warning made an error by -Werror")
def _(c: Case) -> None:
    cc(c)
    c.write("Makefile", C_MAKEFILE)
    c.write("calc.c", "int add(int a, int b) {\n  int unused;\n  return a + b;\n}\n")
    c.write("calc_test.c", C_TEST)
    c.run("make test")


@case("ld-undefined-reference", "code_error", "ld", "a function declared but never defined")
def _(c: Case) -> None:
    cc(c)
    c.write("Makefile", C_MAKEFILE)
    c.write("calc.c", "int plus(int a, int b) { return a + b; }\n")
    c.write("calc_test.c", C_TEST)
    c.run("make test")


@case("c-assert", "code_error", "make", "a C test's assert fails")
def _(c: Case) -> None:
    cc(c)
    c.write("Makefile", C_MAKEFILE)
    c.write("calc.c", "int add(int a, int b) { return a * b; }\n")
    c.write("calc_test.c", C_TEST)
    c.run("make test")


@case("make-no-rule", "code_error", "make", "make: a source file of the project is missing")
def _(c: Case) -> None:
    cc(c)
    c.write("Makefile", C_MAKEFILE)
    c.write("calc_test.c", C_TEST)
    c.run("make test")


@case("gxx-type", "code_error", "g++", "a C++ type error")
def _(c: Case) -> None:
    c.need("g++", "g++ --version")
    c.write(
        "calc.cpp",
        "#include <string>\n#include <cassert>\n\nint twice(int x) { return 2 * x; }\n\n"
        'int main() {\n  std::string s = "4";\n  assert(twice(s) == 8);\n}\n',
    )
    c.run("g++ -std=c++17 -o calc calc.cpp && ./calc")


# JavaScript ------------------------------------------------------------------------------------------


def npm_project(c: Case, deps: dict[str, str] | None = None, **extra: Any) -> None:
    node_version(c)
    c.versions["npm"] = c.sh("npm --version").strip()
    package = {"name": "demo", "version": "1.0.0", "private": True, **extra}
    if deps is not None:
        package["dependencies"] = deps
    c.write("package.json", json.dumps(package, indent=2) + "\n")


NPM_OFFLINE = {"npm_config_cache": "", "npm_config_offline": "true"}


def npm_offline(c: Case) -> dict[str, str]:
    return {**NPM_OFFLINE, "npm_config_cache": str(c.tmp / "npm-cache")}


@case(
    "npm-offline-notcached",
    "dependency_issue",
    "npm",
    "npm install --offline of an uncached package",
)
def _(c: Case) -> None:
    npm_project(c, {"left-pad": "^1.3.0"})
    c.run("npm install --no-audit --no-fund", env=npm_offline(c))


@case(
    "npm-engine-strict",
    "dependency_issue",
    "npm",
    "npm: the project needs a newer Node (engine-strict)",
)
def _(c: Case) -> None:
    npm_project(c, {}, engines={"node": ">=99"})
    c.write(".npmrc", "engine-strict=true\n")
    c.run("npm install --no-audit --no-fund", env=npm_offline(c))


@case("npm-test-assert", "code_error", "npm test", "npm test runs node --test; an assertion fails")
def _(c: Case) -> None:
    npm_project(c, scripts={"test": "node --test"})
    c.write("price.js", "exports.withTax = (p) => p * 1.2 + 1;\n")
    c.write(
        "price.test.js",
        "const test = require('node:test');\nconst assert = require('node:assert');\n"
        "const { withTax } = require('./price');\ntest('tax', () => { assert.strictEqual(withTax(10), 12); });\n",
    )
    c.run("npm test")


@case(
    "npx-tool-missing",
    "dependency_issue",
    "npm",
    "npx --no-install of a tool the project does not have",
)
def _(c: Case) -> None:
    npm_project(c, {})
    c.run("npx --no-install tsc --noEmit", env=npm_offline(c))


@case(
    "node-engine-syntax",
    "code_error",
    "node",
    "node: a syntax error in the project's module",
)
def _(c: Case) -> None:
    node_version(c)
    c.write(
        "main.js", "const total = (xs) => xs.reduce((a, b) => a + b, 0;\nconsole.log(total([1]));\n"
    )
    c.run("node main.js")


def pnpm(c: Case) -> str:
    binary = tools(c, "pnpm")
    node_version(c)
    return binary


PNPM_ENV = {"npm_config_offline": "true"}


@case(
    "pnpm-offline-missing",
    "dependency_issue",
    "pnpm",
    "pnpm install --offline of a package that is not in the store",
)
def _(c: Case) -> None:
    binary = pnpm(c)
    npm_project(c, {"left-pad": "^1.3.0"})
    c.run(f"{binary} install --offline --store-dir {c.tmp / 'store'}", env=PNPM_ENV)


@case(
    "pnpm-frozen-no-lock",
    "dependency_issue",
    "pnpm",
    "pnpm install --frozen-lockfile without a lock file",
)
def _(c: Case) -> None:
    binary = pnpm(c)
    npm_project(c, {"left-pad": "^1.3.0"})
    c.run(
        f"{binary} install --frozen-lockfile --offline --store-dir {c.tmp / 'store'}", env=PNPM_ENV
    )


@case("pnpm-test-runner-missing", "dependency_issue", "pnpm", "pnpm test: jest is not installed")
def _(c: Case) -> None:
    binary = pnpm(c)
    npm_project(c, scripts={"test": "jest"})
    c.write("a.test.js", "test('a', () => expect(1).toBe(1));\n")
    c.run(f"{binary} test")


@case("pnpm-test-assert", "code_error", "pnpm", "pnpm test: a node test fails")
def _(c: Case) -> None:
    binary = pnpm(c)
    npm_project(c, scripts={"test": "node --test"})
    c.write("s.js", "exports.slug = (t) => t.toLowerCase();\n")
    c.write(
        "s.test.js",
        "const test = require('node:test');\nconst assert = require('node:assert');\n"
        "const { slug } = require('./s');\ntest('slug', () => { assert.strictEqual(slug('A B'), 'a-b'); });\n",
    )
    c.run(f"{binary} test")


def jest(c: Case) -> str:
    binary = tools(c, "jest")
    node_version(c)
    c.write("package.json", '{"name": "demo", "version": "1.0.0", "private": true}\n')
    return f"{binary} --ci --rootDir {c.workdir}"


@case(
    "jest-dep-missing",
    "dependency_issue",
    "jest",
    "jest: a test imports a package that is not installed",
)
def _(c: Case) -> None:
    command = jest(c)
    c.write(
        "fmt.js", "const dayjs = require('dayjs');\nexports.day = (d) => dayjs(d).format('D');\n"
    )
    c.write(
        "fmt.test.js",
        "const { day } = require('./fmt');\ntest('day', () => expect(day('2024-01-02')).toBe('2'));\n",
    )
    c.run(command)


@case(
    "jest-environment-missing",
    "dependency_issue",
    "jest",
    "jest: testEnvironment jsdom, and jest-environment-jsdom is not installed",
)
def _(c: Case) -> None:
    command = jest(c)
    c.write("jest.config.js", "module.exports = { testEnvironment: 'jsdom' };\n")
    c.write("a.test.js", "test('a', () => expect(document.title).toBe(''));\n")
    c.run(command)


@case("jest-assert", "code_error", "jest", "jest: toEqual fails")
def _(c: Case) -> None:
    command = jest(c)
    c.write("list.js", "exports.uniq = (xs) => xs;\n")
    c.write(
        "list.test.js",
        "const { uniq } = require('./list');\ntest('uniq', () => expect(uniq([1, 1, 2])).toEqual([1, 2]));\n",
    )
    c.run(command)


@case(
    "jest-own-module",
    "code_error",
    "jest",
    "jest: a test requires a project file that is not there",
)
def _(c: Case) -> None:
    command = jest(c)
    c.write("list.js", "exports.uniq = (xs) => [...new Set(xs)];\n")
    c.write(
        "list.test.js",
        "const { uniq } = require('./lists');\ntest('uniq', () => expect(uniq([1, 1])).toEqual([1]));\n",
    )
    c.run(command)


@case("jest-typeerror", "code_error", "jest", "jest: a TypeError in the code under test")
def _(c: Case) -> None:
    command = jest(c)
    c.write("user.js", "exports.name = (u) => u.profile.name;\n")
    c.write(
        "user.test.js",
        "const { name } = require('./user');\ntest('name', () => expect(name({})).toBe('x'));\n",
    )
    c.run(command)


def vitest(c: Case) -> str:
    binary = tools(c, "vitest")
    node_version(c)
    c.write(
        "package.json", '{"name": "demo", "version": "1.0.0", "private": true, "type": "module"}\n'
    )
    return f"{binary} run --root {c.workdir}"


@case(
    "vitest-dep-missing",
    "dependency_issue",
    "vitest",
    "vitest: a test imports a package that is not installed",
)
def _(c: Case) -> None:
    command = vitest(c)
    c.write(
        "fmt.js", "import dayjs from 'dayjs';\nexport const day = (d) => dayjs(d).format('D');\n"
    )
    c.write(
        "fmt.test.js",
        "import { test, expect } from 'vitest';\nimport { day } from './fmt.js';\ntest('day', () => expect(day('2024-01-02')).toBe('2'));\n",
    )
    c.run(command)


@case(
    "vitest-environment-missing",
    "dependency_issue",
    "vitest",
    "vitest: environment jsdom, and jsdom is not installed",
)
def _(c: Case) -> None:
    command = vitest(c)
    c.write("vitest.config.js", "export default { test: { environment: 'jsdom' } };\n")
    c.write(
        "a.test.js",
        "import { test, expect } from 'vitest';\ntest('a', () => expect(document.title).toBe(''));\n",
    )
    c.run(command)


@case("vitest-assert", "code_error", "vitest", "vitest: toBe fails")
def _(c: Case) -> None:
    command = vitest(c)
    c.write("calc.js", "export const cube = (x) => x * x;\n")
    c.write(
        "calc.test.js",
        "import { test, expect } from 'vitest';\nimport { cube } from './calc.js';\ntest('cube', () => expect(cube(3)).toBe(27));\n",
    )
    c.run(command)


@case(
    "vitest-own-module",
    "code_error",
    "vitest",
    "vitest: a test imports a project file that is not there",
)
def _(c: Case) -> None:
    command = vitest(c)
    c.write("calc.js", "export const cube = (x) => x ** 3;\n")
    c.write(
        "calc.test.js",
        "import { test, expect } from 'vitest';\nimport { cube } from './calcs.js';\ntest('cube', () => expect(cube(3)).toBe(27));\n",
    )
    c.run(command)


@case("vitest-referenceerror", "code_error", "vitest", "vitest: an undefined variable")
def _(c: Case) -> None:
    command = vitest(c)
    c.write("calc.js", "export const area = (r) => PI * r * r;\n")
    c.write(
        "calc.test.js",
        "import { test, expect } from 'vitest';\nimport { area } from './calc.js';\ntest('area', () => expect(area(1)).toBeCloseTo(3.14, 1));\n",
    )
    c.run(command)


@case(
    "tsc-types-node-missing", "dependency_issue", "tsc", "tsc: types: ['node'] without @types/node"
)
def _(c: Case) -> None:
    binary = tools(c, "tsc")
    c.write(
        "tsconfig.json",
        '{"compilerOptions": {"strict": true, "noEmit": true, "types": ["node"]}, "include": ["*.ts"]}\n',
    )
    c.write(
        "main.ts", "import { readFileSync } from 'fs';\nconsole.log(readFileSync('x', 'utf8'));\n"
    )
    c.run(f"{binary} -p .")


@case("tsc-missing-return", "code_error", "tsc", "tsc: a function that does not always return")
def _(c: Case) -> None:
    binary = tools(c, "tsc")
    c.write(
        "grade.ts",
        "export function grade(n: number): string {\n  if (n > 50) { return 'pass'; }\n}\n",
    )
    c.run(f"{binary} --noEmit --strict grade.ts")


# Rust ------------------------------------------------------------------------------------------------


@case("cargo-rust-version", "dependency_issue", "cargo", "the crate needs a newer rustc")
def _(c: Case) -> None:
    cargo(c)
    c.write(
        "Cargo.toml",
        CARGO_TOML.replace('edition = "2021"\n', 'edition = "2021"\nrust-version = "1.99"\n'),
    )
    c.write("src/lib.rs", "pub fn f() -> u8 { 1 }\n")
    c.run("cargo test --offline --quiet")


@case(
    "cargo-native-lib",
    "dependency_issue",
    "cargo",
    "the crate links a native library that is not installed",
)
def _(c: Case) -> None:
    cargo(c)
    c.write("Cargo.toml", CARGO_TOML)
    c.write(
        "src/lib.rs",
        '#[link(name = "zstdcorpus")]\nextern "C" { fn ZSTD_versionNumber() -> u32; }\n\n'
        "pub fn version() -> u32 { unsafe { ZSTD_versionNumber() } }\n\n"
        "#[cfg(test)]\nmod tests {\n    #[test]\n    fn v() { assert!(super::version() > 0); }\n}\n",
    )
    c.run("cargo test --offline --quiet")


@case(
    "cargo-lock-offline",
    "dependency_issue",
    "cargo",
    "cargo --locked: the lock file needs an update",
)
def _(c: Case) -> None:
    cargo(c)
    c.write("Cargo.toml", CARGO_TOML + 'utils = { path = "utils" }\n')
    c.write("utils/Cargo.toml", '[package]\nname = "utils"\nversion = "0.1.0"\nedition = "2021"\n')
    c.write("utils/src/lib.rs", "pub fn u() {}\n")
    c.write("src/lib.rs", "pub fn f() { utils::u() }\n")
    c.sh("cargo generate-lockfile --offline")
    c.write(
        "Cargo.toml", CARGO_TOML + 'utils = { path = "utils" }\nhelpers = { path = "helpers" }\n'
    )
    c.write(
        "helpers/Cargo.toml", '[package]\nname = "helpers"\nversion = "0.1.0"\nedition = "2021"\n'
    )
    c.write("helpers/src/lib.rs", "pub fn h() {}\n")
    c.run("cargo test --offline --locked --quiet")


@case("cargo-unused-deny", "code_error", "cargo", "a warning denied by #![deny(warnings)]")
def _(c: Case) -> None:
    cargo(c)
    c.write("Cargo.toml", CARGO_TOML)
    c.write(
        "src/lib.rs", "#![deny(warnings)]\n\npub fn f() -> i32 {\n    let unused = 3;\n    1\n}\n"
    )
    c.run("cargo test --offline --quiet")


@case("cargo-missing-method", "code_error", "cargo", "a method the type does not have")
def _(c: Case) -> None:
    cargo(c)
    c.write("Cargo.toml", CARGO_TOML)
    c.write("src/lib.rs", "pub fn words(s: &str) -> usize { s.split_words().count() }\n")
    c.run("cargo test --offline --quiet")


# Go --------------------------------------------------------------------------------------------------


@case(
    "go-toolchain-newer",
    "dependency_issue",
    "go build",
    "go.mod asks for a newer Go than is installed",
)
def _(c: Case) -> None:
    go(c)
    c.write("go.mod", "module example.com/demo\n\ngo 1.99\n")
    c.write(
        "loop.go",
        "package demo\n\nfunc Count() int {\n\tn := 0\n\tfor i := range 10 {\n\t\tn += i\n\t}\n\treturn n\n}\n",
    )
    c.run("go build ./...", env={**GO_ENV, "GOCACHE": str(c.tmp / "gocache")})


@case("go-cgo-header", "dependency_issue", "go build", "cgo: a C header that is not installed")
def _(c: Case) -> None:
    go(c)
    c.write(
        "z.go",
        'package demo\n\n// #include <zstd_corpus.h>\nimport "C"\n\nfunc V() int { return int(C.ZSTD_versionNumber()) }\n',
    )
    c.run("go build ./...", env={**GO_ENV, "GOCACHE": str(c.tmp / "gocache"), "CGO_ENABLED": "1"})


@case(
    "go-sum-missing", "dependency_issue", "go build", "go.sum lacks an entry for a required module"
)
def _(c: Case) -> None:
    go(c)
    c.write("go.mod", "module example.com/demo\n\ngo 1.19\n\nrequire golang.org/x/text v0.14.0\n")
    c.write(
        "t.go", 'package demo\n\nimport "golang.org/x/text/language"\n\nvar T = language.English\n'
    )
    c.run(
        "go build ./...",
        env={
            "GOPROXY": "off",
            "GOTOOLCHAIN": "local",
            "GOFLAGS": "-mod=readonly",
            "GOCACHE": str(c.tmp / "gocache"),
            "GOPATH": str(c.tmp / "gopath"),
        },
    )


@case("go-vet", "code_error", "go test", "go vet: a Printf format that does not match")
def _(c: Case) -> None:
    go(c)
    c.write(
        "p.go",
        'package demo\n\nimport "fmt"\n\nfunc Show(n int) string { return fmt.Sprintf("%s items", n) }\n',
    )
    c.write(
        "p_test.go",
        'package demo\n\nimport "testing"\n\nfunc TestShow(t *testing.T) { _ = Show(1) }\n',
    )
    c.run("go test ./...", env={**GO_ENV, "GOCACHE": str(c.tmp / "gocache")})


@case("go-unused-import", "code_error", "go build", "an import that is not used")
def _(c: Case) -> None:
    go(c)
    c.write("u.go", 'package demo\n\nimport "strings"\n\nfunc One() int { return 1 }\n')
    c.run("go build ./...", env={**GO_ENV, "GOCACHE": str(c.tmp / "gocache")})


@case("go-panic", "code_error", "go test", "a nil map write panics in a test")
def _(c: Case) -> None:
    go(c)
    c.write(
        "m.go", "package demo\n\nvar cache map[string]int\n\nfunc Put(k string) { cache[k] = 1 }\n"
    )
    c.write(
        "m_test.go", 'package demo\n\nimport "testing"\n\nfunc TestPut(t *testing.T) { Put("a") }\n'
    )
    c.run("go test ./...", env={**GO_ENV, "GOCACHE": str(c.tmp / "gocache")})


# Java ------------------------------------------------------------------------------------------------

POM = (
    "<project><modelVersion>4.0.0</modelVersion><groupId>x</groupId><artifactId>demo</artifactId>"
    "<version>1</version><properties><project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>"
    "<maven.compiler.source>{release}</maven.compiler.source><maven.compiler.target>{release}</maven.compiler.target>"
    "</properties>{deps}<build><pluginManagement><plugins>{plugins}</plugins></pluginManagement>"
    "{build}</build></project>\n"
)
#: Plugin versions this machine's local Maven repository holds (offline, the defaults of Maven
#: 3.8 are older and absent, which would make every case a missing-plugin case).
MAVEN_PLUGINS = "".join(
    f"<plugin><groupId>org.apache.maven.plugins</groupId><artifactId>maven-{name}-plugin"
    f"</artifactId><version>{version}</version></plugin>"
    for name, version in (("resources", "3.3.1"), ("compiler", "3.13.0"), ("surefire", "3.2.5"))
)


def pom(release: str = "17", deps: str = "", build: str = "") -> str:
    return POM.format(release=release, deps=deps, plugins=MAVEN_PLUGINS, build=build)


def mvn(c: Case) -> str:
    """Maven offline against the machine's own local repository (whatever plugins it holds)."""
    c.need("mvn", "mvn -v")
    return "mvn -o -q -B"


@case("mvn-compile-error", "code_error", "mvn", "Maven: a compile error")
def _(c: Case) -> None:
    command = mvn(c)
    c.write("pom.xml", pom())
    c.write(
        "src/main/java/App.java",
        "public class App {\n  static int twice(int x) { return x * 2 }\n}\n",
    )
    c.run(f"{command} compile")


@case("mvn-java-release", "dependency_issue", "mvn", "Maven: the project needs a newer Java")
def _(c: Case) -> None:
    command = mvn(c)
    c.write("pom.xml", pom(release="99"))
    c.write("src/main/java/App.java", "public class App {}\n")
    c.run(f"{command} compile")


@case(
    "mvn-plugin-offline",
    "dependency_issue",
    "mvn",
    "Maven: a build plugin is not in the local repository",
)
def _(c: Case) -> None:
    command = mvn(c)
    c.write(
        "pom.xml",
        pom(
            build="<plugins><plugin><groupId>org.corpus.xyz</groupId><artifactId>"
            "corpus-maven-plugin</artifactId><version>1.0</version><executions><execution>"
            "<goals><goal>check</goal></goals></execution></executions></plugin></plugins>"
        ),
    )
    c.write("src/main/java/App.java", "public class App {}\n")
    c.run(f"{command} verify")


JUNIT = (
    "<dependencies><dependency><groupId>junit</groupId><artifactId>junit</artifactId>"
    "<version>4.13.2</version><scope>test</scope></dependency></dependencies>"
)


JUPITER = (
    "<dependencies><dependency><groupId>org.junit.jupiter</groupId><artifactId>junit-jupiter"
    "</artifactId><version>5.10.2</version><scope>test</scope></dependency></dependencies>"
)
CALC_JAVA = "public class Calc {\n  public static int add(int a, int b) { return a - b; }\n}\n"


@case("mvn-test-failure", "code_error", "mvn", "Maven: a JUnit 5 test fails")
def _(c: Case) -> None:
    command = mvn(c)
    c.write("pom.xml", pom(deps=JUPITER))
    c.write("src/main/java/Calc.java", CALC_JAVA)
    c.write(
        "src/test/java/CalcTest.java",
        "import static org.junit.jupiter.api.Assertions.assertEquals;\nimport org.junit.jupiter.api.Test;\n\n"
        "class CalcTest {\n  @Test void adds() { assertEquals(5, Calc.add(2, 3)); }\n}\n",
    )
    c.run(f"{command} test")


@case(
    "mvn-test-provider-offline",
    "dependency_issue",
    "mvn",
    "Maven: surefire's JUnit 4 provider is not in the local repository (offline)",
)
def _(c: Case) -> None:
    command = mvn(c)
    c.write("pom.xml", pom(deps=JUNIT))
    c.write("src/main/java/Calc.java", CALC_JAVA)
    c.write(
        "src/test/java/CalcTest.java",
        "import static org.junit.Assert.assertEquals;\nimport org.junit.Test;\n\npublic class CalcTest {\n"
        "  @Test public void adds() { assertEquals(5, Calc.add(2, 3)); }\n}\n",
    )
    c.run(f"{command} test")


@case(
    "mvn-dep-version-missing",
    "dependency_issue",
    "mvn",
    "Maven: a version of a library the local repository lacks",
)
def _(c: Case) -> None:
    command = mvn(c)
    c.write("pom.xml", pom(deps=JUNIT.replace("4.13.2", "4.99.0")))
    c.write("src/main/java/Calc.java", "public class Calc {}\n")
    c.run(f"{command} test")


@case(
    "java-missing-class",
    "dependency_issue",
    "java",
    "java: a library class is not on the class path at run time",
)
def _(c: Case) -> None:
    c.need("javac", "javac -version")
    c.write(
        "lib/com/acme/Json.java",
        'package com.acme;\npublic class Json { public static String of(int x) { return "" + x; } }\n',
    )
    c.write(
        "App.java",
        "public class App {\n  public static void main(String[] a) {\n    System.out.println(com.acme.Json.of(1));\n  }\n}\n",
    )
    c.sh(
        "javac -d lib-out lib/com/acme/Json.java && javac -cp lib-out -d out App.java && rm -rf lib lib-out"
    )
    c.run("java -cp out App")


@case("java-npe", "code_error", "java", "java: a NullPointerException in the program")
def _(c: Case) -> None:
    c.need("javac", "javac -version")
    c.write(
        "App.java",
        "public class App {\n  static String name;\n  public static void main(String[] a) {\n    System.out.println(name.length());\n  }\n}\n",
    )
    c.run("javac -d out App.java && java -cp out App")


@case(
    "cmake-package-missing",
    "dependency_issue",
    "cmake",
    "cmake: find_package of a library that is not installed",
)
def _(c: Case) -> None:
    c.need("cmake", "cmake --version")
    c.write(
        "CMakeLists.txt",
        "cmake_minimum_required(VERSION 3.10)\nproject(demo C)\nfind_package(ZstdCorpus REQUIRED)\nadd_executable(demo main.c)\n",
    )
    c.write("main.c", "int main(void) { return 0; }\n")
    c.run(f"cmake -S . -B {c.tmp / 'build'}")


@case(
    "cmake-module-missing",
    "dependency_issue",
    "cmake",
    "cmake: a Find module's library is not installed",
)
def _(c: Case) -> None:
    c.need("cmake", "cmake --version")
    c.write(
        "CMakeLists.txt",
        "cmake_minimum_required(VERSION 3.10)\nproject(demo C)\nfind_package(GTest REQUIRED)\nadd_executable(demo main.c)\n",
    )
    c.write("main.c", "int main(void) { return 0; }\n")
    c.run(f"cmake -S . -B {c.tmp / 'build'}")


@case(
    "cmake-own-source-missing",
    "code_error",
    "cmake",
    "cmake: a source file of the project is missing",
)
def _(c: Case) -> None:
    c.need("cmake", "cmake --version")
    c.write(
        "CMakeLists.txt",
        "cmake_minimum_required(VERSION 3.10)\nproject(demo C)\nadd_executable(demo main.c util.c)\n",
    )
    c.write("main.c", "int main(void) { return 0; }\n")
    c.run(f"cmake -S . -B {c.tmp / 'build'}")


@case("gradle-missing", "dependency_issue", "sh", "./gradlew test where gradle is not installed")
def _(c: Case) -> None:
    if shutil.which("gradle"):
        raise Skip("gradle is installed: make real gradle cases instead")
    c.write("build.gradle", "plugins { id 'java' }\n")
    c.run("gradle test --offline")


# --- the held-out set: written after the rules were frozen, never used to tune them -----------

H = {"heldout": True}


@case("h-py-param", "code_error", "pytest", "parametrised ids, two of four fail", **H)
def _(c: Case) -> None:
    py_version(c)
    c.write("roman.py", "def roman(n):\n    return 'I' * n\n")
    c.write(
        "test_roman.py",
        "import pytest\nfrom roman import roman\n\n@pytest.mark.parametrize('n,r', [(1, 'I'), (2, 'II'), (4, 'IV'), (5, 'V')])\ndef test_roman(n, r):\n    assert roman(n) == r\n",
    )
    c.run(PYTEST)


@case("h-py-setup-error", "code_error", "unittest", "an error in setUp", **H)
def _(c: Case) -> None:
    py_version(c)
    c.write(
        "test_db.py",
        "import unittest\n\nclass T(unittest.TestCase):\n    def setUp(self):\n        self.rows = open('rows.csv').read().split()\n    def test_count(self):\n        self.assertEqual(len(self.rows), 2)\n",
    )
    c.run(f"{UNITTEST} discover -v")


@case(
    "h-py-own-typo", "code_error", "pytest", "an import of the project's package with a typo", **H
)
def _(c: Case) -> None:
    py_version(c)
    c.write("app/__init__.py", "")
    c.write("app/services.py", "def ping():\n    return 'pong'\n")
    c.write(
        "tests/test_ping.py",
        "from app.servces import ping\n\ndef test_ping():\n    assert ping() == 'pong'\n",
    )
    c.run(PYTEST)


@case("h-py-unicode", "code_error", "python", "a UnicodeDecodeError in a script", **H)
def _(c: Case) -> None:
    py_version(c)
    (c.workdir / "data.bin").write_bytes(b"\xff\xfe\x00abc")
    c.write("load.py", "text = open('data.bin', encoding='utf-8').read()\nprint(len(text))\n")
    c.run(f"{PY} load.py")


@case(
    "h-py-conn-reset",
    "code_error",
    "pytest",
    "a server that always closes the connection (deterministic)",
    **H,
)
def _(c: Case) -> None:
    py_version(c)
    c.write(
        "test_reset.py",
        "import socket, threading\n\ndef serve(s):\n    conn, _ = s.accept()\n    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b'\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x00')\n    conn.close()\n\ndef test_fetch():\n    s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n    threading.Thread(target=serve, args=(s,)).start()\n    c = socket.create_connection(s.getsockname())\n    c.sendall(b'x')\n    import time; time.sleep(0.2)\n    assert c.recv(10) == b'ok'\n",
    )
    c.run(PYTEST)


@case(
    "h-py-timeout-words",
    "code_error",
    "pytest",
    "an assertion whose message talks about a timeout",
    **H,
)
def _(c: Case) -> None:
    py_version(c)
    c.write("cfg.py", "def timeout():\n    return 10\n")
    c.write(
        "test_cfg.py",
        "from cfg import timeout\n\ndef test_timeout():\n    assert timeout() == 30, 'request timed out default should be 30 s'\n",
    )
    c.run(PYTEST)


@case(
    "h-pip-then-fail", "code_error", "pip+pytest", "a successful install, then a failing test", **H
)
def _(c: Case) -> None:
    py_version(c)
    c.write("requirements.txt", "attrs\n")
    c.write("test_a.py", "import attrs\n\ndef test_a():\n    assert attrs.__title__ == 'cattrs'\n")
    c.run(f"{PY} -m pip install -r requirements.txt && {PYTEST}")


@case("h-node-throw", "code_error", "node --test", "a custom error thrown by the code", **H)
def _(c: Case) -> None:
    node_version(c)
    c.write(
        "acct.js",
        "class Overdraft extends Error {}\nexports.withdraw = (b, n) => { if (n > b) throw new Overdraft('balance too low'); return b - n; };\n",
    )
    c.write(
        "acct.test.js",
        "const test = require('node:test');\nconst assert = require('node:assert');\nconst { withdraw } = require('./acct');\ntest('withdraw', () => { assert.strictEqual(withdraw(5, 10), 0); });\n",
    )
    c.run(NODE_TEST)


@case(
    "h-node-own-json",
    "code_error",
    "node --test",
    "require of a project JSON file that does not exist",
    **H,
)
def _(c: Case) -> None:
    node_version(c)
    c.write(
        "cfg.test.js",
        "const test = require('node:test');\nconst cfg = require('./config.json');\ntest('cfg', () => {});\n",
    )
    c.run(NODE_TEST)


@case("h-tsc-property", "code_error", "tsc", "a property that does not exist (TS2339)", **H)
def _(c: Case) -> None:
    binary = tsc(c)
    c.write("pt.ts", "interface P { x: number }\nconst p: P = { x: 1 };\nconsole.log(p.y);\n")
    c.run(f"{binary} --noEmit --strict pt.ts")


@case("h-npm-warn-then-fail", "code_error", "npm test", "npm warnings, then a failing test", **H)
def _(c: Case) -> None:
    node_version(c)
    c.write(
        "package.json", '{"name": "demo", "version": "1.0.0", "scripts": {"test": "node --test"}}\n'
    )
    c.write(
        "a.test.js",
        "const test = require('node:test');\nconst assert = require('node:assert');\ntest('a', () => { assert.deepStrictEqual([1, 2], [2, 1]); });\n",
    )
    c.run("npm test")


@case(
    "h-cargo-should-panic",
    "code_error",
    "cargo test",
    "a should_panic test that does not panic",
    **H,
)
def _(c: Case) -> None:
    cargo(c)
    c.write("Cargo.toml", CARGO_TOML)
    c.write(
        "src/lib.rs",
        "pub fn div(a: i32, b: i32) -> i32 { if b == 0 { 0 } else { a / b } }\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    #[should_panic]\n    fn by_zero() { super::div(1, 0); }\n}\n",
    )
    c.run("cargo test --offline --quiet")


@case("h-go-nil", "code_error", "go test", "a nil pointer dereference", **H)
def _(c: Case) -> None:
    go(c)
    c.write(
        "n.go",
        "package demo\n\ntype Node struct{ Next *Node; V int }\n\nfunc Last(n *Node) int { for n.Next != nil { n = n.Next }; return n.V }\n",
    )
    c.write(
        "n_test.go",
        'package demo\n\nimport "testing"\n\nfunc TestLast(t *testing.T) { if Last(nil) != 0 { t.Fail() } }\n',
    )
    c.run("go test ./...", env={**GO_ENV, "GOCACHE": str(c.tmp / "gocache")})


@case("h-mypy-arg", "code_error", "mypy", "mypy: an argument of the wrong type", **H)
def _(c: Case) -> None:
    c.versions["mypy"] = c.sh(f"{PY} -m mypy --version").strip()
    c.write("m.py", "def greet(name: str) -> str:\n    return 'hi ' + name\n\ngreet(3)\n")
    c.run(f"{PY} -m mypy --no-incremental m.py")


@case("h-javac-syntax", "code_error", "javac", "a missing semicolon", **H)
def _(c: Case) -> None:
    c.need("javac", "javac -version")
    c.write("src/A.java", "public class A {\n  int x = 1\n}\n")
    c.run("javac -d out src/A.java")


@case("h-py-dep-pandas", "dependency_issue", "pytest", "the module under test needs pandas", **H)
def _(c: Case) -> None:
    py_version(c)
    c.write("report.py", "import pandas as pd\n\ndef table(rows):\n    return pd.DataFrame(rows)\n")
    c.write(
        "test_report.py",
        "from report import table\n\ndef test_table():\n    assert len(table([{'a': 1}])) == 1\n",
    )
    c.run(PYTEST)


@case(
    "h-py-dep-submodule",
    "dependency_issue",
    "python",
    "a submodule of a package that is not installed",
    **H,
)
def _(c: Case) -> None:
    py_version(c)
    c.write("parse.py", "from lxml import etree\nprint(etree.fromstring('<a/>').tag)\n")
    c.run(f"{PY} parse.py")


@case(
    "h-pytest-plugin-missing",
    "dependency_issue",
    "pytest",
    "pytest asked for a plugin that is not installed",
    **H,
)
def _(c: Case) -> None:
    py_version(c)
    c.write("test_a.py", "def test_a():\n    pass\n")
    c.run(f"{PYTEST} -p pytest_randomly_loopctl_corpus")


@case("h-pip-specifier", "dependency_issue", "pip", "pip: a specifier no release satisfies", **H)
def _(c: Case) -> None:
    c.versions["pip"] = c.sh(f"{PY} -m pip --version").strip()[:60]
    c.run(f"{PY} -m pip install --dry-run --no-cache-dir 'attrs<0.1'")


@case(
    "h-uv-pip-compile",
    "dependency_issue",
    "uv",
    "uv pip compile of a name that does not exist",
    **H,
)
def _(c: Case) -> None:
    uv = TOOLS / "uvenv" / "bin" / "uv"
    c.need(str(uv), f"{uv} --version")
    c.write("requirements.in", "loopctl-heldout-nonexistent-xyz\n")
    c.run(f"{uv} pip compile --no-cache requirements.in", env={"UV_PYTHON": PY})


@case(
    "h-mypy-missing-sub",
    "dependency_issue",
    "mypy",
    "mypy: a submodule of a package that is not installed",
    **H,
)
def _(c: Case) -> None:
    c.versions["mypy"] = c.sh(f"{PY} -m mypy --version").strip()
    c.write("k.py", "from kafka_heldout_xyz.consumer import Consumer\n\nConsumer()\n")
    c.run(f"{PY} -m mypy --no-incremental k.py")


@case(
    "h-npm-scoped-404",
    "dependency_issue",
    "npm",
    "npm install of a scoped package that does not exist",
    **H,
)
def _(c: Case) -> None:
    node_version(c)
    c.versions["npm"] = c.sh("npm --version").strip()
    c.run("npm install --no-audit --no-fund --no-save @loopctl-heldout/nonexistent-xyz")


@case(
    "h-node-scoped-esm",
    "dependency_issue",
    "node",
    "an ES module imports a scoped package that is not installed",
    **H,
)
def _(c: Case) -> None:
    node_version(c)
    c.write("package.json", '{"type": "module"}\n')
    c.write("main.js", "import { z } from '@zod-heldout/core';\nconsole.log(z);\n")
    c.run("node main.js")


@case(
    "h-tsc-scoped",
    "dependency_issue",
    "tsc",
    "an import of a scoped package that is not installed",
    **H,
)
def _(c: Case) -> None:
    binary = tsc(c)
    c.write("main.ts", "import { Component } from '@angular/core';\nconsole.log(Component);\n")
    c.run(f"{binary} --noEmit --strict main.ts")


@case(
    "h-rust-serde",
    "dependency_issue",
    "cargo",
    "the code derives serde traits without the dependency",
    **H,
)
def _(c: Case) -> None:
    cargo(c)
    c.write("Cargo.toml", CARGO_TOML)
    c.write(
        "src/lib.rs", "use serde::Serialize;\n\n#[derive(Serialize)]\npub struct P { pub x: i32 }\n"
    )
    c.run("cargo build --offline --quiet")


@case(
    "h-cargo-tokio",
    "dependency_issue",
    "cargo",
    "a dependency with features cannot be fetched offline",
    **H,
)
def _(c: Case) -> None:
    cargo(c)
    c.write("Cargo.toml", CARGO_TOML + 'tokio = { version = "1", features = ["full"] }\n')
    c.write("src/main.rs", "fn main() {}\n")
    c.run("cargo build --offline --quiet", env={"CARGO_HOME": str(c.tmp / "cargo-home")})


@case(
    "h-go-xtext",
    "dependency_issue",
    "go build",
    "an import of golang.org/x/text with no go.mod entry",
    **H,
)
def _(c: Case) -> None:
    go(c)
    c.write(
        "main.go",
        'package main\n\nimport "golang.org/x/text/language"\n\nfunc main() { _ = language.English }\n',
    )
    c.run(
        "go build ./...",
        env={"GOPROXY": "off", "GOTOOLCHAIN": "local", "GOCACHE": str(c.tmp / "gocache")},
    )


@case(
    "h-javac-gson",
    "dependency_issue",
    "javac",
    "an import of Gson without it on the class path",
    **H,
)
def _(c: Case) -> None:
    c.need("javac", "javac -version")
    c.write(
        "src/J.java", "import com.google.gson.Gson;\n\npublic class J { Gson g = new Gson(); }\n"
    )
    c.run("javac -d out src/J.java")


@case(
    "h-flaky-hashseed",
    "test_flakiness",
    "pytest",
    "a test that depends on set order flips with the hash seed",
    **H,
)
def _(c: Case) -> None:
    py_version(c)
    c.write(
        "test_order.py",
        "def test_first():\n    assert next(iter({'apple', 'banana', 'cherry'})) == 'apple'\n",
    )
    c.same_code = True
    until_both(c, PYTEST, first="fail", then="pass")


@case(
    "h-flaky-node-clock",
    "test_flakiness",
    "node --test",
    "a clock-based node test failed; the rerun passed",
    **H,
)
def _(c: Case) -> None:
    node_version(c)
    c.write(
        "t.test.js",
        "const test = require('node:test');\nconst assert = require('node:assert');\ntest('even ms', () => { assert.strictEqual(Date.now() % 2, 0); });\n",
    )
    for _ in range(60):
        out = c.sh(NODE_TEST)
        if "# fail 1" in out:
            again = c.sh(NODE_TEST)
            if "# fail 0" in again:
                c.logs.append(out)
                c.rerun = again
                c.commands.append(NODE_TEST)
                return
    raise Skip("no fail-then-pass")


@case(
    "h-flaky-unittest-history",
    "test_flakiness",
    "unittest",
    "pass, fail on the same code (a random sample)",
    **H,
)
def _(c: Case) -> None:
    py_version(c)
    c.write(
        "test_s.py",
        "import random, unittest\n\nclass S(unittest.TestCase):\n    def test_sample(self):\n        self.assertIn(random.choice('abc'), 'ab')\n",
    )
    c.same_code = True
    until_both(c, f"{UNITTEST} discover -v", first="pass", then="fail")


@case(
    "h-flaky-state-node",
    "test_flakiness",
    "loopctl",
    "a loop on a flaky node test: fails, then passes with no change",
    **H,
)
def _(c: Case) -> None:
    files = {
        "c.test.js": "const test = require('node:test');\nconst assert = require('node:assert');\ntest('coin', () => { assert.ok(Math.random() < 0.5); });\n"
    }
    for _ in range(30):
        loop_case(
            c,
            files,
            [[{"say": "no change"}]],
            test_cmd="node --test",
            config={"limits": {"max_iterations": 6}, "stuck": {"enabled": False}},
        )
        assert c.state is not None
        rows = [
            json.loads(line) for line in (c.state / "iterations.jsonl").read_text().splitlines()
        ]
        if len(rows) >= 2 and rows[-1]["tests_passed"] and not rows[-2]["tests_passed"]:
            return
        c.workdir.mkdir(exist_ok=True)
    raise Skip("never failed first")


@case(
    "h-flaky-neg-rerun-fails",
    "code_error",
    "node --test",
    "a deterministic node failure whose rerun fails too",
    **H,
)
def _(c: Case) -> None:
    node_version(c)
    c.write(
        "d.test.js",
        "const test = require('node:test');\nconst assert = require('node:assert');\ntest('d', () => { assert.strictEqual([3, 1].sort()[0], 3); });\n",
    )
    c.logs.append(c.sh(NODE_TEST))
    c.rerun = c.sh(NODE_TEST)
    c.commands.append(NODE_TEST)


@case("h-loop-logs-go", "infinite_loop", "go test", "the same go failure in three runs", **H)
def _(c: Case) -> None:
    go(c)
    c.write("s.go", "package demo\n\nfunc Sq(x int) int { return x + x }\n")
    c.write(
        "s_test.go",
        'package demo\n\nimport "testing"\n\nfunc TestSq(t *testing.T) { if Sq(3) != 9 { t.Errorf("Sq(3) = %d", Sq(3)) } }\n',
    )
    for _ in range(3):
        c.run("go test -count=1 ./...", env={**GO_ENV, "GOCACHE": str(c.tmp / "gocache")})


@case("h-loop-logs-tsc", "infinite_loop", "tsc", "the same type error in four runs", **H)
def _(c: Case) -> None:
    binary = tsc(c)
    c.write("v.ts", "const n: number = 'seven';\nconsole.log(n);\n")
    for _ in range(4):
        c.run(f"{binary} --noEmit --strict v.ts")


@case(
    "h-state-same-fix",
    "infinite_loop",
    "loopctl",
    "the agent writes the same wrong fix every iteration",
    **H,
)
def _(c: Case) -> None:
    turns = [[{"write": "calc.py", "content": "def add(a, b):\n    return a * b\n"}]]
    loop_case(c, CALC, turns, config={"limits": {"max_iterations": 4}, "stuck": {"enabled": False}})


@case(
    "h-state-context-gemini", "context_exhaustion", "loopctl", "an overflow in Gemini's words", **H
)
def _(c: Case) -> None:
    turns = [
        [
            {
                "error": "context_overflow",
                "message": "The input token count (1048577) exceeds the maximum number of tokens allowed (1048576).",
            }
        ]
    ]
    loop_case(c, CALC, turns, config={"limits": {"max_iterations": 1}})


@case(
    "h-state-context-words",
    "context_exhaustion",
    "loopctl",
    "an unclassified agent error whose words say the context is full",
    **H,
)
def _(c: Case) -> None:
    turns = [
        [
            {
                "error": "crashed",
                "message": "This model's maximum context length is 128000 tokens. However, your messages resulted in 131072 tokens.",
            }
        ]
    ]
    loop_case(c, CALC, turns, config={"limits": {"max_iterations": 1}})


@case(
    "h-state-neg-timeout",
    "code_error",
    "loopctl",
    "the agent's turn timed out; the code is still wrong",
    **H,
)
def _(c: Case) -> None:
    turns = [[{"error": "timeout", "message": "the agent did not finish in 1800 s"}]]
    loop_case(c, CALC, turns, config={"limits": {"max_iterations": 1}})


# --- across ecosystems, second round: written as a held-out set after the patterns above were
# frozen and classified once (10 of 18 right: see the docs), then moved here and the patterns
# generalised from them ------------------------------------------------------------------------------


@case(
    "py-runner-pip",
    "dependency_issue",
    "python -m",
    "python -m pip where pip is not installed",
)
def _(c: Case) -> None:
    py_version(c)
    env = venv(c)
    c.write("requirements.txt", "attrs\n")
    c.run(f"{env}/bin/python -m pip install -r requirements.txt")


@case(
    "py-installed-attr-mismatch",
    "dependency_issue",
    "pytest",
    "an installed package calls a function its installed dependency lacks (AttributeError)",
)
def _(c: Case) -> None:
    py_version(c)
    wheels = c.tmp / "wheels"
    wheel(
        wheels,
        "gridkit",
        "2.0",
        {
            "gridkit/__init__.py": "import tablecore\n\ndef grid(n):\n    return tablecore.render_grid(n)\n"
        },
    )
    wheel(
        wheels,
        "tablecore",
        "1.0",
        {"tablecore/__init__.py": "def render_table(n):\n    return n\n"},
    )
    env = venv(c, system_site=True, pip=True)
    c.sh(f"{env}/bin/pip install -q --no-deps {wheels}/*.whl", env=PIP_OFFLINE)
    c.write("test_grid.py", "import gridkit\n\ndef test_grid():\n    assert gridkit.grid(2) == 2\n")
    c.run(f"{env}/bin/python -m pytest -q -p no:cacheprovider")


@case(
    "pip-project-requires-python",
    "dependency_issue",
    "pip",
    "pip install . of a project whose requires-python excludes this Python",
)
def _(c: Case) -> None:
    c.versions["pip"] = c.sh(f"{PY} -m pip --version").strip()[:60]
    c.write(
        "pyproject.toml",
        "[build-system]\nrequires = ['setuptools']\nbuild-backend = 'setuptools.build_meta'\n\n"
        "[project]\nname = 'demo'\nversion = '0.1'\nrequires-python = '>=3.99'\n",
    )
    c.write("demo.py", "")
    c.run(f"{PY} -m pip install --no-cache-dir --no-deps .")


@case(
    "uv-pip-requires-python",
    "dependency_issue",
    "uv",
    "uv pip install of a package that needs a newer Python",
)
def _(c: Case) -> None:
    uv = tools(c, "uv")
    wheels = c.tmp / "wheels"
    wheel(wheels, "fastcalc", "2.0", {"fastcalc/__init__.py": ""}, requires_python=">=3.99")
    env = venv(c)
    c.run(
        f"{uv} pip install --offline --no-cache --no-index --find-links {wheels} "
        f"--python {env}/bin/python fastcalc"
    )


@case(
    "pytest-async-plugin",
    "dependency_issue",
    "pytest",
    "async tests without pytest-asyncio (or anyio) installed",
)
def _(c: Case) -> None:
    env = venv(c, system_site=True)
    c.write(
        "test_fetch.py",
        "import asyncio\n\nasync def fetch():\n    await asyncio.sleep(0)\n    return 1\n\n"
        "async def test_fetch():\n    assert await fetch() == 1\n",
    )
    c.run(f"{env}/bin/python -m pytest -q -p no:cacheprovider -W error")


@case(
    "poetry-project-python",
    "dependency_issue",
    "poetry",
    "poetry install: the project needs a newer Python",
)
def _(c: Case) -> None:
    binary, env = poetry(c)
    c.write(
        "pyproject.toml",
        "[project]\nname = 'demo'\nversion = '0.1.0'\nrequires-python = '>=3.99'\ndependencies = []\n"
        "\n[tool.poetry]\npackage-mode = false\n",
    )
    c.run(f"{binary} install", env=env)


@case(
    "pip-hash-mismatch",
    "dependency_issue",
    "pip",
    "pip --require-hashes: the wheel does not match the pinned hash",
)
def _(c: Case) -> None:
    c.versions["pip"] = c.sh(f"{PY} -m pip --version").strip()[:60]
    wheels = c.tmp / "wheels"
    wheel(wheels, "tablecore", "1.0", {"tablecore/__init__.py": ""})
    c.write("requirements.txt", "tablecore==1.0 --hash=sha256:" + "0" * 64 + "\n")
    c.run(
        f"{PY} -m pip install --dry-run --find-links {wheels} -r requirements.txt", env=PIP_OFFLINE
    )


@case(
    "node-builtin-too-new",
    "dependency_issue",
    "node --test",
    "a node: built-in module this Node version does not have",
)
def _(c: Case) -> None:
    node_version(c)
    c.write(
        "db.test.js",
        "const test = require('node:test');\nconst { DatabaseSync } = require('node:sqlite');\n"
        "test('db', () => { new DatabaseSync(':memory:'); });\n",
    )
    c.run(NODE_TEST)


@case(
    "jest-preset-missing",
    "dependency_issue",
    "jest",
    "jest: preset ts-jest is not installed",
)
def _(c: Case) -> None:
    command = jest(c)
    c.write("jest.config.js", "module.exports = { preset: 'ts-jest' };\n")
    c.write("a.test.ts", "test('a', () => expect(1 + 1).toBe(2));\n")
    c.run(command)


@case(
    "vitest-typeerror",
    "code_error",
    "vitest",
    "vitest: calling a method of undefined",
)
def _(c: Case) -> None:
    command = vitest(c)
    c.write("cart.js", "export const total = (cart) => cart.items.reduce((a, b) => a + b, 0);\n")
    c.write(
        "cart.test.js",
        "import { test, expect } from 'vitest';\nimport { total } from './cart.js';\n"
        "test('total', () => expect(total({})).toBe(0));\n",
    )
    c.run(command)


@case(
    "cargo-nightly-feature",
    "dependency_issue",
    "cargo",
    "a crate needs a nightly toolchain (#![feature] on stable)",
)
def _(c: Case) -> None:
    cargo(c)
    c.write("Cargo.toml", CARGO_TOML)
    c.write("src/lib.rs", "#![feature(test)]\nextern crate test;\n\npub fn f() -> u8 { 1 }\n")
    c.run("cargo build --offline --quiet", env={"RUSTC_BOOTSTRAP": ""})


@case(
    "go-cc-missing",
    "dependency_issue",
    "go build",
    "cgo: the C compiler is not installed",
)
def _(c: Case) -> None:
    go(c)
    c.write(
        "z.go",
        'package demo\n\n// int one(void) { return 1; }\nimport "C"\n\nfunc One() int { return int(C.one()) }\n',
    )
    c.run(
        "go build ./...",
        env={**GO_ENV, "GOCACHE": str(c.tmp / "gocache"), "CGO_ENABLED": "1", "CC": "clang-corpus"},
    )


@case(
    "gcc-quoted-system-header",
    "dependency_issue",
    "gcc",
    '#include "sqlite3.h" where SQLite\'s headers are not installed',
)
def _(c: Case) -> None:
    cc(c)
    c.write("Makefile", C_MAKEFILE)
    c.write("calc.c", '#include "sqlite3_corpus.h"\nint add(int a, int b) { return a + b; }\n')
    c.write("calc_test.c", C_TEST)
    c.run("make test")


@case(
    "make-recursive-tool",
    "dependency_issue",
    "make",
    "make -C proto: a code generator that is not installed",
)
def _(c: Case) -> None:
    c.need("make", "make --version")
    c.write("Makefile", "test:\n\t$(MAKE) -C proto\n")
    c.write("proto/Makefile", "all:\n\tprotoc --python_out=. api.proto\n")
    c.write("proto/api.proto", 'syntax = "proto3";\n')
    c.run("make test")


@case(
    "c-segfault",
    "code_error",
    "make",
    "a C test dereferences NULL",
)
def _(c: Case) -> None:
    cc(c)
    c.write("Makefile", C_MAKEFILE)
    c.write(
        "calc.c",
        "#include <stddef.h>\nint add(int a, int b) { int *p = NULL; return *p + a + b; }\n",
    )
    c.write("calc_test.c", C_TEST)
    c.run("make test")


@case(
    "javac-release",
    "dependency_issue",
    "javac",
    "javac --release newer than the JDK",
)
def _(c: Case) -> None:
    c.need("javac", "javac -version")
    c.write("App.java", "public class App {}\n")
    c.run("javac --release 99 -d out App.java")


@case(
    "mvn-npe",
    "code_error",
    "mvn",
    "Maven: a test fails with a NullPointerException",
)
def _(c: Case) -> None:
    command = mvn(c)
    c.write("pom.xml", pom(deps=JUPITER))
    c.write(
        "src/main/java/Names.java",
        "public class Names {\n  static String first;\n  public static int len() { return first.length(); }\n}\n",
    )
    c.write(
        "src/test/java/NamesTest.java",
        "import static org.junit.jupiter.api.Assertions.assertEquals;\nimport org.junit.jupiter.api.Test;\n\n"
        "class NamesTest {\n  @Test void len() { assertEquals(0, Names.len()); }\n}\n",
    )
    c.run(f"{command} test")


@case(
    "sh-python-version",
    "dependency_issue",
    "sh",
    "the test command names a Python version that is not installed",
)
def _(c: Case) -> None:
    c.write("test_x.py", PASSING_TEST)
    c.run("python3.99 -m pytest -q")


# --- held-out across ecosystems, third round: written after the second round's generalisation was
# committed, classified once, never used to tune the patterns -----------------------------------------


@case(
    "h-pytest-xdist-missing", "dependency_issue", "pytest", "pytest -n 2 without pytest-xdist", **H
)
def _(c: Case) -> None:
    env = venv(c, system_site=True)
    c.write("test_x.py", PASSING_TEST)
    c.run(f"{env}/bin/python -m pytest -q -p no:cacheprovider -n 2")


@case(
    "h-py-version-conflict",
    "dependency_issue",
    "python",
    "pkg_resources: the installed version does not satisfy the requirement",
    **H,
)
def _(c: Case) -> None:
    py_version(c)
    wheels = c.tmp / "wheels"
    wheel(wheels, "tablecore", "1.0", {"tablecore/__init__.py": ""})
    env = venv(c, system_site=True, pip=True)
    c.sh(f"{env}/bin/pip install -q --no-deps {wheels}/*.whl", env=PIP_OFFLINE)
    c.write("app.py", "import pkg_resources\n\npkg_resources.require('tablecore>=2')\n")
    c.run(f"{env}/bin/python -W ignore app.py")


@case(
    "h-cargo-target-missing",
    "dependency_issue",
    "cargo",
    "cargo build for a target whose standard library is not installed",
    **H,
)
def _(c: Case) -> None:
    cargo(c)
    c.write("Cargo.toml", CARGO_TOML)
    c.write("src/lib.rs", "pub fn f() -> u8 { 1 }\n")
    c.run("cargo build --offline --quiet --target wasm32-unknown-unknown")


@case(
    "h-go-vendor-inconsistent",
    "dependency_issue",
    "go build",
    "go build -mod=vendor with a vendor directory that lacks a required module",
    **H,
)
def _(c: Case) -> None:
    go(c)
    c.write("go.mod", "module example.com/demo\n\ngo 1.19\n\nrequire golang.org/x/text v0.14.0\n")
    c.write("vendor/modules.txt", "")
    c.write(
        "t.go", 'package demo\n\nimport "golang.org/x/text/language"\n\nvar T = language.English\n'
    )
    c.run(
        "go build ./...",
        env={
            "GOPROXY": "off",
            "GOTOOLCHAIN": "local",
            "GOFLAGS": "-mod=vendor",
            "GOCACHE": str(c.tmp / "gocache"),
        },
    )


@case(
    "h-gxx-std-too-new", "dependency_issue", "g++", "g++ -std=c++29: the compiler is too old", **H
)
def _(c: Case) -> None:
    c.need("g++", "g++ --version")
    c.write("calc.cpp", "#include <cassert>\nint main() { assert(1 + 1 == 2); }\n")
    c.run("g++ -std=c++29 -o calc calc.cpp && ./calc")


@case(
    "h-mvn-enforcer-java",
    "dependency_issue",
    "mvn",
    "Maven's enforcer requires a newer Java than the one installed",
    **H,
)
def _(c: Case) -> None:
    command = mvn(c)
    enforcer = (
        "<plugins><plugin><groupId>org.apache.maven.plugins</groupId><artifactId>maven-enforcer-plugin"
        "</artifactId><version>3.5.0</version><executions><execution><id>java</id><goals><goal>enforce"
        "</goal></goals><configuration><rules><requireJavaVersion><version>[99,)</version>"
        "</requireJavaVersion></rules></configuration></execution></executions></plugin></plugins>"
    )
    c.write("pom.xml", pom(build=enforcer))
    c.write("src/main/java/App.java", "public class App {}\n")
    c.run(f"{command} validate")


@case(
    "h-py-own-attr",
    "code_error",
    "pytest",
    "the project calls a function its own module lacks",
    **H,
)
def _(c: Case) -> None:
    py_version(c)
    c.write("calc.py", "def add(a, b):\n    return a + b\n")
    c.write("test_calc.py", "import calc\n\ndef test_sum():\n    assert calc.total([1, 2]) == 3\n")
    c.run(PYTEST)


@case(
    "h-node-own-export",
    "code_error",
    "node --test",
    "an ES module imports a name the project's module does not export",
    **H,
)
def _(c: Case) -> None:
    node_version(c)
    c.write("package.json", '{"type": "module"}\n')
    c.write("price.js", "export const net = (p) => p / 1.2;\n")
    c.write(
        "price.test.js",
        "import test from 'node:test';\nimport assert from 'node:assert';\nimport { gross } from './price.js';\n"
        "test('gross', () => { assert.strictEqual(gross(10), 12); });\n",
    )
    c.run(NODE_TEST)


@case("h-rust-index", "code_error", "cargo test", "an index out of bounds in a test", **H)
def _(c: Case) -> None:
    cargo(c)
    c.write("Cargo.toml", CARGO_TOML)
    c.write(
        "src/lib.rs",
        "pub fn last(v: &[i32]) -> i32 { v[v.len()] }\n\n#[cfg(test)]\nmod tests {\n    #[test]\n"
        "    fn last() { assert_eq!(super::last(&[1, 2]), 2); }\n}\n",
    )
    c.run("cargo test --offline --quiet")


# --- ecosystems the corpus lacked: Ruby, PHP, Elixir, Haskell, Kotlin and Gradle, Bazel, Conan,
# Nix, pre-commit; and the environment problems the third held-out set found across the old ones
# (a CMake too old, a compiler or a build tool missing, a pinned toolchain, pip check, JAVA_HOME,
# a library's old jar). Classified once with the rules as they were before any rule was written
# for them: that figure is recorded in ``tests/corpus/first-sight.json``.

ECO = (
    TOOLS / "eco"
)  # python -m venv $FC_TOOLS/eco && $FC_TOOLS/eco/bin/pip install pre-commit conan


def ruby(c: Case) -> None:
    c.need("ruby", "ruby --version")


MINITEST = (
    "require 'minitest/autorun'\nrequire_relative 'calc'\n\n"
    "class CalcTest < Minitest::Test\n  def test_add\n    assert_equal 5, Calc.add(2, 3)\n  end\nend\n"
)


@case(
    "rb-loaderror-gem", "dependency_issue", "ruby", "ruby: require of a gem that is not installed"
)
def _(c: Case) -> None:
    ruby(c)
    c.write(
        "calc.rb", "require 'nokogiri_corpus'\n\nmodule Calc\n  def self.add(a, b) = a + b\nend\n"
    )
    c.write("test_calc.rb", MINITEST)
    c.run("ruby test_calc.rb")


@case(
    "rb-bundler-missing-gem",
    "dependency_issue",
    "bundle",
    "bundle exec: a Gemfile gem that is not installed",
)
def _(c: Case) -> None:
    ruby(c)
    c.need("bundle", "bundle --version")
    c.write("Gemfile", "source 'https://rubygems.org'\ngem 'rack_corpus', '1.2.0'\n")
    c.write("calc.rb", "module Calc\n  def self.add(a, b) = a + b\nend\n")
    c.write("test_calc.rb", MINITEST)
    c.run("bundle exec ruby test_calc.rb", env={"BUNDLE_FROZEN": "false", "HOME": str(c.tmp)})


@case(
    "rb-bundler-lock-missing",
    "dependency_issue",
    "bundle",
    "bundle exec: Gemfile.lock names a gem version not installed",
)
def _(c: Case) -> None:
    ruby(c)
    c.need("bundle", "bundle --version")
    c.write("Gemfile", "source 'https://rubygems.org'\ngem 'minitest'\n")
    c.write(
        "Gemfile.lock",
        "GEM\n  remote: https://rubygems.org/\n  specs:\n    minitest (5.99.0)\n\nPLATFORMS\n  ruby\n\n"
        "DEPENDENCIES\n  minitest\n\nBUNDLED WITH\n   2.3.15\n",
    )
    c.write("calc.rb", "module Calc\n  def self.add(a, b) = a + b\nend\n")
    c.write("test_calc.rb", MINITEST)
    c.run("bundle exec ruby test_calc.rb", env={"HOME": str(c.tmp)})


@case(
    "rb-ruby-version",
    "dependency_issue",
    "bundle",
    "the Gemfile asks for a Ruby that is not installed",
)
def _(c: Case) -> None:
    ruby(c)
    c.need("bundle", "bundle --version")
    c.write("Gemfile", "source 'https://rubygems.org'\nruby '3.9.0'\n")
    c.write("calc.rb", "module Calc\n  def self.add(a, b) = a + b\nend\n")
    c.write("test_calc.rb", MINITEST)
    c.run("bundle exec ruby test_calc.rb", env={"HOME": str(c.tmp)})


@case(
    "rb-own-require",
    "code_error",
    "ruby",
    "require_relative of the project's file that was renamed",
)
def _(c: Case) -> None:
    ruby(c)
    c.write("calculator.rb", "module Calc\n  def self.add(a, b) = a + b\nend\n")
    c.write("test_calc.rb", MINITEST)
    c.run("ruby test_calc.rb")


@case(
    "rb-own-require-lib",
    "code_error",
    "ruby",
    "require of the project's lib file (-I lib) that does not exist",
)
def _(c: Case) -> None:
    ruby(c)
    c.write("lib/calculator.rb", "module Calc\n  def self.add(a, b) = a + b\nend\n")
    c.write("test/test_calc.rb", MINITEST.replace("require_relative 'calc'", "require 'calc'"))
    c.run("ruby -Ilib test/test_calc.rb")


@case("rb-nomethod-nil", "code_error", "ruby", "NoMethodError: undefined method for nil")
def _(c: Case) -> None:
    ruby(c)
    c.write("calc.rb", "module Calc\n  def self.add(a, b) = [a, b].find { |x| x > 9 }.abs\nend\n")
    c.write("test_calc.rb", MINITEST)
    c.run("ruby test_calc.rb")


@case("rb-minitest-fail", "code_error", "ruby", "a minitest assertion fails")
def _(c: Case) -> None:
    ruby(c)
    c.write("calc.rb", "module Calc\n  def self.add(a, b) = a - b\nend\n")
    c.write("test_calc.rb", MINITEST)
    c.run("ruby test_calc.rb")


@case(
    "rb-uninitialized-constant",
    "code_error",
    "ruby",
    "NameError: uninitialized constant (the project's class)",
)
def _(c: Case) -> None:
    ruby(c)
    c.write("calc.rb", "module Calculator\n  def self.add(a, b) = a + b\nend\n")
    c.write("test_calc.rb", MINITEST)
    c.run("ruby test_calc.rb")


def php(c: Case) -> None:
    c.need("php", "php --version")


def composer(c: Case) -> str:
    php(c)
    c.need("composer", "composer --version 2>/dev/null")
    return "composer --no-interaction --no-ansi"


COMPOSER_ENV = {"COMPOSER_HOME": "{tmp}/composer", "COMPOSER_DISABLE_NETWORK": "1"}


def composer_env(c: Case) -> dict[str, str]:
    return {k: v.format(tmp=c.tmp) for k, v in COMPOSER_ENV.items()}


PHP_TEST = "<?php\nrequire __DIR__ . '/calc.php';\n\nassert(add(2, 3) === 5);\necho \"ok\\n\";\n"


@case(
    "php-autoload-missing",
    "dependency_issue",
    "php",
    "php: vendor/autoload.php not there (composer install not run)",
)
def _(c: Case) -> None:
    php(c)
    c.write("composer.json", '{"require": {"monolog/monolog": "^3.0"}}\n')
    c.write("calc.php", "<?php\nfunction add($a, $b) { return $a + $b; }\n")
    c.write(
        "test.php",
        "<?php\nrequire __DIR__ . '/vendor/autoload.php';\nrequire __DIR__ . '/calc.php';\nassert(add(2, 3) === 5);\n",
    )
    c.run("php -d zend.assertions=1 test.php")


@case(
    "php-composer-ext-missing",
    "dependency_issue",
    "composer",
    "composer: a PHP extension the project requires is not installed",
)
def _(c: Case) -> None:
    command = composer(c)
    c.write(
        "composer.json",
        '{"require": {"ext-corpusext": "*"}, "repositories": [{"packagist.org": false}]}\n',
    )
    c.run(f"{command} install", env=composer_env(c))


@case(
    "php-composer-php-version",
    "dependency_issue",
    "composer",
    "composer: the project needs a newer PHP",
)
def _(c: Case) -> None:
    command = composer(c)
    c.write(
        "composer.json",
        '{"require": {"php": ">=9.1"}, "repositories": [{"packagist.org": false}]}\n',
    )
    c.run(f"{command} install", env=composer_env(c))


@case(
    "php-composer-package-missing",
    "dependency_issue",
    "composer",
    "composer: a required package no repository has (offline)",
)
def _(c: Case) -> None:
    command = composer(c)
    c.write(
        "composer.json",
        '{"require": {"acme/corpus-missing": "^1.0"}, "repositories": [{"packagist.org": false}]}\n',
    )
    c.run(f"{command} install", env=composer_env(c))


@case(
    "php-composer-lock-stale",
    "dependency_issue",
    "composer",
    "composer check-platform-reqs: an extension the lock needs is missing",
)
def _(c: Case) -> None:
    command = composer(c)
    c.write("composer.json", '{"require": {"ext-corpusext": "*"}}\n')
    c.write(
        "composer.lock",
        '{"content-hash": "x", "packages": [], "packages-dev": [], "platform": {"ext-corpusext": "*"},'
        ' "platform-dev": [], "aliases": [], "minimum-stability": "stable", "stability-flags": [],'
        ' "prefer-stable": false, "prefer-lowest": false, "plugin-api-version": "2.6.0"}\n',
    )
    c.run(f"{command} check-platform-reqs", env=composer_env(c))


@case(
    "php-undefined-function",
    "code_error",
    "php",
    "php: a call to a function the project does not define",
)
def _(c: Case) -> None:
    php(c)
    c.write("calc.php", "<?php\nfunction sum($a, $b) { return $a + $b; }\n")
    c.write("test.php", PHP_TEST)
    c.run("php -d zend.assertions=1 test.php")


@case("php-assert", "code_error", "php", "php: an assertion fails")
def _(c: Case) -> None:
    php(c)
    c.write("calc.php", "<?php\nfunction add($a, $b) { return $a - $b; }\n")
    c.write("test.php", PHP_TEST)
    c.run("php -d zend.assertions=1 test.php")


@case("php-class-not-found", "code_error", "php", "php: the project's class is not found (renamed)")
def _(c: Case) -> None:
    php(c)
    c.write(
        "Calc.php", "<?php\nclass Calculator { public function add($a, $b) { return $a + $b; } }\n"
    )
    c.write(
        "test.php",
        "<?php\nrequire __DIR__ . '/Calc.php';\n$c = new Calc();\nassert($c->add(2, 3) === 5);\n",
    )
    c.run("php -d zend.assertions=1 test.php")


@case(
    "php-require-own-missing",
    "code_error",
    "php",
    "php: require of the project's own file that was renamed",
)
def _(c: Case) -> None:
    php(c)
    c.write("calculator.php", "<?php\nfunction add($a, $b) { return $a + $b; }\n")
    c.write("test.php", PHP_TEST)
    c.run("php -d zend.assertions=1 test.php")


def mix(c: Case) -> dict[str, str]:
    c.need("mix", "elixir --version 2>/dev/null | tail -1")
    return {"MIX_HOME": str(c.tmp / "mix"), "HEX_HOME": str(c.tmp / "hex"), "HEX_OFFLINE": "1"}


def mix_project(c: Case, deps: str = "[]", lib: str = "", test: str = "") -> None:
    c.write(
        "mix.exs",
        "defmodule Calc.MixProject do\n  use Mix.Project\n\n  def project do\n"
        f'    [app: :calc, version: "0.1.0", elixir: "~> 1.14", deps: {deps}]\n  end\nend\n',
    )
    c.write("lib/calc.ex", lib or "defmodule Calc do\n  def add(a, b), do: a + b\nend\n")
    c.write("test/test_helper.exs", "ExUnit.start()\n")
    c.write(
        "test/calc_test.exs",
        test
        or 'defmodule CalcTest do\n  use ExUnit.Case\n\n  test "add" do\n    assert Calc.add(2, 3) == 5\n  end\nend\n',
    )


@case(
    "ex-deps-not-fetched",
    "dependency_issue",
    "mix",
    "mix test: a dependency was never fetched (mix deps.get)",
)
def _(c: Case) -> None:
    env = mix(c)
    mix_project(c, deps='[{:jason, "~> 1.4"}]')
    c.run("mix test < /dev/null", env=env)


@case(
    "ex-dep-module-unavailable",
    "dependency_issue",
    "mix",
    "mix test: the code calls a library mix.exs does not declare",
)
def _(c: Case) -> None:
    env = mix(c)
    mix_project(
        c,
        lib="defmodule Calc do\n  def add(a, b), do: Decimal.add(a, b) |> Decimal.to_integer()\nend\n",
    )
    c.run("mix test < /dev/null", env=env)


@case("ex-elixir-version", "dependency_issue", "mix", "mix.exs asks for a newer Elixir")
def _(c: Case) -> None:
    env = mix(c)
    mix_project(c)
    c.write("mix.exs", (c.workdir / "mix.exs").read_text().replace('"~> 1.14"', '"~> 1.99"'))
    c.run("mix test < /dev/null", env=env)


@case("ex-assert", "code_error", "mix", "ExUnit: an assertion fails")
def _(c: Case) -> None:
    env = mix(c)
    mix_project(c, lib="defmodule Calc do\n  def add(a, b), do: a - b\nend\n")
    c.run("mix test < /dev/null", env=env)


@case(
    "ex-undefined-function",
    "code_error",
    "mix",
    "ExUnit: the project's module lacks the function called",
)
def _(c: Case) -> None:
    env = mix(c)
    mix_project(c, lib="defmodule Calc do\n  def sum(a, b), do: a + b\nend\n")
    c.run("mix test < /dev/null", env=env)


@case("ex-own-module-unavailable", "code_error", "mix", "ExUnit: the project's module was renamed")
def _(c: Case) -> None:
    env = mix(c)
    mix_project(c, lib="defmodule Calculator do\n  def add(a, b), do: a + b\nend\n")
    c.run("mix test < /dev/null", env=env)


@case("ex-compile-error", "code_error", "mix", "mix: a compile error in the project's module")
def _(c: Case) -> None:
    env = mix(c)
    mix_project(c, lib="defmodule Calc do\n  def add(a, b), do: a + c\nend\n")
    c.run("mix test < /dev/null", env=env)


def cabal(c: Case) -> dict[str, str]:
    c.need("cabal", "cabal --version")
    c.need("ghc", "ghc --version")
    # a configuration without package servers: cabal solves against the installed packages only
    (c.tmp / "cabal").mkdir()
    (c.tmp / "cabal" / "config").write_text("jobs: 1\n", encoding="utf-8")
    return {"CABAL_DIR": str(c.tmp / "cabal"), "HOME": str(c.tmp)}


def cabal_project(c: Case, depends: str = "base", main: str = "", version: str = "2.4") -> None:
    c.write(
        "calc.cabal",
        f"cabal-version: {version}\nname: calc\nversion: 0.1.0.0\nbuild-type: Simple\n\n"
        f"test-suite calc-test\n  type: exitcode-stdio-1.0\n  main-is: Main.hs\n  other-modules: Calc\n"
        f"  hs-source-dirs: test, src\n  build-depends: {depends}\n  default-language: Haskell2010\n",
    )
    c.write("src/Calc.hs", "module Calc (add) where\n\nadd :: Int -> Int -> Int\nadd a b = a + b\n")
    c.write(
        "test/Main.hs",
        main
        or 'import Calc (add)\nimport System.Exit\n\nmain :: IO ()\nmain = if add 2 3 == 5 then pure () else die "add 2 3 /= 5"\n',
    )


@case(
    "hs-cabal-unknown-package",
    "dependency_issue",
    "cabal",
    "cabal test: a build-depends package that is not installed (no index)",
)
def _(c: Case) -> None:
    env = cabal(c)
    cabal_project(c, depends="base, aeson")
    c.run("cabal test --offline --enable-tests", env=env)


@case(
    "hs-ghc-missing-module",
    "dependency_issue",
    "ghc",
    "runghc: an import of a package that is not installed",
)
def _(c: Case) -> None:
    cabal(c)
    cabal_project(
        c,
        main="import Calc (add)\nimport Data.Aeson (encode)\n\nmain :: IO ()\nmain = print (encode (add 2 3))\n",
    )
    c.run("runghc -isrc test/Main.hs")


@case(
    "hs-cabal-version",
    "dependency_issue",
    "cabal",
    "cabal: the package description needs a newer cabal-install",
)
def _(c: Case) -> None:
    env = cabal(c)
    cabal_project(c, version="3.12")
    c.run("cabal test --offline --enable-tests", env=env)


@case(
    "hs-base-too-new",
    "dependency_issue",
    "cabal",
    "cabal: the package needs a base (GHC) newer than the installed one",
)
def _(c: Case) -> None:
    env = cabal(c)
    cabal_project(c, depends="base >= 4.99")
    c.run("cabal test --offline --enable-tests", env=env)


@case("hs-type-error", "code_error", "cabal", "cabal test: a type error in the project")
def _(c: Case) -> None:
    env = cabal(c)
    cabal_project(c)
    c.write(
        "src/Calc.hs", "module Calc (add) where\n\nadd :: Int -> Int -> Int\nadd a b = a ++ b\n"
    )
    c.run("cabal test --offline --enable-tests", env=env)


@case("hs-test-fails", "code_error", "cabal", "cabal test: the test suite fails")
def _(c: Case) -> None:
    env = cabal(c)
    cabal_project(c)
    c.write("src/Calc.hs", "module Calc (add) where\n\nadd :: Int -> Int -> Int\nadd a b = a - b\n")
    c.run("cabal test --offline --enable-tests", env=env)


@case(
    "hs-own-module-missing",
    "code_error",
    "ghc",
    "runghc: an import of the project's module that was renamed",
)
def _(c: Case) -> None:
    cabal(c)
    cabal_project(c)
    (c.workdir / "src" / "Calc.hs").rename(c.workdir / "src" / "Calculator.hs")
    c.run("runghc -isrc test/Main.hs")


@case("hs-not-in-scope", "code_error", "ghc", "runghc: a variable not in scope")
def _(c: Case) -> None:
    cabal(c)
    cabal_project(c, main="import Calc (add)\n\nmain :: IO ()\nmain = print (add 2 three)\n")
    c.run("runghc -isrc test/Main.hs")


def kotlin(c: Case) -> None:
    c.need("kotlinc", "kotlinc -version 2>&1 | tail -1")


KT_MAIN = 'fun add(a: Int, b: Int) = a + b\n\nfun main() {\n    check(add(2, 3) == 5) { "add(2, 3) != 5" }\n}\n'


@case(
    "kt-unresolved-import",
    "dependency_issue",
    "kotlinc",
    "kotlinc: an import of a library that is not on the class path",
)
def _(c: Case) -> None:
    kotlin(c)
    c.write("Main.kt", "import com.squareup.moshi.Moshi\n\n" + KT_MAIN)
    c.run("kotlinc Main.kt -d out 2>&1")


@case(
    "kt-unresolved-own",
    "code_error",
    "kotlinc",
    "kotlinc: a call to a function the project does not define",
)
def _(c: Case) -> None:
    kotlin(c)
    c.write("Main.kt", KT_MAIN.replace("check(add", "check(sum"))
    c.run("kotlinc Main.kt -d out 2>&1")


@case("kt-type-mismatch", "code_error", "kotlinc", "kotlinc: a type mismatch")
def _(c: Case) -> None:
    kotlin(c)
    c.write("Main.kt", KT_MAIN.replace("add(2, 3)", 'add(2, "3")'))
    c.run("kotlinc Main.kt -d out 2>&1")


@case("kt-check-fails", "code_error", "kotlin", "kotlin: the program's check fails at run time")
def _(c: Case) -> None:
    kotlin(c)
    c.write("Main.kt", KT_MAIN.replace("a + b", "a - b"))
    c.commands.append("kotlinc Main.kt -include-runtime -d calc.jar")
    c.sh("kotlinc Main.kt -include-runtime -d calc.jar")
    c.run("java -jar calc.jar")
    (c.workdir / "calc.jar").unlink()


GRADLE_JUNIT = (
    "apply plugin: 'java'\nrepositories { mavenCentral() }\n"
    "dependencies { testCompile 'junit:junit:4.13.2' }\n"
)
GRADLE_TEST = (
    "import org.junit.Test;\nimport static org.junit.Assert.assertEquals;\n\n"
    "public class CalcTest {\n  @Test public void adds() { assertEquals(5, Calc.add(2, 3)); }\n}\n"
)


def gradle(c: Case) -> dict[str, str]:
    c.need("gradle", "gradle --version 2>&1 | grep Gradle || true")
    return {"GRADLE_USER_HOME": str(c.tmp / "gradle")}


@case(
    "gradle-dep-offline",
    "dependency_issue",
    "gradle",
    "gradle --offline: a test dependency not in the cache",
)
def _(c: Case) -> None:
    env = gradle(c)
    c.write("build.gradle", GRADLE_JUNIT)
    c.write(
        "src/main/java/Calc.java",
        "public class Calc { static int add(int a, int b) { return a + b; } }\n",
    )
    c.write("src/test/java/CalcTest.java", GRADLE_TEST)
    c.run("gradle test --offline -q", env=env)


@case(
    "gradle-compile-error", "code_error", "gradle", "gradle: a compile error in the project's Java"
)
def _(c: Case) -> None:
    env = gradle(c)
    c.write("build.gradle", "apply plugin: 'java'\n")
    c.write(
        "src/main/java/Calc.java",
        "public class Calc { static int add(int a, int b) { return a + b } }\n",
    )
    c.run("gradle build --offline -q", env=env)


@case(
    "gradle-own-symbol",
    "code_error",
    "gradle",
    "gradle: the project's code calls a method it does not define",
)
def _(c: Case) -> None:
    env = gradle(c)
    c.write("build.gradle", "apply plugin: 'java'\n")
    c.write(
        "src/main/java/Calc.java",
        "public class Calc { static int add(int a, int b) { return sum(a, b); } }\n",
    )
    c.run("gradle build --offline -q", env=env)


@case("gradle-java-home-invalid", "dependency_issue", "gradle", "gradle: JAVA_HOME points nowhere")
def _(c: Case) -> None:
    c.need("gradle", "gradle --version 2>&1 | grep Gradle || true")
    c.write("build.gradle", "apply plugin: 'java'\n")
    c.run(
        "gradle test --offline -q",
        env={"JAVA_HOME": str(c.tmp / "jdk-17"), "GRADLE_USER_HOME": str(c.tmp / "gradle")},
    )


@case("mvn-java-home-invalid", "dependency_issue", "mvn", "mvn: JAVA_HOME is not a JDK")
def _(c: Case) -> None:
    command = mvn(c)
    c.write("pom.xml", pom())
    c.write("src/main/java/App.java", "public class App {}\n")
    c.run(f"{command} test", env={"JAVA_HOME": str(c.tmp / "jdk")})


@case(
    "java-nosuchmethod-old-jar",
    "dependency_issue",
    "java",
    "java: a library jar older than the one compiled against (NoSuchMethodError)",
)
def _(c: Case) -> None:
    c.need("javac", "javac -version 2>&1")
    lib = c.tmp / "lib"
    for version, body in (
        ("1", 'public static String greet() { return "hi"; }'),
        ("2", 'public static String greet(String n) { return "hi " + n; }'),
    ):
        src = lib / version / "src" / "org" / "greeter"
        src.mkdir(parents=True)
        (src / "Greeter.java").write_text(
            f"package org.greeter;\npublic class Greeter {{ {body} }}\n"
        )
        c.sh(
            f"cd {lib / version} && javac -d classes src/org/greeter/Greeter.java && jar cf ../greeter-{version}.jar -C classes ."
        )
    c.write(
        "src/App.java",
        'public class App {\n  public static void main(String[] a) {\n    System.out.println(org.greeter.Greeter.greet("x"));\n  }\n}\n',
    )
    c.commands.append(f"javac -cp {lib}/greeter-2.jar -d out src/App.java")
    c.sh(f"javac -cp {lib}/greeter-2.jar -d out src/App.java")
    c.run(f"java -cp out:{lib}/greeter-1.jar App")
    shutil.rmtree(c.workdir / "out")


@case(
    "java-own-nosuchmethod",
    "code_error",
    "java",
    "java: a NullPointerException in the project's code",
)
def _(c: Case) -> None:
    c.need("javac", "javac -version 2>&1")
    c.write(
        "src/App.java",
        "public class App {\n  static String name;\n  public static void main(String[] a) {\n    System.out.println(name.length());\n  }\n}\n",
    )
    c.sh("javac -d out src/App.java")
    c.commands.append("javac -d out src/App.java")
    c.run("java -cp out App")
    shutil.rmtree(c.workdir / "out")


def bazel(c: Case) -> dict[str, str]:
    c.need("bazel", "bazel --version 2>/dev/null || echo bazel")
    return {"HOME": str(c.tmp)}


BAZEL = "bazel --batch --output_user_root={tmp}/bazel-root"
#: Bazel offline: the C++ rules are fetched from the network, so the cases build with genrules.
BAZEL_CHECK = '#!/bin/sh\n[ "$(cat $1)" = 5 ] || { echo "calc.txt: expected 5, got $(cat $1)" >&2; exit 1; }\ncat $1\n'


def bazel_project(c: Case, srcs: str) -> None:
    c.write("WORKSPACE", "")
    c.write(
        "BUILD",
        f'genrule(name = "calc", srcs = [{srcs}], outs = ["out.txt"], '
        'cmd = "sh $(location check.sh) $(SRCS) > $@", tools = ["check.sh"])\n',
    )
    c.write("check.sh", BAZEL_CHECK)


def bazel_build(c: Case, env: dict[str, str]) -> None:
    c.run(f"{BAZEL.format(tmp=c.tmp)} build --spawn_strategy=local //:calc", env=env, timeout=900)


@case(
    "bazel-repo-missing",
    "dependency_issue",
    "bazel",
    "bazel build: a dependency on an external repository that is not defined",
)
def _(c: Case) -> None:
    env = bazel(c)
    bazel_project(c, '"@corpus_data//:calc.txt"')
    bazel_build(c, env)


@case(
    "bazel-tool-missing",
    "dependency_issue",
    "bazel",
    "bazel build: a genrule runs protoc, which is not installed",
)
def _(c: Case) -> None:
    env = bazel(c)
    c.write("WORKSPACE", "")
    c.write(
        "BUILD",
        'genrule(name = "calc", srcs = ["calc.proto"], outs = ["calc.pb.h"], '
        'cmd = "protoc --cpp_out=$(@D) $(SRCS)")\n',
    )
    c.write("calc.proto", 'syntax = "proto3";\nmessage Sum { int32 total = 1; }\n')
    bazel_build(c, env)


@case(
    "bazel-check-fails",
    "code_error",
    "bazel",
    "bazel build: the project's check rule fails on its data",
)
def _(c: Case) -> None:
    env = bazel(c)
    bazel_project(c, '"calc.txt"')
    c.write("calc.txt", "4\n")
    bazel_build(c, env)


@case(
    "bazel-own-target-missing",
    "code_error",
    "bazel",
    "bazel build: a dependency on a target the project does not define",
)
def _(c: Case) -> None:
    env = bazel(c)
    bazel_project(c, '"//lib:calc.txt"')
    c.write("lib/BUILD", 'exports_files(["sum.txt"])\n')
    c.write("lib/sum.txt", "5\n")
    bazel_build(c, env)


@case(
    "cmake-too-old",
    "dependency_issue",
    "cmake",
    "cmake: cmake_minimum_required newer than the installed CMake",
)
def _(c: Case) -> None:
    c.need("cmake", "cmake --version")
    c.write(
        "CMakeLists.txt",
        "cmake_minimum_required(VERSION 3.99)\nproject(calc C)\nadd_executable(calc main.c)\n",
    )
    c.write("main.c", "int main(void) { return 0; }\n")
    c.run(f"cmake -S . -B {c.tmp}/build")


@case(
    "cmake-no-compiler",
    "dependency_issue",
    "cmake",
    "cmake: the project's language has no compiler installed (Fortran)",
)
def _(c: Case) -> None:
    c.need("cmake", "cmake --version")
    c.write(
        "CMakeLists.txt",
        "cmake_minimum_required(VERSION 3.20)\nproject(calc Fortran)\nadd_executable(calc main.f90)\n",
    )
    c.write("main.f90", "program calc\nend program calc\n")
    c.run(f"cmake -S . -B {c.tmp}/build")


@case(
    "cmake-protoc-missing",
    "dependency_issue",
    "cmake",
    "cmake: find_program(protoc REQUIRED) finds no protoc",
)
def _(c: Case) -> None:
    c.need("cmake", "cmake --version")
    c.write(
        "CMakeLists.txt",
        "cmake_minimum_required(VERSION 3.20)\nproject(calc C)\nfind_program(PROTOC protoc REQUIRED)\nadd_executable(calc main.c)\n",
    )
    c.write("main.c", "int main(void) { return 0; }\n")
    c.run(f"cmake -S . -B {c.tmp}/build")


@case("cmake-build-error", "code_error", "cmake", "cmake --build: a compile error in the project")
def _(c: Case) -> None:
    c.need("cmake", "cmake --version")
    c.write(
        "CMakeLists.txt",
        "cmake_minimum_required(VERSION 3.20)\nproject(calc C)\nadd_executable(calc src/main.c)\n",
    )
    c.write(
        "src/main.c",
        "int add(int a, int b) { return a + b }\nint main(void) { return add(2, 3) != 5; }\n",
    )
    c.run(
        f"cmake -S . -B {c.tmp}/build -DCMAKE_BUILD_TYPE=Debug > /dev/null && cmake --build {c.tmp}/build"
    )


@case(
    "cargo-build-script-protoc",
    "dependency_issue",
    "cargo build",
    "a build script runs protoc, which is not installed",
)
def _(c: Case) -> None:
    cargo(c)
    c.write("Cargo.toml", CARGO_TOML)
    c.write(
        "build.rs",
        'fn main() {\n    let status = std::process::Command::new("protoc").arg("--version").status()\n        .expect("failed to run protoc");\n    assert!(status.success());\n}\n',
    )
    c.write("src/lib.rs", "pub fn f() -> u8 { 1 }\n")
    c.run("cargo build --offline --quiet")


@case(
    "rust-toolchain-not-installed",
    "dependency_issue",
    "cargo build",
    "rust-toolchain.toml pins a toolchain that is not installed",
)
def _(c: Case) -> None:
    cargo(c)
    c.write("Cargo.toml", CARGO_TOML)
    c.write("rust-toolchain.toml", '[toolchain]\nchannel = "1.61.0"\n')
    c.write("src/lib.rs", "pub fn f() -> u8 { 1 }\n")
    c.run("cargo build --offline --quiet", env={"RUSTUP_AUTO_INSTALL": "0"})


def conan(c: Case) -> tuple[str, dict[str, str]]:
    exe = ECO / "bin" / "conan"
    if not exe.exists():
        raise Skip(f"conan is not installed in {ECO}")
    env = {"CONAN_HOME": str(c.tmp / "conan")}
    c.versions["conan"] = c.sh(f"{exe} --version", env=env).strip()
    c.sh(f"{exe} profile detect", env=env)
    c.sh(f"{exe} remote remove conancenter", env=env)
    return str(exe), env


@case(
    "conan-package-missing",
    "dependency_issue",
    "conan",
    "conan install: a required package no remote has",
)
def _(c: Case) -> None:
    exe, env = conan(c)
    c.write("conanfile.txt", "[requires]\nzlib/1.3.1\n\n[generators]\nCMakeDeps\nCMakeToolchain\n")
    c.run(f"{exe} install . --build=missing", env=env)


@case(
    "conan-recipe-error",
    "code_error",
    "conan",
    "conan install: the project's own conanfile.py has a bug",
)
def _(c: Case) -> None:
    exe, env = conan(c)
    c.write(
        "conanfile.py",
        "from conan import ConanFile\n\n\nclass Calc(ConanFile):\n    name = 'calc'\n    settings = 'os'\n\n"
        "    def configure(self):\n        self.options_list.append('shared')\n",
    )
    c.run(f"{exe} install .", env=env)


CONAN_LIB = (
    "from conan import ConanFile\n\n\nclass Zmath(ConanFile):\n    name = 'zmath'\n    version = '1.0'\n"
    "    settings = 'os', 'arch', 'compiler', 'build_type'\n"
)


@case(
    "conan-prebuilt-missing",
    "dependency_issue",
    "conan",
    "conan install: no binary of a required package for this configuration",
)
def _(c: Case) -> None:
    exe, env = conan(c)
    recipe = c.tmp / "zmath"
    recipe.mkdir()
    (recipe / "conanfile.py").write_text(CONAN_LIB, encoding="utf-8")
    c.sh(f"{exe} export {recipe}", env=env)
    c.write("conanfile.txt", "[requires]\nzmath/1.0\n")
    c.run(f"{exe} install .", env=env)


@case(
    "conan-recipe-syntax",
    "code_error",
    "conan",
    "conan install: a syntax error in the project's conanfile.py",
)
def _(c: Case) -> None:
    exe, env = conan(c)
    c.write(
        "conanfile.py",
        "from conan import ConanFile\n\n\nclass Calc(ConanFile)\n    name = 'calc'\n",
    )
    c.run(f"{exe} install .", env=env)


def nix(c: Case) -> dict[str, str]:
    c.need("nix-instantiate", "nix-instantiate --version")
    return {"NIX_PATH": "", "HOME": str(c.tmp)}


@case(
    "nix-nixpkgs-missing",
    "dependency_issue",
    "nix",
    "nix-shell -p: no nixpkgs channel on the search path",
)
def _(c: Case) -> None:
    env = nix(c)
    c.write("test.sh", '#!/bin/sh\n[ "$(expr 2 + 3)" = 5 ]\n')
    c.run("nix-shell -p hello --run 'sh test.sh'", env=env)


@case("nix-daemon-down", "dependency_issue", "nix", "nix: the Nix daemon is not running")
def _(c: Case) -> None:
    env = nix(c)
    c.write(
        "default.nix",
        'derivation { name = "calc"; system = builtins.currentSystem; builder = "/bin/sh"; args = ["-c" "echo 5 > $out"]; }\n',
    )
    c.run("nix-build default.nix", env={**env, "NIX_REMOTE": "daemon"})


@case(
    "nix-undefined-variable",
    "code_error",
    "nix",
    "nix-instantiate: an undefined variable in the project's expression",
)
def _(c: Case) -> None:
    env = nix(c)
    c.write("default.nix", "let add = a: b: a + b; in assert sum 2 3 == 5; true\n")
    c.run("nix-instantiate --eval default.nix", env=env)


@case(
    "nix-assertion",
    "code_error",
    "nix",
    "nix-instantiate: an assertion in the project's expression fails",
)
def _(c: Case) -> None:
    env = nix(c)
    c.write("default.nix", "let add = a: b: a - b; in assert add 2 3 == 5; true\n")
    c.run("nix-instantiate --eval default.nix", env=env)


@case(
    "nix-syntax-error",
    "code_error",
    "nix",
    "nix-instantiate: a syntax error in the project's expression",
)
def _(c: Case) -> None:
    env = nix(c)
    c.write("default.nix", "let add = a: b: a + b in add 2 3\n")
    c.run("nix-instantiate --eval default.nix", env=env)


def pre_commit(c: Case, config: str) -> str:
    exe = ECO / "bin" / "pre-commit"
    if not exe.exists():
        raise Skip(f"pre-commit is not installed in {ECO}")
    c.versions["pre-commit"] = c.sh(f"{exe} --version").strip()
    c.write(".pre-commit-config.yaml", config)
    c.sh("git init -q . && git add -A")
    return f"{exe} run --all-files"


PC_ENV = {"PRE_COMMIT_HOME": "{tmp}/pre-commit", "PRE_COMMIT_COLOR": "never"}


def pc_env(c: Case) -> dict[str, str]:
    return {k: v.format(tmp=c.tmp) for k, v in PC_ENV.items()}


@case(
    "pc-hook-executable-missing",
    "dependency_issue",
    "pre-commit",
    "pre-commit: a system hook whose executable is not installed",
)
def _(c: Case) -> None:
    c.write("run.sh", "#!/bin/sh\necho hi\n")
    command = pre_commit(
        c,
        "repos:\n- repo: local\n  hooks:\n  - id: shellcheck\n    name: shellcheck\n    entry: shellcheck-corpus\n    language: system\n    types: [shell]\n",
    )
    c.run(command, env=pc_env(c))


@case(
    "pc-python-version",
    "dependency_issue",
    "pre-commit",
    "pre-commit: a hook asks for a Python that is not installed",
)
def _(c: Case) -> None:
    c.write("calc.py", "def add(a, b):\n    return a + b\n")
    command = pre_commit(
        c,
        "repos:\n- repo: local\n  hooks:\n  - id: check\n    name: check\n    entry: python -c pass\n    language: python\n    language_version: python3.99\n    types: [python]\n",
    )
    c.run(command, env=pc_env(c))


@case(
    "pc-hook-fails",
    "code_error",
    "pre-commit",
    "pre-commit: the project's own check fails on its code",
)
def _(c: Case) -> None:
    c.write("calc.py", "def add(a, b):\n    return a - b\n")
    c.write("check_calc.py", "import calc\n\nassert calc.add(2, 3) == 5, 'add(2, 3) != 5'\n")
    command = pre_commit(
        c,
        f"repos:\n- repo: local\n  hooks:\n  - id: check\n    name: check calc\n    entry: {sys.executable} check_calc.py\n    language: system\n    pass_filenames: false\n",
    )
    c.run(command, env=pc_env(c))


@case(
    "pc-syntax-check",
    "code_error",
    "pre-commit",
    "pre-commit: a hook compiling the project's Python finds a syntax error",
)
def _(c: Case) -> None:
    c.write("calc.py", "def add(a, b)\n    return a + b\n")
    command = pre_commit(
        c,
        f"repos:\n- repo: local\n  hooks:\n  - id: compile\n    name: compile\n    entry: {sys.executable} -m py_compile\n    language: system\n    types: [python]\n",
    )
    c.run(command, env=pc_env(c))


@case(
    "pip-check-broken",
    "dependency_issue",
    "pip",
    "pip check: an installed package's requirement is too old or missing",
)
def _(c: Case) -> None:
    py_version(c)
    wheels = c.tmp / "wheels"
    wheel(wheels, "tablecore", "1.0", {"tablecore/__init__.py": ""})
    wheel(
        wheels,
        "tableview",
        "1.0",
        {"tableview/__init__.py": ""},
        requires=["tablecore>=2", "tablefmt"],
    )
    env = venv(c, pip=True)
    c.sh(f"{env}/bin/pip install -q --no-deps {wheels}/*.whl", env=PIP_OFFLINE)
    c.run(f"{env}/bin/pip check", env=PIP_OFFLINE)


@case(
    "py-outside-rootdir",
    "code_error",
    "pytest",
    "pytest: the project's own module renamed, run from a subdirectory's rootdir",
)
def _(c: Case) -> None:
    py_version(c)
    c.write("pyproject.toml", "[tool.pytest.ini_options]\npythonpath = ['src']\n")
    c.write("src/billing/__init__.py", "")
    c.write("src/billing/rate.py", "def vat(x):\n    return x * 0.2\n")
    c.write(
        "tests/test_rates.py",
        "from billing.rates import vat\n\ndef test_vat():\n    assert vat(10) == 2\n",
    )
    c.run(PYTEST)


# --- a third round of issue 27: programs a script's first line names, daemons a test needs, npx
# running another package than the project's tool (recorded at first sight before their rules).


@case(
    "sh-env-interpreter-missing",
    "dependency_issue",
    "sh",
    "a script whose #!/usr/bin/env interpreter is not installed",
)
def _(c: Case) -> None:
    c.write("check.sh", "#!/usr/bin/env rubycorpus9\nputs 2 + 3\n")
    (c.workdir / "check.sh").chmod(0o755)
    c.run("./check.sh")


@case(
    "sh-bad-interpreter",
    "dependency_issue",
    "bash",
    "a script whose #! interpreter path does not exist",
)
def _(c: Case) -> None:
    c.write("check.sh", "#!/opt/corpus/bin/python9\nprint(2 + 3)\n")
    (c.workdir / "check.sh").chmod(0o755)
    c.run("bash -c ./check.sh")


@case("sh-script-syntax", "code_error", "bash", "the project's test script has a syntax error")
def _(c: Case) -> None:
    c.write("check.sh", '#!/bin/bash\nif [ "$(expr 2 + 3)" = 5 ]; then\n  echo ok\nfi fi\n')
    c.run("bash check.sh")


@case("sh-script-check-fails", "code_error", "sh", "the project's test script finds a wrong result")
def _(c: Case) -> None:
    c.write("calc.sh", 'add() { expr "$1" - "$2"; }\n')
    c.write(
        "check.sh",
        '. ./calc.sh\n[ "$(add 2 3)" = 5 ] || { echo "add 2 3: expected 5, got $(add 2 3)"; exit 1; }\n',
    )
    c.run("sh check.sh")


@case(
    "psql-server-down",
    "dependency_issue",
    "psql",
    "psql: the PostgreSQL server the tests need is not running",
)
def _(c: Case) -> None:
    c.need("psql", "psql --version")
    c.write("schema.sql", "select 2 + 3 as total;\n")
    (c.tmp / "pg").mkdir()
    c.run(f"psql -h {c.tmp}/pg -U postgres -d calc -f schema.sql")


@case(
    "docker-daemon-down",
    "dependency_issue",
    "docker",
    "docker run: the Docker daemon is not running",
)
def _(c: Case) -> None:
    c.need("docker", "docker --version")
    c.write("test.sh", '[ "$(expr 2 + 3)" = 5 ]\n')
    c.run(
        "docker run --rm -v $PWD:/w -w /w alpine:3 sh test.sh",
        env={"DOCKER_HOST": f"unix://{c.tmp}/docker.sock"},
    )


@case(
    "py-service-down-pytest",
    "dependency_issue",
    "pytest",
    "pytest: a test needs a PostgreSQL server that is not running",
)
def _(c: Case) -> None:
    py_version(c)
    (c.tmp / "pg").mkdir()
    c.write(
        "test_db.py",
        "import subprocess\n\n\ndef test_total():\n"
        f"    out = subprocess.run(['psql', '-h', '{c.tmp}/pg', '-U', 'postgres', '-d', 'calc', '-tAc', 'select 2 + 3'],\n"
        "                         capture_output=True, text=True)\n"
        "    assert out.returncode == 0, out.stderr\n    assert out.stdout.strip() == '5'\n",
    )
    c.run(PYTEST)


@case(
    "npx-other-package",
    "dependency_issue",
    "npx",
    "npx tsc without typescript installed runs another package named tsc",
)
def _(c: Case) -> None:
    node_version(c)
    c.write("package.json", '{"name": "calc", "version": "1.0.0"}\n')
    c.write("calc.ts", "export const add = (a: number, b: number): number => a + b;\n")
    c.run("npx --yes tsc --noEmit calc.ts")


# --- the fourth held-out round: new ecosystems again, written after the rules for the cases above
# were frozen, classified once and left as they came out (their first sight is recorded too).


@case(
    "h-rb-gem-version",
    "dependency_issue",
    "ruby",
    "ruby: gem activation of a version that is not installed",
    **H,
)
def _(c: Case) -> None:
    ruby(c)
    c.write(
        "calc.rb",
        "gem 'minitest', '99.0'\nrequire 'minitest/autorun'\n\nmodule Calc\n  def self.add(a, b) = a + b\nend\n",
    )
    c.run("ruby calc.rb")


@case("h-rb-undefined-local", "code_error", "ruby", "ruby: a misspelt local variable", **H)
def _(c: Case) -> None:
    ruby(c)
    c.write(
        "calc.rb", "module Calc\n  def self.add(a, b)\n    total = a + b\n    totl\n  end\nend\n"
    )
    c.write("test_calc.rb", MINITEST)
    c.run("ruby test_calc.rb")


@case(
    "h-php-extension-function",
    "dependency_issue",
    "php",
    "php: a function of an extension that is not installed (gd)",
    **H,
)
def _(c: Case) -> None:
    php(c)
    c.write("thumb.php", "<?php\nfunction thumb() { return imagecreatetruecolor(10, 10); }\n")
    c.write("test.php", "<?php\nrequire __DIR__ . '/thumb.php';\nassert(thumb() !== false);\n")
    c.run("php -d zend.assertions=1 test.php")


@case("h-php-typeerror", "code_error", "php", "php: a TypeError in the project's code", **H)
def _(c: Case) -> None:
    php(c)
    c.write(
        "calc.php",
        "<?php\ndeclare(strict_types=1);\nfunction add(int $a, int $b): int { return $a + $b; }\n",
    )
    c.write(
        "test.php",
        "<?php\ndeclare(strict_types=1);\nrequire __DIR__ . '/calc.php';\nassert(add(2, '3') === 5);\n",
    )
    c.run("php -d zend.assertions=1 test.php")


@case(
    "h-ex-path-dep-missing",
    "dependency_issue",
    "mix",
    "mix test: a path dependency that is not there",
    **H,
)
def _(c: Case) -> None:
    env = mix(c)
    mix_project(c, deps='[{:corpus_util, path: "../corpus_util"}]')
    c.run("mix test < /dev/null", env=env)


@case("h-ex-match-error", "code_error", "mix", "ExUnit: a MatchError in the project's code", **H)
def _(c: Case) -> None:
    env = mix(c)
    mix_project(
        c,
        lib="defmodule Calc do\n  def add(a, b) do\n    {:ok, s} = {:error, a + b}\n    s\n  end\nend\n",
    )
    c.run("mix test < /dev/null", env=env)


@case(
    "h-hs-hidden-package",
    "dependency_issue",
    "cabal",
    "cabal: a module of a package build-depends does not list",
    **H,
)
def _(c: Case) -> None:
    env = cabal(c)
    cabal_project(c)
    c.write(
        "src/Calc.hs",
        "module Calc (add) where\n\nimport qualified Data.Map as M\n\nadd :: Int -> Int -> Int\nadd a b = M.findWithDefault 0 a (M.fromList [(a, a + b)])\n",
    )
    c.run("cabal test --offline --enable-tests", env=env)


@case(
    "h-hs-head-empty", "code_error", "cabal", "cabal test: head of an empty list at run time", **H
)
def _(c: Case) -> None:
    env = cabal(c)
    cabal_project(c)
    c.write(
        "src/Calc.hs",
        "module Calc (add) where\n\nadd :: Int -> Int -> Int\nadd a b = head (filter (> 99) [a, b])\n",
    )
    c.run("cabal test --offline --enable-tests", env=env)


@case(
    "h-gradle-plugin-missing",
    "dependency_issue",
    "gradle",
    "gradle --offline: a build plugin that is not in the cache",
    **H,
)
def _(c: Case) -> None:
    env = gradle(c)
    c.write(
        "build.gradle", "plugins {\n  id 'org.corpus.lint' version '1.0'\n}\napply plugin: 'java'\n"
    )
    c.write(
        "src/main/java/Calc.java",
        "public class Calc { static int add(int a, int b) { return a + b; } }\n",
    )
    c.run("gradle build --offline -q", env=env)


@case(
    "h-kt-null",
    "code_error",
    "kotlin",
    "kotlin: a NullPointerException from !! in the project's code",
    **H,
)
def _(c: Case) -> None:
    kotlin(c)
    c.write(
        "Main.kt",
        "fun find(x: Int): Int? = if (x > 9) x else null\n\nfun main() {\n    println(find(2)!! + 3)\n}\n",
    )
    c.commands.append("kotlinc Main.kt -include-runtime -d calc.jar")
    c.sh("kotlinc Main.kt -include-runtime -d calc.jar")
    c.run("java -jar calc.jar")
    (c.workdir / "calc.jar").unlink()


@case(
    "h-bazel-build-syntax",
    "code_error",
    "bazel",
    "bazel build: a syntax error in the project's BUILD file",
    **H,
)
def _(c: Case) -> None:
    env = bazel(c)
    bazel_project(c, '"calc.txt"')
    c.write("BUILD", (c.workdir / "BUILD").read_text().replace("outs = ", "outs ="))
    c.write("BUILD", (c.workdir / "BUILD").read_text().replace('"calc.txt"]', '"calc.txt"'))
    c.write("calc.txt", "5\n")
    bazel_build(c, env)


@case(
    "h-bazel-pandoc-missing",
    "dependency_issue",
    "bazel",
    "bazel build: a genrule runs a tool that is not installed",
    **H,
)
def _(c: Case) -> None:
    env = bazel(c)
    c.write("WORKSPACE", "")
    c.write(
        "BUILD",
        'genrule(name = "calc", srcs = ["calc.txt"], outs = ["out.txt"], cmd = "pandoc -t plain $(SRCS) > $@")\n',
    )
    c.write("calc.txt", "# Calc\n")
    bazel_build(c, env)


@case(
    "h-conan-version-range",
    "dependency_issue",
    "conan",
    "conan install: a version range no remote can satisfy",
    **H,
)
def _(c: Case) -> None:
    exe, env = conan(c)
    c.write("conanfile.txt", "[requires]\nfmt/[>=10 <11]\n")
    c.run(f"{exe} install .", env=env)


@case(
    "h-conan-recipe-exception",
    "code_error",
    "conan",
    "conan install: the project's recipe raises in requirements()",
    **H,
)
def _(c: Case) -> None:
    exe, env = conan(c)
    c.write(
        "conanfile.py",
        "from conan import ConanFile\n\n\nclass Calc(ConanFile):\n    name = 'calc'\n\n"
        "    def requirements(self):\n        deps = {'fmt': '10.2.1'}\n        self.requires(f\"zlib/{deps['zlib']}\")\n",
    )
    c.run(f"{exe} install .", env=env)


@case(
    "h-nix-attr-missing",
    "code_error",
    "nix",
    "nix-instantiate: the project's attribute set lacks the attribute used",
    **H,
)
def _(c: Case) -> None:
    env = nix(c)
    c.write("lib.nix", "{ add = a: b: a + b; }\n")
    c.write("default.nix", "let lib = import ./lib.nix; in assert lib.sum 2 3 == 5; true\n")
    c.run("nix-instantiate --eval default.nix", env=env)


@case(
    "h-nix-experimental",
    "dependency_issue",
    "nix",
    "nix build: the installed Nix has flakes and nix-command disabled",
    **H,
)
def _(c: Case) -> None:
    env = nix(c)
    c.write("flake.nix", "{ outputs = { self }: { x = 5; }; }\n")
    c.run("nix eval .#x", env=env)


@case(
    "h-pc-docker-missing",
    "dependency_issue",
    "pre-commit",
    "pre-commit: a docker_image hook with no docker daemon",
    **H,
)
def _(c: Case) -> None:
    c.write("calc.py", "def add(a, b):\n    return a + b\n")
    command = pre_commit(
        c,
        "repos:\n- repo: local\n  hooks:\n  - id: fmt\n    name: fmt\n    entry: corpus/black:latest black\n    language: docker_image\n    types: [python]\n",
    )
    c.run(command, env=pc_env(c))


@case(
    "h-pc-pygrep",
    "code_error",
    "pre-commit",
    "pre-commit: a pygrep hook finds a breakpoint left in the code",
    **H,
)
def _(c: Case) -> None:
    c.write("calc.py", "def add(a, b):\n    breakpoint()\n    return a + b\n")
    command = pre_commit(
        c,
        "repos:\n- repo: local\n  hooks:\n  - id: no-breakpoint\n    name: no breakpoint()\n    entry: 'breakpoint\\(\\)'\n    language: pygrep\n    types: [python]\n",
    )
    c.run(command, env=pc_env(c))


# --- issue 27, a fifth round: tools and situations neither corpus had (Perl, Lua, OCaml, Erlang,
# Fortran, Meson, Autotools, Yarn, programs and libraries at run time), written once in the
# categories' corpus (plugins/context-errors/tests/corpus/fresh_round.py) with both labels, and
# recorded at first sight (accuracy.py --first-sight) before any rule was written for them.

sys.path.insert(0, str(HERE.parents[1] / "context-errors" / "tests" / "corpus"))
import fresh_round  # noqa: E402

FRESH_PROGRAMS = {"lua": "lua5.4", "configure": "autoconf", "yarn": "yarnpkg", "exec": "gcc"}
FRESH_PROGRAMS |= {"python": "python3"}


def _fresh(scenario: fresh_round.Scenario) -> Callable[[Case], None]:
    def build(c: Case) -> None:
        c.need(
            FRESH_PROGRAMS.get(scenario.tool, scenario.tool), fresh_round.VERSIONS[scenario.tool]
        )
        c.category = scenario.category
        c.ecosystem = fresh_round.ECOSYSTEM_OF[scenario.id.split("-")[1]]
        for name, text in scenario.files.items():
            c.write(name, text)
        c.run(scenario.cmd)

    return build


for _scenario in fresh_round.scenarios():
    case(_scenario.id, _scenario.mode, _scenario.tool, _scenario.description)(_fresh(_scenario))
for _scenario in fresh_round.held_out():  # written after the round's rules were frozen
    case(_scenario.id, _scenario.mode, _scenario.tool, _scenario.description, **H)(
        _fresh(_scenario)
    )


# --- writing the corpus -------------------------------------------------------------------------------


#: Where packages came from is this machine's business, not the corpus's: URLs and local package
#: mirrors are replaced by placeholders (no rule looks at them).
HOSTS = (
    (re.compile(r"(?:https?|file)://[^\s'\")\]]+"), "{URL}"),
    (re.compile(r"(Looking in links: ).*"), r"\1{LOCAL}"),
    (re.compile(r"\bcrates\.io\b"), "{CRATE_REGISTRY}"),
)


def _clean(text: str, c: Case) -> str:
    text = text.replace(str(c.workdir), "{WORKDIR}").replace(str(c.tmp), "{TMP}")
    text = text.replace(sys.prefix, "{VENV}").replace(str(TOOLS), "{TOOLS}")
    for pattern, placeholder in HOSTS:
        text = pattern.sub(placeholder, text)
    if len(text) > MAX_LOG:
        text = (
            text[:20_000]
            + f"\n... [{len(text) - MAX_LOG} characters omitted] ...\n"
            + text[-(MAX_LOG - 20_000) :]
        )
    return text


def _copy_tree(source: Path, target: Path, c: Case) -> None:
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source)
        if any(part in SKIP_COPY for part in relative.parts) or not path.is_file():
            continue
        if path.stat().st_size > 100_000:
            continue
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        try:
            destination.write_text(_clean(path.read_text(encoding="utf-8"), c), encoding="utf-8")
        except UnicodeDecodeError:
            continue


def _copy_state(source: Path, target: Path, c: Case) -> None:
    keep = (
        "iterations.jsonl",
        "events.jsonl",
        "error-summary.json",
        "loop-state.md",
        "progress.md",
    )
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source)
        if not path.is_file():
            continue
        if path.name in keep or path.name.endswith(".tests.log"):
            destination = target / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            destination.write_text(
                _clean(path.read_text(encoding="utf-8", errors="replace"), c), encoding="utf-8"
            )


def save(c: Case, root: Path = CORPUS) -> Path:
    target = root / c.id
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    meta = {
        "id": c.id,
        "label": c.label,
        "tool": c.tool,
        "description": c.description,
        "kind": "state" if c.state else "logs",
        "same_code": c.same_code,
        "commands": [_clean(cmd, c) for cmd in c.commands],
        "versions": c.versions,
        "generated": dt.date.today().isoformat(),
        "platform": sys.platform,
        **({"category": c.category} if c.category else {}),
        **({"ecosystem": c.ecosystem} if c.ecosystem else {}),
    }
    if c.state is not None:
        _copy_state(c.state, target / "state", c)
    else:
        for index, text in enumerate(c.logs, 1):
            (target / "logs").mkdir(exist_ok=True)
            (target / "logs" / f"{index}.log").write_text(_clean(text, c), encoding="utf-8")
        if c.rerun is not None:
            (target / "rerun.log").write_text(_clean(c.rerun, c), encoding="utf-8")
    _copy_tree(c.workdir, target / "workdir", c)
    (target / "case.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--only", default="", help="only cases whose id starts with this (comma-separated: any)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary projects")
    parser.add_argument("--heldout", action="store_true", help="make the held-out set instead")
    args = parser.parse_args(argv)
    random.seed()
    made, skipped = 0, []
    registry, root = (HELDOUT, HELDOUT_DIR) if args.heldout else (CASES, CORPUS)
    for case_id, label, tool, description, build in registry:
        if not case_id.startswith(tuple(args.only.split(","))):
            continue
        c = Case(case_id, label, tool, description)
        try:
            build(c)
            if not c.logs and c.state is None:
                raise Skip("the case produced no output")
            save(c, root)
            made += 1
            print(f"made    {case_id:34} {label}")
        except Skip as why:
            skipped.append(case_id)
            print(f"skipped {case_id:34} {why}")
        finally:
            if not args.keep:
                shutil.rmtree(c.tmp, ignore_errors=True)
    print(f"{made} cases written to {root}; {len(skipped)} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
