"""Development sessions: `nox` runs everything CI runs; `nox -s bench` prints the benchmarks."""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import nox

ROOT = Path(__file__).parent
#: uv when nox was installed with it (`pip install 'nox[uv]'`, as the README and .ci/run do): a
#: session's install took 15-25 s with pip and takes 1-2 s with uv, and CI makes eleven
#: sessions and isolation eight venvs more; venv (and pip) otherwise
nox.options.default_venv_backend = "uv|venv"
#: uv installs without compiling to bytecode (pip compiles), and where PYTHONDONTWRITEBYTECODE is
#: set (this project's machines set it) nothing is ever cached either: every Python process the
#: suite starts (the CLI, plugins, pytest workers) compiled loopctl, rich, typer, pytest and
#: hypothesis from source, 0.6 CPU-s of each start. Compiling once at install removes that.
os.environ.setdefault("UV_COMPILE_BYTECODE", "1")
nox.options.reuse_existing_virtualenvs = False
nox.options.download_python = "never"
nox.options.error_on_missing_interpreters = False

SUPPORTED = ("3.10", "3.11", "3.12", "3.13")
TEST_DEPS = ["pytest>=7.4", "hypothesis>=6.90", "pytest-xdist>=3.5", "jsonschema>=4.18"]
#: context-errors' `postgres` extra, for its Postgres store's tests (they skip without it, or fail
#: when LOOPCTL_REQUIRE_POSTGRES=1, as .ci/run sets). Not in TEST_DEPS: `isolation` proves the
#: plugin imports and loads without it.
POSTGRES_DEPS = ["psycopg[binary]>=3.2"]
#: core's `prices` extra, so the tests of the genai-prices path run (they skip without it).
PRICES_DEPS = ["genai-prices>=0.2.3; python_version >= '3.11'"]


def _find_interpreters() -> list[str]:
    """The Python versions from SUPPORTED that can run here. pyenv installs that are not
    activated (their shims fail) are put on PATH so nox finds them by version."""
    found = []
    for version in SUPPORTED:
        installs = sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}.*/bin")))
        for bindir in [None, *installs]:
            path = (
                shutil.which(f"python{version}") if bindir is None else f"{bindir}/python{version}"
            )
            if path and subprocess.run([path, "-c", "pass"], capture_output=True).returncode == 0:
                if bindir is not None:
                    os.environ["PATH"] = f"{bindir}{os.pathsep}{os.environ['PATH']}"
                found.append(version)
                break
    return found


INSTALLED_PYTHONS = _find_interpreters()


def distributions(kind: str) -> list[Path]:
    """Every distribution under plugins/ or contrib/ (a directory with a pyproject.toml)."""
    return sorted(p.parent for p in (ROOT / kind).glob("*/pyproject.toml"))


def _pyproject(dist: Path) -> dict[str, Any]:
    """``dist``'s pyproject.toml."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    return tomllib.loads((dist / "pyproject.toml").read_text())


def _project(dist: Path) -> dict[str, Any]:
    """The ``[project]`` table of ``dist``'s pyproject.toml."""
    project: dict[str, Any] = _pyproject(dist)["project"]
    return project


def _requirement_name(requirement: str) -> str:
    """The distribution a requirement names, lower case: ``psycopg[binary]>=3.2`` → ``psycopg``."""
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower()


def local_requirements(dist: Path) -> list[str]:
    """The first-party distributions ``dist`` depends on, as local paths (pip would otherwise
    look for them on the package index): ``loopctl-context-errors`` → ``./plugins/context-errors``."""
    local = {
        f"loopctl-{p.name}": f"./{p.relative_to(ROOT)}"
        for p in distributions("plugins") + distributions("contrib")
    }
    declared = _project(dist)["dependencies"]
    names = {_requirement_name(req) for req in declared}
    return sorted(local[name] for name in names if name in local)


def all_distributions() -> list[str]:
    return [
        "./core",
        *[f"./{p.relative_to(ROOT)}" for p in distributions("plugins") + distributions("contrib")],
    ]


#: Wheels of the first-party distributions, built once per nox run and installed by every
#: session that needs them (pure Python: one set serves each interpreter). Building from the
#: source folders instead cost a fresh build environment per distribution, per session and
#: per isolation venv.
WHEELHOUSE = ROOT / ".nox" / "wheelhouse"
_BUILT: dict[str, str] = {}


def wheels(session: nox.Session, *sources: str) -> list[str]:
    """The built wheels of ``sources`` (``./core``, ``./plugins/goal-guard``, ...); every
    first-party distribution is built the first time a session asks."""
    if not _BUILT:
        shutil.rmtree(WHEELHOUSE, ignore_errors=True)
        # one build environment for all (their backends, installed once), not a fresh one per
        # distribution; its own venv, so that the backend is not in the session's
        builder = WHEELHOUSE.parent / "wheelhouse-build"
        shutil.rmtree(builder, ignore_errors=True)
        python = str(builder / "bin" / "python")
        backends = {
            req
            for source in all_distributions()
            for req in _pyproject(ROOT / source)["build-system"]["requires"]
        }
        if session.venv_backend == "uv":  # 3-4 s; pip's venv, install and wheel took 12-30 s
            session.run("python", "-m", "venv", "--without-pip", str(builder))
            install_into(session, python, *sorted(backends))
            for source in all_distributions():
                session.run(
                    "uv", "build", "-q", "--wheel", "--no-build-isolation", "--python", python,
                    "--out-dir", str(WHEELHOUSE), source,
                )  # fmt: skip
        else:
            session.run("python", "-m", "venv", str(builder))
            session.run(python, "-m", "pip", "install", "-q", *sorted(backends), external=True)
            session.run(
                python, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                "--wheel-dir", str(WHEELHOUSE), *all_distributions(),
                external=True,
            )  # fmt: skip
        for source in all_distributions():
            name = re.sub(r"[-_.]+", "_", _project(ROOT / source)["name"]).lower()
            (wheel,) = WHEELHOUSE.glob(f"{name}-*.whl")
            _BUILT[source] = str(wheel)
    return [_BUILT[source] for source in sources]


def test_paths() -> list[str]:
    paths = ["core/tests", "tests"]
    for dist in distributions("plugins") + distributions("contrib"):
        if (dist / "tests").is_dir():
            paths.append(str((dist / "tests").relative_to(ROOT)))
    return paths


#: What every `tests-3.x` session leaves out: the real agent CLIs (`e2e`), fresh venvs (`venv`,
#: run by `isolation` and `packaging`) and the races of processes, signals and clocks
#: (`timing`): `load` runs those, on the newest Python, under a CPU hog, the harder of the two
#: conditions (they ran quietly here and three times more under the hog).
SUITE_MARKS = "not e2e and not venv and not timing"
#: What the sessions of the older Pythons leave out (they run everything else):
#: - the tests that prove what the operating system does with processes (`process`: kills
#:   after every write, orphans and a subreaper, pseudo-terminals, the fleet's guard; and the
#:   `timing` ones, in `load`). loopctl drives those through the same few calls on every
#:   version (os.kill, os.killpg, subprocess with a new session, prctl);
#: - the cross-package scenarios in tests/ (crash, kill, interrupt and resume, a full disk,
#:   secrets through a whole run, the docs' examples): each drives the real command through
#:   subprocesses, and the code they reach is tested unit by unit in the per-distribution
#:   suites, which run on every version;
#: - the fleet's tests with a real Temporal dev server and workers (`temporal`): a server
#:   binary and worker processes (they ran once before too, in `isolation`);
#: - the tests marked `slow` (a second or more: whole loops, the CLI in a subprocess, servers).
#:   They drive the same loop code through the same calls on every version; what differs
#:   between versions is what a version added, changed or removed, and that is caught on
#:   every version by the fast tests of the code the loops reach (parsers, config, state
#:   files, stdlib behaviour such as tomllib/tomli, sqlite3, asyncio, warnings as errors,
#:   every Hypothesis property: none is ever marked slow), and statically by mypy, which
#:   checks every distribution against 3.10's standard library (`python_version` in
#:   pyproject.toml: an API 3.10 lacks is an error). Run on 3.10 too, they were more than
#:   half of its session's time (3.10 took 185 s with them on a fresh clone; 3.11, 90 s without).
#: Those run once, on the newest Python. Every supported Python runs the rest of the
#: per-distribution suites (core/tests, plugins/*/tests, contrib/*/tests). A test of
#: something that can differ between versions belongs there, fast and unmarked; a new test
#: that takes a second or more (``pytest --durations``) gets the `slow` mark, unless it is a
#: Hypothesis property or tests something a Python version changes.
OLDER_PYTHON_MARKS = "not process and not temporal and not slow"


def _newest(python: object) -> bool:
    """Whether ``python`` (a session's interpreter) is the newest installed supported one."""
    return not INSTALLED_PYTHONS or python == INSTALLED_PYTHONS[-1]


@nox.session(python=INSTALLED_PYTHONS or None)
def tests(session: nox.Session) -> None:
    """The tests on this Python: on the newest all (`timing` in `load`), on the older ones all
    but the run-once ones (OLDER_PYTHON_MARKS)."""
    # pip: `loopctl plugins install` is tested in a venv as `python -m venv` makes it (uv's has none)
    session.install(
        *wheels(session, *all_distributions()), *TEST_DEPS, *PRICES_DEPS, *POSTGRES_DEPS, "pip"
    )
    if _newest(session.python):
        marks, paths = SUITE_MARKS, test_paths()
    else:
        marks = f"{SUITE_MARKS} and {OLDER_PYTHON_MARKS}"
        paths = [path for path in test_paths() if path != "tests"]
    session.run(
        "pytest", "-n", WORKERS, "--dist", "worksteal", "-m", marks, *paths, *session.posargs
    )


#: How many times `nox -s load` runs the timing-sensitive tests, each time under the CPU hog:
#: once in CI (a run costs about a minute; the three CI made took a sixth of the suite's time:
#: repeating is for hunting a flake, not for every submission): ``LOOPCTL_LOAD_RUNS=10 nox -s
#: load`` repeats them.
LOAD_RUNS = int(os.environ.get("LOOPCTL_LOAD_RUNS", "1"))


def _cores() -> int:
    """The cores this process may run on (fewer than the machine's under a CPU limit)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


#: pytest-xdist workers of a `tests-3.x` session: two per core. Most of the suite's time is
#: spent waiting (for the processes, servers and files a test starts and waits for): with one
#: worker per core the 2-core machine stayed at 1.2-1.4 cores busy. The `timing` tests, which
#: race the clock, run in `load` with one worker per core under the hog instead. Work stealing
#: keeps the longest tests (the kill campaign, the fleet's) from queueing behind one worker.
WORKERS = str(2 * _cores())


@nox.session(python=INSTALLED_PYTHONS[-1:] or None)
def load(session: nox.Session) -> None:
    """The tests marked `timing` (they race processes, signals or clocks) under a CPU hog that
    keeps every core busy (LOAD_RUNS times): a suite green only on a quiet machine fails here."""
    session.install(*wheels(session, *all_distributions()), *TEST_DEPS, *POSTGRES_DEPS)
    hog = "while True:\n    pass\n"
    hogs = [
        subprocess.Popen([sys.executable, "-c", hog], stdin=subprocess.DEVNULL)
        for _ in range(max(_cores(), 2))
    ]
    try:
        for run in range(1, LOAD_RUNS + 1):
            session.log(f"run {run} of {LOAD_RUNS}, with {len(hogs)} busy-loop processes")
            session.run(
                "pytest", "-q", "-n", "2", "-m", "timing and not e2e and not venv",
                *test_paths(), *session.posargs,
            )  # fmt: skip
    finally:
        for proc in hogs:
            proc.kill()
            proc.wait()


@nox.session(name="kill-campaign", default=False)
def kill_campaign(session: nox.Session) -> None:
    """SIGKILL a loop after every one of its durable writes, each resumed to the end (a few
    minutes; the suite kills after one write of each kind: tests/test_kill_at_every_write.py).
    Not run by CI: run it when the state files, the journal or resume change."""
    session.install(*wheels(session, *all_distributions()), *TEST_DEPS)
    session.run(
        "pytest", "-q", "-n", "2", "tests/test_kill_at_every_write.py", *session.posargs,
        env={"LOOPCTL_KILL_EVERY_WRITE": "1"},
    )  # fmt: skip


@nox.session
def lint(session: nox.Session) -> None:
    """ruff: lint and formatting; twine: every distribution's metadata and package page."""
    session.install("ruff>=0.6", "twine>=6.1")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("twine", "check", "--strict", *wheels(session, *all_distributions()))


@nox.session
def packaging(session: nox.Session) -> None:
    """Install by the published names from a local wheelhouse into a fresh venv (demo, plugins
    list, plugins install/uninstall). What loopctl costs a user's own pytest run is a figure of
    `nox -s bench` (bench_pytest_entry_point, 45 s, not CI's: a timed target); what keeps it
    small, that pytest imports only loopctl's entry-point module, is a test of the suite
    (core/tests/test_pytest_entry_point.py)."""
    # uv: the real one installs plugins into a venv without pip, as `uv tool install` makes it
    # pip: the tests download and install with it (a venv uv made has none)
    session.install(*wheels(session, *all_distributions()), *TEST_DEPS, "uv", "pip")
    session.run(
        "pytest", "-q", "-p", "no:cacheprovider", "-m", "venv", "tests/test_install_by_name.py",
        env={"LOOPCTL_WHEELHOUSE": str(WHEELHOUSE), "LOOPCTL_REQUIRE_UV": "1"},
    )  # fmt: skip


@nox.session
def types(session: nox.Session) -> None:
    """mypy: strict on core, checked on plugins and contrib."""
    # tomli: checked as 3.10
    session.install(
        "mypy>=1.10", "tomli", *wheels(session, *all_distributions()), *TEST_DEPS, *POSTGRES_DEPS
    )
    session.run("mypy")
    for dist in distributions("plugins") + distributions("contrib"):
        src = dist / "src"
        if src.is_dir():
            session.run("mypy", "--ignore-missing-imports", str(src.relative_to(ROOT)))


#: Run in each isolation venv: every module of the plugin imports (one may miss only what an
#: extra of the plugin's installs: context-errors' Postgres store needs psycopg), and `loopctl
#: plugins list` finds the plugin and loads it, not broken. argv: the distribution's name, its
#: import packages, then after "--" the modules its extras provide.
ISOLATION_CHECK = """
import importlib, json, pkgutil, subprocess, sys
args = sys.argv[1:]
split = args.index("--")
(dist, *packages), extras = args[:split], set(args[split + 1:])
for package in packages:
    top = importlib.import_module(package)
    for module in pkgutil.walk_packages(top.__path__, package + "."):
        try:
            importlib.import_module(module.name)
        except ModuleNotFoundError as error:
            if (error.name or "").partition(".")[0] not in extras:
                raise
            print(module.name, "needs an extra:", error.name)
listed = subprocess.run([sys.executable, "-m", "loopctl", "plugins", "list", "--json"],
                        capture_output=True, text=True, check=True)
mine = [p for p in json.loads(listed.stdout) if p["distribution"] == dist]
assert mine and all(p["status"] != "broken" for p in mine), mine
print(dist, "alone:", ", ".join(f"{p['name']} {p['status']}" for p in mine))
"""


def _extras_modules(dist: Path) -> list[str]:
    """The top-level names the optional dependencies of ``dist`` install (distribution name
    as import name: psycopg)."""
    extras = _project(dist).get("optional-dependencies", {})
    names = {_requirement_name(req) for reqs in extras.values() for req in reqs}
    return sorted(name.replace("-", "_").lower() for name in names)


def install_into(session: nox.Session, python: str, *requirements: str) -> None:
    """Install ``requirements`` into the environment of ``python`` (a venv without pip of its
    own) with the session's installer: uv's when the session is uv's, else the session's pip."""
    if session.venv_backend == "uv":
        session.run("uv", "pip", "install", "-q", "--python", python, *requirements)
    else:
        session.run("python", "-m", "pip", "--python", python, "install", "-q", *requirements)


@nox.session
def isolation(session: nox.Session) -> None:
    """Install core plus ONE plugin (and the first-party plugins it declares it needs) into an
    empty venv, each in turn: it installs alone, every module of it and of its tests imports,
    and loopctl loads it.

    What this proves is what is installed, nothing else: a plugin that imports another one
    without declaring it, or an extra it treats as required (psycopg), fails here. Its tests
    are collected, so their imports are checked too, but not run again: they ran in every
    ``tests`` session, with all the plugins installed, as users install them (running them
    here too took more than half of this session's time). What is left unproved is code that
    runs only in a test and works only because another plugin is installed beside it."""
    for dist in distributions("plugins") + distributions("contrib"):
        venv = Path(session.create_tmp()) / f"iso-{dist.name}"
        shutil.rmtree(venv, ignore_errors=True)
        # without pip of its own (ensurepip cost seconds a venv): the session's pip installs
        session.run("python", "-m", "venv", "--without-pip", str(venv))
        py = str(venv / "bin" / "python")
        install_into(
            session, py,
            *wheels(session, "./core", f"./{dist.relative_to(ROOT)}", *local_requirements(dist)),
            *TEST_DEPS,
        )  # fmt: skip
        packages = sorted(p.parent.name for p in (dist / "src").glob("*/__init__.py"))
        env = {"LOOPCTL_REQUIRE_POSTGRES": ""}  # without the plugins' extras (psycopg)
        session.run(
            py, "-c", ISOLATION_CHECK, _project(dist)["name"], *packages,
            "--", *_extras_modules(dist),
            external=True, env=env,
        )  # fmt: skip
        session.run(
            py, "-m", "pytest", "-qq", "--collect-only", "-p", "no:cacheprovider",
            str(dist / "tests"),
            external=True, env=env,
        )  # fmt: skip
    # `loopctl plugins new` output, installed into a fresh venv with core, passes its tests
    session.install(*wheels(session, "./core"), *TEST_DEPS)
    session.run(
        "pytest", "-q", "-p", "no:cacheprovider", "-m", "venv", "tests/test_scaffold_install.py"
    )


@nox.session
def docs(session: nox.Session) -> None:
    """Build the documentation site with warnings as errors."""
    session.install("mkdocs>=1.6")  # no plugin of mkdocs': the site needs no loopctl installed
    session.run(
        "mkdocs", "build", "--strict", "--site-dir", str(Path(session.create_tmp()) / "site")
    )


@nox.session(default=False)
def bench(session: nox.Session) -> None:
    """Run every benchmark and print one table of figures (not run by CI). Core and the four
    first-party plugins only: the issues' figures are for those. ``-- --write-docs`` also puts
    the table in docs/benchmarks.md."""
    plugins = [f"./{p.relative_to(ROOT)}" for p in distributions("plugins")]
    # psycopg and pytest: the failure memory's Postgres figures start a throwaway server with
    # the context-errors tests' pg_testkit (they are printed as skipped without one)
    session.install(*wheels(session, "./core", *plugins), "msgspec", "pytest", *POSTGRES_DEPS)
    session.run("python", "benchmarks/run.py", *session.posargs)


#: The agent CLIs the end-to-end tests drive, pinned so a CLI release cannot break CI unseen.
E2E_NPM_PACKAGES = [
    "@anthropic-ai/claude-code@2.1.332",
    "@openai/codex@0.169.0",
    "@google/gemini-cli@0.61.0",
]
E2E_AIDER = "aider-chat==0.86.2"


def _install_efficacy_clis(session: nox.Session) -> Path:
    """Claude Code and Codex (pinned in E2E_NPM_PACKAGES) under the e2e cache, for the efficacy
    benchmark's contestants; returns the npm prefix."""
    cache = Path(os.environ.get("LOOPCTL_E2E_CACHE", os.path.expanduser("~/.cache/loopctl-e2e")))
    npm_prefix = cache / "npm"
    npm_prefix.mkdir(parents=True, exist_ok=True)
    clis = [
        p
        for p in E2E_NPM_PACKAGES
        if p.startswith(("@anthropic-ai/claude-code@", "@openai/codex@"))
    ]
    session.run(
        "npm", "install", "--prefix", str(npm_prefix), "--no-audit", "--no-fund",
        "--loglevel=error", *clis,
        external=True,
    )  # fmt: skip
    return npm_prefix


@nox.session(default=False)
def efficacy(session: nox.Session) -> None:
    """The efficacy benchmark (docs/efficacy.md): bare agent loops and loopctl, with and without
    the four first-party plugins, on the same scenarios through the real Claude Code and Codex
    CLIs and a reactive scripted model server, two runs at a time (about 13 minutes on 2
    cores). Runs the benchmark's own tests first; ``-- --json``, ``-- -s SCENARIO -c
    CONTESTANT``, ``-- -j 1`` go to benchmarks/efficacy/run.py."""
    npm_prefix = _install_efficacy_clis(session)
    plugins = [f"./{p.relative_to(ROOT)}" for p in distributions("plugins")]
    session.install(*wheels(session, "./core", *plugins), *TEST_DEPS)
    session.run("pytest", "-q", "-p", "no:cacheprovider", "benchmarks/efficacy/tests")
    session.run(
        "python", "benchmarks/efficacy/run.py", "--jobs", str(min(2, _cores())),
        *session.posargs,
        env={"LOOPCTL_E2E_NPM_PREFIX": str(npm_prefix)},
    )  # fmt: skip


@nox.session
def e2e(session: nox.Session) -> None:
    """Real agent CLIs (npm; aider from PyPI) against scripted model servers on 127.0.0.1."""
    cache = Path(os.environ.get("LOOPCTL_E2E_CACHE", os.path.expanduser("~/.cache/loopctl-e2e")))
    npm_prefix = cache / "npm"
    npm_prefix.mkdir(parents=True, exist_ok=True)
    session.run(
        "npm",
        "install",
        "--prefix",
        str(npm_prefix),
        "--no-audit",
        "--no-fund",
        "--loglevel=error",
        *E2E_NPM_PACKAGES,
        external=True,
    )
    aider_venv = cache / "aider-venv"
    aider = aider_venv / "bin" / "aider"
    if not aider.exists():
        session.run("python", "-m", "venv", str(aider_venv))
        session.run(
            str(aider_venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            E2E_AIDER,
            external=True,
        )
    session.install(
        *wheels(session, *all_distributions()), *TEST_DEPS, *PRICES_DEPS, *POSTGRES_DEPS
    )
    # one worker per core: each CLI start (node) is a second of CPU, the model servers wait
    session.run(
        "pytest",
        "-n",
        str(_cores()),
        "-m",
        "e2e",
        *test_paths(),
        *session.posargs,
        env={
            "LOOPCTL_E2E_NPM_PREFIX": str(npm_prefix),
            "LOOPCTL_E2E_AIDER": str(aider),
            "LOOPCTL_E2E_REQUIRE": "1",
        },
    )
    # the efficacy benchmark's own tests (its harness with stand-in CLIs, the scenario format),
    # then its smoke run (3 scenarios, 2 contestants, about 2 minutes): the harness works end
    # to end through the real Claude Code CLI (not the benchmark's targets)
    session.run("pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "benchmarks/efficacy/tests")
    session.run(
        "python", "benchmarks/efficacy/run.py", "--smoke",
        env={"LOOPCTL_E2E_NPM_PREFIX": str(npm_prefix)},
    )  # fmt: skip
