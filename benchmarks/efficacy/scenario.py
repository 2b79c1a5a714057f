"""The scenario format: one TOML file per scenario in ``scenarios/``.

A scenario is a small real project (``[files]``: path → content; it becomes a git repository with
one commit), the goal every contestant is given, the test command that decides success, a budget,
and the agent: a behaviour model of :mod:`loopctl.testing.behaviours` by name with its parameters,
and the model server's settings. Example::

    description = "A plain bug any loop fixes: add() subtracts."
    pattern = "control"
    goal = "Make the failing test in test_calc.py pass."
    test_cmd = "python -m pytest -q"          # the default

    [budget]
    iterations = 4
    tokens = 300_000
    wall_clock_s = 180

    [agent]
    behaviour = "fixer"
    context_window = 200_000                  # optional: requests over it get prompt-too-long
    compaction = "summary"                    # or "fails": the CLI's summary request is refused
    [agent.params]                            # the behaviour's own parameters
    ideas = [{ file = "calc.py", old = "return a - b", new = "return a + b" }]
    [[agent.faults]]                          # optional: faults that take over some requests
    kind = "api-outage"
    status = 429
    seconds = 20

    [files]
    "calc.py" = "def add(a, b):\\n    return a - b\\n"
    "test_calc.py" = "..."

``expect`` says what a good loop achieves: ``"pass"`` (the default: the tests pass on the final
tree) or ``"stop"`` (nothing can make them pass, such as a missing dependency or a revoked key: the
loop should stop by itself, before its iteration budget is used up).

``check_cmd`` (default: the test command) is what the harness runs on the final tree to decide
whether the tests really pass, where that differs from what the loop runs (a flaky test's
scenario checks with the flakiness off).

``[earlier]`` pre-seeds an earlier run: its ``files`` are a sibling project with the same failure,
and before the scored run the same contestant runs there, in the same HOME (so whatever memory
the contestant keeps across runs is there), with a new model server and behaviour. Only the
second run is scored.

``clis`` names the agent CLIs the scenario runs with (default ``["claude"]``; ``"codex"`` too
where the scenario means the same through Codex): a contestant of another CLI skips it.

``agent.params.test_cmd`` defaults to the scenario's ``test_cmd``. Every key is checked: an unknown
key, a wrong type, a value out of range, a file path that leaves the project, or a behaviour
parameter the model does not take is a :class:`loopctl.ConfigError` naming the file and the key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import attrs

from loopctl.config.errors import InvalidFields
from loopctl.config.structuring import structure
from loopctl.configfile import ConfigError, read_toml
from loopctl.testing.behaviours import BEHAVIOURS, WithFaults, make_behaviour, make_fault

#: Where the benchmark's scenarios live.
SCENARIOS = Path(__file__).parent / "scenarios"
DEFAULT_TEST_CMD = "python -m pytest -q"
#: The most a scenario may take: the whole benchmark has to fit in 15 minutes.
MAX_WALL_CLOCK_S = 600.0
MAX_ITERATIONS = 50
_NAME = re.compile(r"[a-z0-9][a-z0-9-]*")
#: The agent CLIs a scenario can run with.
CLIS = ("claude", "codex")


def _problem(name: str, message: str) -> InvalidFields:
    return InvalidFields([((name,), message)])


@attrs.frozen
class Budget:
    """What a contestant may spend; over any of it, the run is scored failed."""

    iterations: int
    tokens: int
    wall_clock_s: float

    def __attrs_post_init__(self) -> None:
        if not 1 <= self.iterations <= MAX_ITERATIONS:
            raise _problem("iterations", f"must be 1 to {MAX_ITERATIONS}, got {self.iterations}")
        if self.tokens < 1_000:
            raise _problem("tokens", f"must be at least 1000, got {self.tokens}")
        if not 0 < self.wall_clock_s <= MAX_WALL_CLOCK_S:
            raise _problem("wall_clock_s", f"must be more than 0 and at most {MAX_WALL_CLOCK_S:g}")


@attrs.frozen
class AgentSpec:
    """The behaviour model by name, its parameters, and the model server's settings."""

    behaviour: str
    params: dict[str, Any] = attrs.Factory(dict)
    faults: list[dict[str, Any]] = attrs.Factory(list)
    context_window: int | None = None
    #: How the server answers the CLI's compaction (conversation summary) requests: with a
    #: summary that keeps only the task (``summary``), or with prompt-too-long (``fails``: the
    #: history is too big to summarise, so the session cannot go on).
    compaction: Literal["summary", "fails"] = "summary"

    def __attrs_post_init__(self) -> None:
        if self.behaviour not in BEHAVIOURS:
            known = ", ".join(sorted(BEHAVIOURS))
            raise _problem("behaviour", f"unknown behaviour {self.behaviour!r} (known: {known})")
        if self.context_window is not None and self.context_window < 1_000:
            raise _problem("context_window", f"must be at least 1000, got {self.context_window}")


@attrs.frozen
class Earlier:
    """An earlier run before the scored one: a sibling project with the same failure."""

    files: dict[str, str]

    def __attrs_post_init__(self) -> None:
        _check_files(self.files, "files")


@attrs.frozen
class ScenarioFile:
    """The keys of a scenario file (see the module's docstring)."""

    description: str
    pattern: str
    goal: str
    budget: Budget
    agent: AgentSpec
    files: dict[str, str]
    test_cmd: str = DEFAULT_TEST_CMD
    expect: Literal["pass", "stop"] = "pass"
    check_cmd: str | None = None
    earlier: Earlier | None = None
    clis: list[str] = attrs.Factory(lambda: ["claude"])

    def __attrs_post_init__(self) -> None:
        if not self.clis:
            raise _problem("clis", f"must name at least one of {', '.join(CLIS)}")
        unknown = [cli for cli in self.clis if cli not in CLIS]
        if unknown:
            raise _problem("clis", f"unknown CLI {unknown[0]!r} (known: {', '.join(CLIS)})")
        if not self.goal.strip():
            raise _problem("goal", "must not be empty")
        if not self.test_cmd.strip():
            raise _problem("test_cmd", "must not be empty")
        if self.check_cmd is not None and not self.check_cmd.strip():
            raise _problem("check_cmd", "must not be empty")
        _check_files(self.files, "files")

    @property
    def final_check(self) -> str:
        """The command that decides whether the tests really pass on the final tree."""
        return self.check_cmd or self.test_cmd


def _check_files(files: dict[str, str], key: str) -> None:
    if not files:
        raise _problem(key, "must hold at least one file")
    for relative in files:
        problem = _bad_path(relative)
        if problem:
            raise InvalidFields([((key, relative), problem)])


def _bad_path(relative: str) -> str:
    """What is wrong with a project file's path ("" when nothing is)."""
    path = PurePosixPath(relative)
    if not relative.strip() or relative != relative.strip():
        return "a file path must not be empty or start or end with spaces"
    if path.is_absolute() or ".." in path.parts or "\\" in relative:
        return "a file path must stay inside the project (relative, no '..')"
    if path.parts[0] in (".git", ".loopctl"):
        return f"a file path must not be inside {path.parts[0]}/"
    return ""


@attrs.frozen
class Scenario:
    """A loaded scenario: its file's keys, its name (the file's stem) and where it came from."""

    name: str
    path: Path
    spec: ScenarioFile

    def behaviour(self) -> Any:
        """A new behaviour model for one contestant's server (models may keep state)."""
        params = dict(self.spec.agent.params)
        cls = BEHAVIOURS[self.spec.agent.behaviour]
        if "test_cmd" in attrs.fields_dict(cls):
            params.setdefault("test_cmd", self.spec.test_cmd)
        source = str(self.path)
        made = make_behaviour(
            self.spec.agent.behaviour, params, source=source, prefix="agent.params"
        )
        faults = [
            make_fault(fault, source=source, prefix=f"agent.faults[{index}]")
            for index, fault in enumerate(self.spec.agent.faults)
        ]
        return WithFaults(made, faults) if faults else made

    def write_project(self, directory: Path, *, earlier: bool = False) -> None:
        """Write the project's files (the earlier run's, with ``earlier``) under ``directory``
        (which must exist)."""
        files = self.spec.earlier.files if earlier and self.spec.earlier else self.spec.files
        for relative, content in files.items():
            target = directory / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, encoding="utf-8")


def parse(data: Mapping[str, Any], *, name: str, source: Path) -> Scenario:
    """The scenario in ``data`` (a parsed TOML document); bad input raises ConfigError."""
    if not _NAME.fullmatch(name):
        raise ConfigError(
            f"{source}: the file name must be lower-case letters, digits and '-' ({name!r})"
        )
    spec = structure(dict(data), ScenarioFile, source=str(source), prefix="")
    scenario = Scenario(name=name, path=source, spec=spec)
    scenario.behaviour()  # the behaviour's parameters are checked now, not mid-run
    return scenario


def load(path: Path) -> Scenario:
    """The scenario in the TOML file ``path``."""
    return parse(read_toml(path, str(path)), name=path.stem, source=path)


def load_all(directory: Path = SCENARIOS, names: list[str] | None = None) -> list[Scenario]:
    """Every scenario in ``directory`` (by name), or those of ``names``, in name order; a name
    with no file is an error listing the scenarios there are."""
    found = {path.stem: path for path in sorted(directory.glob("*.toml"))}
    wanted = names or sorted(found)
    missing = [name for name in wanted if name not in found]
    if missing:
        raise ConfigError(
            f"no scenario named {', '.join(map(repr, missing))} in {directory} "
            f"(there are: {', '.join(sorted(found)) or 'none'})"
        )
    return [load(found[name]) for name in wanted]
