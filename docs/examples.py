"""Real command output for the docs: every example is produced by running loopctl.

A page embeds an example between two markers; the text after ``example:`` names an entry of
:data:`EXAMPLES`::

    <!-- example: loopctl plugins list -->

    ```text
    $ loopctl plugins list
    builtin             builtin   loopctl 0.1.0
    …
    ```

    <!-- /example -->

``python docs/generate.py`` runs every example the pages name, each in a fresh temporary
project, and rewrites the block between the markers; ``--check`` fails when a block differs
from what the code prints now, so an example cannot go stale.

What makes the output the same on every machine and every run:

* a clean environment: no ``LOOPCTL_*`` variable of the caller, ``HOME`` and the failure memory
  in the temporary directory, no colour, and only the four first-party plugins enabled
  (``LOOPCTL_PLUGINS``, unless an example names others), whatever else is installed;
* masks for what differs between runs and machines: clock times, durations, the temporary
  directory (shown as ``/home/you``), the Python interpreter (``python3``), site-packages,
  random run and session ids, and prompt sizes (a prompt holds those paths);
* ``plugins list`` shows only the plugins the docs talk about (other installed plugins are
  listed too, as disabled).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: The plugins every example runs with, whatever else is installed.
FIRST_PARTY = ("context-monitor", "failure-classifier", "context-errors", "goal-guard")
#: The rows ``plugins list`` examples keep.
SHOWN_PLUGINS = ("builtin", *FIRST_PARTY, "house-rules")
#: Where the temporary directory appears in the docs.
SHOWN_HOME = "/home/you"
TIMEOUT_S = 120

MARKER = re.compile(
    r"(?P<open><!-- example: (?P<key>[^\n]*?) -->\n)(?P<body>.*?)(?P<close><!-- /example -->)",
    re.DOTALL,
)


class ExampleError(Exception):
    """An example cannot be produced (unknown name, unexpected exit code, a timeout)."""


@attrs.frozen
class Example:
    """One command run in one prepared project."""

    #: Shown after ``$`` and run as written: leading ``NAME=value`` words set variables.
    command: str
    #: The project it runs in: a key of :data:`PROJECTS`.
    project: str = "empty"
    #: Variables set (or, with None, removed) without showing them, on top of the base ones;
    #: ``{home}`` and ``{project}`` in a value are the temporary HOME and the project.
    hidden_env: Mapping[str, str | None] = attrs.field(factory=dict)
    #: The exit code the command must end with (anything else is an error, not an example).
    exit_code: int = 0
    #: Nothing on PATH: no agent CLI is found, whatever the machine has installed.
    empty_path: bool = False
    #: Keep only these plugins' rows of a ``plugins list`` output.
    keep_plugins: tuple[str, ...] | None = None


# --- the projects ------------------------------------------------------------------------------

TEAM_CONFIG = """\
# loopctl.toml: checked in, so every developer and CI run the loop the same way.
agent = "claude"
test_cmd = "pytest -q"
required_plugins = ["context-monitor>=0.1", "failure-classifier>=0.1"]

[limits]
max_iterations = 30
wall_clock_s = 7200

[plugins]
disable = ["goal-guard"]

[plugins.context-monitor]
warn_threshold = 0.6

[plugins.failure-classifier]
rerun_failed_tests = true
"""

TYPO_CONFIG = """\
test_cmd = "pytest -q"

[limits]
max_iteration = 30
"""

TESTS_LOG = """\
============================= test session starts ==============================
collected 0 items / 1 error

==================================== ERRORS ====================================
____________________ ERROR collecting tests/test_report.py _____________________
ImportError while importing test module '/home/you/shop/tests/test_report.py'.
Traceback:
tests/test_report.py:3: in <module>
    from shop.report import render
shop/report.py:5: in <module>
    import jinja2
E   ModuleNotFoundError: No module named 'jinja2'
=========================== short test summary info ============================
ERROR tests/test_report.py
!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!
=============================== 1 error in 0.12s ===============================
"""

#: A real Claude Code transcript (recorded against the scripted model server).
CLAUDE_TRANSCRIPT = ROOT / "core/tests/data/transcripts/claude/prompt_too_long.jsonl"

#: The custom-classifier guide, whose plugin the classifier examples run.
CLASSIFIER_GUIDE = DOCS / "guides" / "custom-classifier.md"
GUIDE_PLUGIN = "loopctl-lint-classifier"
LINT_LOG = """\
app.py:1:8: F401 [*] `os` imported but unused
app.py:4:1: E302 Expected 2 blank lines, found 1
Found 2 errors.
[*] 1 fixable with the `--fix` option.
"""
LINTER = """\
import sys
if "import os" in open("app.py").read():
    print("app.py:1:8: F401 [*] `os` imported but unused")
    print("Found 1 error.")
    sys.exit(1)
"""

#: The agent-adapter guide, whose adapter (and fake CLI) the adapter examples run.
ADAPTER_GUIDE = DOCS / "guides" / "agent-adapter.md"
GUIDE_ADAPTER = "loopctl-patchbot"
CALC_BUGGY = "def add(a, b):\n    return a - b\n"
CALC_TEST = """\
import unittest

from calc import add


class CalcTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(1, 2), 3)
"""

BROKEN_PLUGIN_MODULE = "from loopctl_house_rules.rules import RULES  # rules.py was not packaged\n"


def _git_init(path: Path, *, commit: bool = False) -> None:
    path.mkdir(parents=True, exist_ok=True)
    git = ["git", "-c", "user.name=you", "-c", "user.email=you@example.invalid"]
    subprocess.run([*git, "init", "-q"], cwd=path, check=True, capture_output=True)
    if commit:
        subprocess.run([*git, "add", "-A"], cwd=path, check=True, capture_output=True)
        subprocess.run([*git, "commit", "-qm", "start"], cwd=path, check=True, capture_output=True)


def guide_files(page: Path = CLASSIFIER_GUIDE, root: str = GUIDE_PLUGIN) -> dict[str, str]:
    """The files a guide spells out in full, by path inside ``root``: its code blocks whose
    first line is a comment naming the file (``# loopctl-lint-classifier/src/…/plugin.py``)."""
    text = page.read_text(encoding="utf-8")
    found = {}
    for match in re.finditer(r"```[a-z]*\n# (\S+)\n(.*?)```", text, re.DOTALL):
        path = match[1]
        if path.startswith(root + "/"):
            found[path[len(root) + 1 :]] = f"# {path}\n{match[2]}"
    return found


def install_on_path(
    site: Path,
    distribution: str,
    entry_point: str,
    files: Mapping[str, str],
    version: str = "0.1.0",
) -> None:
    """Make ``site`` (for PYTHONPATH) hold a plugin distribution: its files and the metadata
    that declares its ``loopctl.plugins`` entry point, as pip would install it."""
    name = distribution.replace("-", "_")
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(f"[loopctl.plugins]\n{entry_point}\n", encoding="utf-8")
    for relative, text in files.items():
        target = site / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def _empty(path: Path, run: Callable[..., str]) -> None:
    _git_init(path)


def _team(path: Path, run: Callable[..., str]) -> None:
    _git_init(path)
    (path / "loopctl.toml").write_text(TEAM_CONFIG, encoding="utf-8")


def _team_typo(path: Path, run: Callable[..., str]) -> None:
    _git_init(path)
    typo = TEAM_CONFIG.replace("warn_threshold", "warn_treshold")
    (path / "loopctl.toml").write_text(typo, encoding="utf-8")


def _typo(path: Path, run: Callable[..., str]) -> None:
    _git_init(path)
    (path / "loopctl.toml").write_text(TYPO_CONFIG, encoding="utf-8")


def _logs(path: Path, run: Callable[..., str]) -> None:
    _git_init(path)
    (path / "tests.log").write_text(TESTS_LOG, encoding="utf-8")
    logs = path / ".loopctl" / "logs"
    logs.mkdir(parents=True)
    shutil.copyfile(CLAUDE_TRANSCRIPT, logs / "iteration-0007.agent.jsonl")


def _scaffold(path: Path, run: Callable[..., str]) -> None:
    path.mkdir(parents=True)


def _lint_demo(path: Path, run: Callable[..., str]) -> None:
    """A project whose test command is a linter, with the guide's classifier installed."""
    package = GUIDE_PLUGIN.replace("-", "_")
    files = {
        relative.removeprefix("src/"): text
        for relative, text in guide_files().items()
        if relative.startswith(f"src/{package}/")
    }
    if f"{package}/plugin.py" not in files:
        raise ExampleError(f"{CLASSIFIER_GUIDE.name} no longer spells out {package}/plugin.py")
    files[f"{package}/__init__.py"] = ""
    install_on_path(
        path.parent / "lint-classifier-site",
        GUIDE_PLUGIN,
        f"lint-classifier = {package}.plugin",
        files,
    )
    path.mkdir()
    (path / "app.py").write_text("import os\n", encoding="utf-8")
    (path / "lint.py").write_text(LINTER, encoding="utf-8")
    (path / ".gitignore").write_text(".loopctl/\nlint.log\n", encoding="utf-8")
    _git_init(path, commit=True)
    (path / "lint.log").write_text(LINT_LOG, encoding="utf-8")


def _patchbot(path: Path, run: Callable[..., str]) -> None:
    """A project with a bug, and the guide's adapter installed with its fake CLI as the agent."""
    files = guide_files(ADAPTER_GUIDE, GUIDE_ADAPTER)
    package = GUIDE_ADAPTER.replace("-", "_")
    wanted = [f"src/{package}/plugin.py", f"src/{package}/adapter.py", "tests/fake_patchbot.py"]
    missing = [name for name in wanted if name not in files]
    if missing:
        raise ExampleError(f"{ADAPTER_GUIDE.name} no longer spells out {', '.join(missing)}")
    site = path.parent / f"{path.name}-site"
    code = {name.removeprefix("src/"): files[name] for name in wanted[:2]}
    code[f"{package}/__init__.py"] = ""
    install_on_path(site, GUIDE_ADAPTER, f"patchbot = {package}.plugin", code)
    fake = site / "fake_patchbot.py"
    fake.write_text(files["tests/fake_patchbot.py"], encoding="utf-8")
    path.mkdir()
    (path / "calc.py").write_text(CALC_BUGGY, encoding="utf-8")
    (path / "test_calc.py").write_text(CALC_TEST, encoding="utf-8")
    (path / ".gitignore").write_text(".loopctl/\n__pycache__/\n", encoding="utf-8")
    command = shlex.join([sys.executable, str(fake)])
    (path / "loopctl.toml").write_text(
        f"[agents.patchbot]\ncommand = {json.dumps(command)}\n", encoding="utf-8"
    )
    _git_init(path, commit=True)


def _patchbot_ran(path: Path, run: Callable[..., str]) -> None:
    """The same, after a loop ran: its transcript is in .loopctl/logs/."""
    _patchbot(path, run)
    run(EXAMPLES["adapter: run"].command, cwd=path, hidden_env=PATCHBOT_ENV)


def _demo(path: Path, run: Callable[..., str]) -> None:
    """A finished demo loop, kept: its state directory is what ``status`` reads."""
    run(f"loopctl demo --dir {shlex.quote(str(path))}", cwd=path.parent)


def _broken_plugin(path: Path, run: Callable[..., str]) -> None:
    """An installed plugin that fails to import: a distribution on PYTHONPATH whose module
    imports a file its author forgot to package."""
    _git_init(path)
    files = {
        "loopctl_house_rules/__init__.py": "",
        "loopctl_house_rules/plugin.py": BROKEN_PLUGIN_MODULE,
    }
    install_on_path(
        path.parent / "house-rules-site",
        "loopctl-house-rules",
        "house-rules = loopctl_house_rules.plugin",
        files,
        version="0.3.0",
    )


#: name → setup(path, run); each project is made once per generation, at ``HOME/name``.
PROJECTS: dict[str, Callable[[Path, Callable[..., str]], None]] = {
    "empty": _empty,
    "demo": _demo,
    "shop": _team,
    "shop-typo": _team_typo,
    "typo": _typo,
    "logs": _logs,
    "broken": _broken_plugin,
    "scaffold": _scaffold,
    "lint-demo": _lint_demo,
    "patchbot": _patchbot,
    "patchbot-ran": _patchbot_ran,
}

# --- the examples ------------------------------------------------------------------------------

#: The guide's adapter on the path, and no other plugin.
PATCHBOT_ENV = {"PYTHONPATH": "{project}-site", "LOOPCTL_PLUGINS": "patchbot"}
#: The guide's classifier on the path, with the one plugin it needs.
LINT_ENV = {
    "PYTHONPATH": "{home}/lint-classifier-site",
    "LOOPCTL_PLUGINS": "failure-classifier,lint-classifier",
}

EXAMPLES: dict[str, Example] = {
    "loopctl demo": Example("loopctl demo"),
    "loopctl status": Example("loopctl status", project="demo"),
    "loopctl plugins list": Example("loopctl plugins list", keep_plugins=SHOWN_PLUGINS),
    "loopctl agents list": Example("loopctl agents list", empty_path=True),
    "team: loopctl config show": Example(
        "LOOPCTL_LIMITS__MAX_ITERATIONS=50 loopctl config show",
        project="shop",
        hidden_env={"LOOPCTL_PLUGINS": None},
    ),
    "team: loopctl plugins list": Example(
        "loopctl plugins list", project="shop", keep_plugins=SHOWN_PLUGINS
    ),
    "team: required plugin disabled": Example(
        'LOOPCTL_PLUGINS=failure-classifier,context-errors loopctl run "make the tests pass"',
        project="shop",
        exit_code=2,
    ),
    "team: required plugin version": Example(
        'LOOPCTL_REQUIRED_PLUGINS="context-monitor>=1.0" loopctl run "make the tests pass"',
        project="shop",
        exit_code=2,
    ),
    "team: plugin config typo": Example(
        'loopctl run "make the tests pass"', project="shop-typo", exit_code=2
    ),
    "loopctl agents parse": Example(
        "loopctl agents parse claude .loopctl/logs/iteration-0007.agent.jsonl", project="logs"
    ),
    "loopctl classify": Example("loopctl classify --log tests.log", project="logs"),
    "loopctl errors report": Example("loopctl errors report tests.log", project="logs"),
    "broken plugin: loopctl plugins list": Example(
        "loopctl plugins list",
        project="broken",
        hidden_env={
            "PYTHONPATH": "{home}/house-rules-site",
            "LOOPCTL_PLUGINS": ",".join([*FIRST_PARTY, "house-rules"]),
        },
        keep_plugins=SHOWN_PLUGINS,
    ),
    "classifier: plugins new": Example(
        "loopctl plugins new lint-classifier --classifier", project="scaffold"
    ),
    "classifier: classify": Example(
        "loopctl classify --log lint.log", project="lint-demo", hidden_env=LINT_ENV
    ),
    "classifier: run": Example(
        'loopctl run "keep the code clean" --agent-cmd true --test-cmd "python3 lint.py" '
        "--max-iterations 1",
        project="lint-demo",
        hidden_env=LINT_ENV,
        exit_code=10,
    ),
    "adapter: run": Example(
        'loopctl run "make the tests pass" --agent patchbot --test-cmd "python3 -m unittest -q"',
        project="patchbot",
        hidden_env=PATCHBOT_ENV,
    ),
    "adapter: agents parse": Example(
        "loopctl agents parse patchbot .loopctl/logs/iteration-0001.agent.jsonl",
        project="patchbot-ran",
        hidden_env=PATCHBOT_ENV,
    ),
    "config typo": Example("loopctl config show", project="typo", exit_code=2),
    "no test command": Example('loopctl run "make the tests pass" --agent claude', exit_code=2),
    "test command not found": Example(
        'loopctl run "make the tests pass" --agent claude --test-cmd "pytset -q"', exit_code=2
    ),
    "no agent": Example(
        'loopctl run "make the tests pass" --test-cmd "pytest -q"', empty_path=True, exit_code=2
    ),
}


# --- running -----------------------------------------------------------------------------------


def base_env(home: Path) -> dict[str, str]:
    """The environment every example starts from (see the module docstring)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPCTL_")}
    for name in ("PYTHONPATH", "VIRTUAL_ENV", "FORCE_COLOR", "CLICOLOR_FORCE"):
        env.pop(name, None)
    env.update(
        {
            "HOME": str(home),
            "XDG_DATA_HOME": str(home / ".local" / "share"),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_CACHE_HOME": str(home / ".cache"),
            "TMPDIR": str(home / "tmp"),
            "NO_COLOR": "1",
            "TERM": "dumb",
            "COLUMNS": "100",
            "PYTHONIOENCODING": "utf-8",
            "LOOPCTL_PLUGINS": ",".join(FIRST_PARTY),
            "GIT_AUTHOR_NAME": "you",
            "GIT_AUTHOR_EMAIL": "you@example.invalid",
            "GIT_COMMITTER_NAME": "you",
            "GIT_COMMITTER_EMAIL": "you@example.invalid",
            "GIT_CONFIG_NOSYSTEM": "1",
        }
    )
    return env


class Runner:
    """Runs examples in one temporary HOME; projects are made on first use."""

    def __init__(self, home: Path) -> None:
        self.home = home
        for name in ("tmp", "memory"):
            (home / name).mkdir(parents=True, exist_ok=True)
        self._memories = itertools.count(1)

    def run(
        self,
        command: str,
        *,
        cwd: Path,
        hidden_env: Mapping[str, str | None] | None = None,
        empty_path: bool = False,
        exit_code: int = 0,
    ) -> str:
        """Run ``command`` (``NAME=value … loopctl …``); return stdout and stderr, merged."""
        words = shlex.split(command)
        env = base_env(self.home)
        memory = self.home / "memory" / f"{next(self._memories)}.sqlite3"
        env["LOOPCTL_FAILURE_MEMORY"] = str(memory)  # its own: runs never see each other's
        for name, value in (hidden_env or {}).items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value.format(home=self.home, project=cwd)
        while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
            name, _, value = words.pop(0).partition("=")
            env[name] = value
        if not words or words[0] != "loopctl":
            raise ExampleError(f"{command!r}: an example runs `loopctl …`")
        if empty_path:
            empty = self.home / "empty-bin"
            empty.mkdir(exist_ok=True)
            env["PATH"] = str(empty)
        try:
            done = subprocess.run(
                [sys.executable, "-m", "loopctl", *words[1:]],
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                timeout=TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise ExampleError(f"{command!r} took more than {TIMEOUT_S} s") from None
        output = done.stdout.decode("utf-8", errors="replace")
        if done.returncode != exit_code:
            raise ExampleError(
                f"{command!r} exited with {done.returncode}, expected {exit_code}:\n{output}"
            )
        return output

    def prepare(self, project: str) -> Path:
        path = self.home / project
        if not path.exists():
            PROJECTS[project](path, self.run)
        return path

    def example(self, example: Example) -> str:
        path = self.home / example.project
        output = self.run(
            example.command,
            cwd=path,
            hidden_env=example.hidden_env,
            empty_path=example.empty_path,
            exit_code=example.exit_code,
        )
        if example.keep_plugins is not None:
            output = keep_plugin_rows(output, example.keep_plugins)
        return mask(output, self.home)


def produce(keys: Iterable[str]) -> dict[str, str]:
    """The masked output of each named example, from fresh runs (projects in parallel)."""
    wanted = sorted(set(keys))
    unknown = [key for key in wanted if key not in EXAMPLES]
    if unknown:
        raise ExampleError(
            f"no example named {', '.join(map(repr, unknown))}; "
            f"the examples are: {', '.join(sorted(EXAMPLES))} (docs/examples.py)"
        )
    with tempfile.TemporaryDirectory(prefix="loopctl-docs-") as tmp:
        runner = Runner(Path(tmp).resolve())
        projects = sorted({EXAMPLES[key].project for key in wanted})
        with ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(runner.prepare, projects))
            outputs = list(pool.map(lambda key: runner.example(EXAMPLES[key]), wanted))
    return dict(zip(wanted, outputs, strict=True))


# --- making output deterministic ---------------------------------------------------------------


def keep_plugin_rows(output: str, names: Iterable[str]) -> str:
    """``plugins list`` text with only the rows of ``names`` (a row is a name line and its
    indented detail lines); other lines (warnings, notes) are kept."""
    keep = set(names)
    lines: list[str] = []
    keeping = True
    for line in output.splitlines():
        if line[:1].isspace():
            if keeping:
                lines.append(line)
            continue
        first = line.split(" ", 1)[0]
        is_row = bool(re.fullmatch(r"[a-z0-9][a-z0-9-]*", first)) and "  " in line
        keeping = not is_row or first in keep
        if keeping:
            lines.append(line)
    return "\n".join(lines) + "\n"


def _path_forms(path: str) -> list[str]:
    forms = {path, os.path.realpath(path)}
    return sorted((f for f in forms if f), key=len, reverse=True)


def mask(output: str, home: Path) -> str:
    """Replace what differs between runs and machines (see the module docstring)."""
    text = output
    for form in _path_forms(str(home)):
        text = re.sub(re.escape(form) + r"/tmp/(loopctl-demo-)\w+", r"/tmp/\1XXXXXXXX", text)
        text = text.replace(form, SHOWN_HOME)
    for form in _path_forms(sys.executable):
        text = text.replace(form, "python3")
    for key in ("purelib", "platlib"):
        for form in _path_forms(sysconfig.get_paths()[key]):
            text = text.replace(form, "site-packages")
    text = re.sub(r"\((?:/[^()\n]*/)?site-packages\)", "(site-packages)", text)
    text = re.sub(r"\[\d\d:\d\d:\d\d\]", "[hh:mm:ss]", text)
    text = re.sub(r"\b\d+\.\d+ s\b", "#.# s", text)
    text = re.sub(r"\bduration_s=\d+(?:\.\d+)?", "duration_s=#.#", text)
    text = re.sub(r"\bprompt( size:)? [\d,]+ chars", r"prompt\1 #,### chars", text)
    text = re.sub(r"\b[\d,]+-char briefing", "#,###-char briefing", text)
    text = re.sub(r"\bbriefed in [\d,]+ chars", "briefed in #,### chars", text)
    text = re.sub(
        r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b",
        "00000000-0000-0000-0000-000000000000",
        text,
    )
    text = re.sub(r"\bsuggestion [0-9a-f]{8}-", "suggestion xxxxxxxx-", text)
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


# --- the pages ---------------------------------------------------------------------------------


def render_block(key: str, output: str) -> str:
    """What goes between the markers of example ``key``."""
    return f"\n```text\n$ {EXAMPLES[key].command}\n{output}\n```\n\n"


def example_keys(text: str) -> list[str]:
    """The examples a page names, in order."""
    return [match["key"].strip() for match in MARKER.finditer(text)]


def fill(text: str, outputs: Mapping[str, str]) -> str:
    """``text`` with every example block replaced by its output; the rest is untouched."""

    def replace(match: re.Match[str]) -> str:
        key = match["key"].strip()
        return match["open"] + render_block(key, outputs[key]) + match["close"]

    return MARKER.sub(replace, text)


def pages() -> list[Path]:
    """The hand-written pages (generated reference pages hold no examples)."""
    return sorted(p for p in DOCS.rglob("*.md") if "reference" not in p.relative_to(DOCS).parts)


def update(check: bool, pages_to_fill: Iterable[Path] | None = None) -> list[str]:
    """Fill the examples of every page (or of ``pages_to_fill``), or with ``check`` only compare;
    return the stale pages as ``page: example, …``."""
    texts = {page: page.read_text(encoding="utf-8") for page in (pages_to_fill or pages())}
    keys = [key for text in texts.values() for key in example_keys(text)]
    if not keys:
        return []
    outputs = produce(keys)
    stale = []
    for page, text in texts.items():
        new = fill(text, outputs)
        if new == text:
            continue
        old_blocks = {m["key"].strip(): m["body"] for m in MARKER.finditer(text)}
        changed = [
            key
            for key in example_keys(text)
            if old_blocks.get(key) != render_block(key, outputs[key])
        ]
        shown = page.relative_to(DOCS) if page.is_relative_to(DOCS) else page
        stale.append(f"{shown}: {', '.join(changed)}")
        if not check:
            page.write_text(new, encoding="utf-8")
    return stale
