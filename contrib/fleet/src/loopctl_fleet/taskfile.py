"""``tasks.toml``: the tasks a ``loopctl fleet submit`` hands to the fleet, checked whole.

```toml
[defaults]                     # any task key but id/goal; loopctl.toml keys merge under each task
repo = "git@example.com:org/app.git"
test_cmd = "pytest -q"
[defaults.limits]
max_iterations = 15

[[task]]
id = "issue-1234"              # optional: made from the goal when left out
base = "main"                  # branch, tag or commit; default: the repository's HEAD
goal = "Fix #1234: ..."        # or goal_file = "issues/1234.md" (read now; the text travels)
[task.limits]
max_iterations = 10
[task.fleet.retry.agent_crash]
max_attempts = 2
```

A task travels in Temporal's workflow history, which the server keeps and its Web UI shows, so
nothing that looks like a secret may be in it: a value the redactor would mask, or credentials
in a repository URL, rejects the file. Secrets come from the worker's environment.

Every problem in the file is found before anything is submitted: :class:`TaskFileError` lists
each with its key path (``tasks.toml: task[3].limits.max_iteration: unknown key …``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from loopctl_fleet.classes import FailureClass, RetryPolicy

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

#: A task id: it names the workflow and the result branch ``loopctl/<id>``.
ID_PATTERN = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")
#: Keys of a task that are the fleet's own; every other key is a loopctl.toml key.
TASK_KEYS = ("id", "repo", "base", "goal", "goal_file", "fleet")
FLEET_KEYS = ("pr", "retry", "land", "land_mode", "land_attempts", "delete_branch")
RETRY_KEYS = tuple(f.name for f in dataclasses.fields(RetryPolicy))
DEFAULT_BASE = "HEAD"
MAX_GOAL_BYTES = 64 * 1024


class TaskFileError(ValueError):
    """The task file (or ``submit``'s flags) cannot be submitted: one line per problem, each
    already redacted (its file name, key path and message each on its own: see
    :func:`_redacted_line`), so it is printed as it is."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclasses.dataclass(frozen=True)
class LandOptions:
    """How a result lands on its base (``[task.fleet] land_*``, or ``fleet land``'s flags)."""

    #: ``rebase`` (linear history) or ``merge`` (a merge commit).
    mode: str = "rebase"
    #: Follow-up tasks an agent gets for a conflict or red tests before the result ends so.
    attempts: int = 2
    #: Delete the result branch once landed.
    delete_branch: bool = False


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """One task as it travels to a worker: plain data (a workflow input), no secret in it."""

    id: str
    #: A URL git can clone, or an absolute path on the workers' machines.
    repo: str
    base: str
    goal: str
    #: loopctl.toml keys for the task's loop (the defaults' under the task's own).
    settings: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: Per failure class (its name), how often and how soon the task is tried again.
    retry: dict[str, RetryPolicy] = dataclasses.field(default_factory=dict)
    #: Open a GitHub pull request of the result branch (:mod:`loopctl_fleet.pullrequest`).
    pr: bool = False
    #: Land the result on its base branch once complete (:mod:`loopctl_fleet.landing`).
    land: LandOptions | None = None

    @property
    def branch(self) -> str:
        """The branch the task's result is pushed to."""
        return f"loopctl/{self.id}"

    def digest(self) -> str:
        """A short hash of everything the task is, to tell a repeated submit from a new task
        that reuses an id."""
        import json

        text = json.dumps(dataclasses.asdict(self), sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def read_task_file(path: Path, fleet_defaults: Mapping[str, Any] | None = None) -> list[TaskSpec]:
    """Every task in ``path``, or :class:`TaskFileError` naming each problem;
    ``fleet_defaults``: ``[task.fleet]`` keys for every task that does not set them."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise TaskFileError([f"{path}: cannot read it: {exc.strerror or exc}"]) from None
    except UnicodeDecodeError:
        raise TaskFileError([f"{path}: not UTF-8 text"]) from None
    except tomllib.TOMLDecodeError as exc:
        raise TaskFileError([f"{path}: not valid TOML: {exc}"]) from None
    return tasks_from_data(
        data, name=path.name, base_dir=path.parent, fleet_defaults=fleet_defaults
    )


def tasks_from_data(
    data: Mapping[str, Any],
    *,
    name: str,
    base_dir: Path,
    fleet_defaults: Mapping[str, Any] | None = None,
) -> list[TaskSpec]:
    """The tasks in parsed task-file ``data``; ``name`` labels messages, ``base_dir`` is where
    relative paths (a repository, a goal file) are read from."""
    reader = _Reader(name, base_dir)
    defaults = reader.table(data.get("defaults", {}), "defaults")
    if fleet_defaults:
        defaults = deep_merge({"fleet": dict(fleet_defaults)}, defaults)
    unknown = sorted(set(data) - {"defaults", "task"})
    for key in unknown:
        reader.problem(key, "unknown key (a task file has [defaults] and [[task]] tables)")
    for key in ("id", "goal", "goal_file"):
        if key in defaults:
            reader.problem(f"defaults.{key}", "belongs in each [[task]], not in [defaults]")
    raw_tasks = data.get("task", [])
    if not isinstance(raw_tasks, list) or not raw_tasks:
        reader.problem("task", "no [[task]] table: nothing to submit")
        raw_tasks = []
    tasks = [reader.task(defaults, raw, f"task[{i}]") for i, raw in enumerate(raw_tasks)]
    reader.check_ids(tasks)
    reader.raise_problems()
    return [task for task in tasks if task is not None]


class _Reader:
    """Collects every problem of one task file while building its tasks."""

    def __init__(self, name: str, base_dir: Path) -> None:
        self.name = name
        self.base_dir = base_dir
        self.problems: list[str] = []

    def problem(self, where: str, message: str) -> None:
        self.problems.append(_redacted_line(self.name, where, message))

    def raise_problems(self) -> None:
        if self.problems:
            raise TaskFileError(self.problems)

    def table(self, value: object, where: str) -> dict[str, Any]:
        if isinstance(value, dict):
            return value
        self.problem(where, f"expected a table, got {_type_name(value)}")
        return {}

    def task(self, defaults: dict[str, Any], raw: object, where: str) -> TaskSpec | None:
        own = self.table(raw, where)
        merged = deep_merge(defaults, own)
        before = len(self.problems)
        repo = self.repo(merged.get("repo"), f"{where}.repo")
        base = self.text(merged.get("base", DEFAULT_BASE), f"{where}.base")
        goal = self.goal(own, where)
        fleet = self.table(merged.get("fleet", {}), f"{where}.fleet")
        pr, retry, land = self.fleet_options(fleet, f"{where}.fleet")
        settings = {k: v for k, v in merged.items() if k not in TASK_KEYS}
        task_id = self.task_id(own.get("id"), f"{where}.id")
        # a repository URL with credentials in it was named above: say it once
        self.secrets({k: v for k, v in merged.items() if repo or k != "repo"}, where)
        self.settings(settings, where)
        if len(self.problems) > before or repo is None or goal is None:
            return None
        return TaskSpec(
            task_id or default_id(goal, repo, base), repo, base, goal, settings, retry, pr, land
        )

    def task_id(self, value: object, where: str) -> str | None:
        if value is None or (isinstance(value, str) and ID_PATTERN.fullmatch(value)):
            return value
        self.problem(
            where,
            f"{value!r} is not a task id: lower-case letters, digits, '.', '_' and '-', "
            "starting with a letter or digit, at most 63",
        )
        return None

    def text(self, value: object, where: str) -> str:
        if isinstance(value, str) and value.strip():
            return value
        self.problem(where, f"expected non-empty text, got {_type_name(value)}")
        return ""

    def repo(self, value: object, where: str) -> str | None:
        if value is None:
            self.problem(where, "missing: a repository URL or path (in the task or [defaults])")
            return None
        text = self.text(value, where)
        if not text:
            return None
        problem = repo_problem(text)
        if problem:
            self.problem(where, problem)
            return None
        if "://" in text or _SCP_LIKE.match(text):
            return text
        return str((self.base_dir / text).resolve())

    def goal(self, own: dict[str, Any], where: str) -> str | None:
        if ("goal" in own) == ("goal_file" in own):
            self.problem(where, "give the task a goal or a goal_file (one of them)")
            return None
        if "goal" in own:
            goal = self.text(own["goal"], f"{where}.goal")
        else:
            goal = self.goal_file(own["goal_file"], f"{where}.goal_file")
        if len(goal.encode()) > MAX_GOAL_BYTES:
            self.problem(where, f"the goal is over {MAX_GOAL_BYTES // 1024} KB")
            return None
        return goal or None

    def goal_file(self, value: object, where: str) -> str:
        name = self.text(value, where)
        if not name:
            return ""
        path = self.base_dir / name
        try:
            return self.text(path.read_text(encoding="utf-8"), where)
        except OSError as exc:
            self.problem(where, f"cannot read {path}: {exc.strerror or exc}")
        except UnicodeDecodeError:
            self.problem(where, f"{path} is not UTF-8 text")
        return ""

    def fleet_options(
        self, fleet: dict[str, Any], where: str
    ) -> tuple[bool, dict[str, RetryPolicy], LandOptions | None]:
        for key in sorted(set(fleet) - set(FLEET_KEYS)):
            self.problem(f"{where}.{key}", f"unknown key{_did_you_mean(key, FLEET_KEYS)}")
        pr, land, delete = (self.flag(fleet, key, where) for key in ("pr", "land", "delete_branch"))
        retry = self.table(fleet.get("retry", {}), f"{where}.retry")
        policies = retry_policies(retry, f"{where}.retry", self.problem)
        problems = land_problems(fleet.get("land_mode", "rebase"), fleet.get("land_attempts", 2))
        for key, message in problems:
            self.problem(f"{where}.{key}", message)
        if not land or problems:
            return pr, policies, None
        options = LandOptions(
            fleet.get("land_mode", "rebase"), fleet.get("land_attempts", 2), delete
        )
        return pr, policies, options

    def flag(self, fleet: dict[str, Any], key: str, where: str) -> bool:
        value = fleet.get(key, False)
        if not isinstance(value, bool):
            self.problem(f"{where}.{key}", f"expected true or false, got {_type_name(value)}")
        return value is True

    def secrets(self, data: Mapping[str, Any], where: str) -> None:
        for path, value in _strings(data):
            if _looks_secret(value):
                self.problem(
                    f"{where}.{path}",
                    "looks like a secret, and tasks are kept in the Temporal server's history "
                    "(its Web UI shows them): give the worker the secret in its environment",
                )

    def settings(self, settings: dict[str, Any], where: str) -> None:
        from loopctl import ConfigError, check_settings

        try:
            check_settings(settings, where=f"{self.name}: {where}")
        except ConfigError as exc:
            prefix = f"{self.name}: {where}: "
            self.problems += [
                _redacted_line(self.name, where, line[len(prefix) :])
                if line.startswith(prefix)
                else _redacted_line(line)
                for line in str(exc).splitlines()
                if line.strip()
            ]

    def check_ids(self, tasks: list[TaskSpec | None]) -> None:
        seen: dict[str, int] = {}
        for i, task in enumerate(tasks):
            if task is None:
                continue
            if task.id in seen:
                self.problem(f"task[{i}].id", f"{task.id!r} is task[{seen[task.id]}]'s id too")
            seen.setdefault(task.id, i)


def retry_policies(table: Mapping[str, Any], where: str, problem: Any) -> dict[str, RetryPolicy]:
    """``[…retry.<class>]`` tables as policies; ``problem(where, message)`` for each mistake.
    A class may be given ``"never"`` instead of a table."""
    classes = [c.value for c in FailureClass]
    policies: dict[str, RetryPolicy] = {}
    for name, value in table.items():
        here = f"{where}.{name}"
        if name not in classes:
            problem(here, f"no failure class is named so{_did_you_mean(name, classes)}")
        elif value == "never":
            policies[name] = RetryPolicy(max_attempts=1)
        elif not isinstance(value, dict):
            problem(here, f'expected a table or "never", got {_type_name(value)}')
        else:
            policy = _policy(value, here, problem)
            if policy is not None:
                policies[name] = policy
    return policies


def _policy(value: dict[str, Any], where: str, problem: Any) -> RetryPolicy | None:
    ok = True
    for key, item in value.items():
        if key not in RETRY_KEYS:
            problem(f"{where}.{key}", f"unknown key{_did_you_mean(key, RETRY_KEYS)}")
            ok = False
        elif key == "max_attempts" and not (_is_int(item) and item >= 1):
            problem(f"{where}.{key}", f"expected a whole number of at least 1, got {item!r}")
            ok = False
        elif key != "max_attempts" and not (_is_number(item) and item >= 0):
            problem(f"{where}.{key}", f"expected a number of at least 0, got {item!r}")
            ok = False
    return RetryPolicy(**value) if ok else None


def land_problems(mode: object, attempts: object) -> list[tuple[str, str]]:
    """What is wrong with a landing mode and a number of follow-up attempts: (key, message)."""
    problems = []
    if mode not in ("rebase", "merge"):
        problems.append(("land_mode", f'expected "rebase" or "merge", got {mode!r}'))
    if not (_is_int(attempts) and 0 <= attempts <= 10):  # type: ignore[operator]
        problems.append(
            ("land_attempts", f"expected a whole number from 0 to 10, got {attempts!r}")
        )
    return problems


def default_id(goal: str, repo: str, base: str) -> str:
    """A readable, stable id for a task that names none: its goal's first words and a hash."""
    words = re.sub(r"[^a-z0-9]+", "-", goal.splitlines()[0].lower()).strip("-")[:40].rstrip("-")
    digest = hashlib.sha256(f"{repo}\0{base}\0{goal}".encode()).hexdigest()[:8]
    return f"{words}-{digest}" if words else f"task-{digest}"


#: ``user@host:path``, the scp-like form git accepts for SSH.
_SCP_LIKE = re.compile(r"^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:(?!//)")


def repo_problem(repo: str) -> str | None:
    """Why ``repo`` cannot travel in a task (credentials in it), or None."""
    if "://" not in repo:
        return None
    try:
        parts = urlsplit(repo)
    except ValueError as exc:
        return f"not a URL git can use: {exc}"
    if parts.password is not None or (parts.username and parts.scheme in ("http", "https")):
        return (
            "the URL holds credentials, and tasks are kept in the Temporal server's history: "
            "give the workers git credentials (a credential helper, an SSH key) instead"
        )
    return None


def _looks_secret(value: str) -> bool:
    from loopctl import redact

    return redact(value) != value


def _strings(data: Any, prefix: str = "") -> list[tuple[str, str]]:
    if isinstance(data, str):
        return [(prefix, data)]
    if isinstance(data, Mapping):
        items = [(f"{prefix}.{k}" if prefix else str(k), v) for k, v in data.items()]
    elif isinstance(data, list):
        items = [(f"{prefix}[{i}]", v) for i, v in enumerate(data)]
    else:
        return []
    return [found for path, value in items for found in _strings(value, path)]


def deep_merge(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """``top`` over ``base``, tables merged key by key (as config layers merge)."""
    merged = dict(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _did_you_mean(word: str, choices: Any) -> str:
    import difflib

    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _type_name(value: object) -> str:
    if value is None:
        return "nothing"
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "text"}
    names.update({list: "an array", dict: "a table"})
    return names.get(type(value), type(value).__name__)


def _redacted_line(*parts: str) -> str:
    """``parts`` joined with ": ", each redacted on its own. Redacted as one line, a file name
    or key path before our message reads as an assignment ("secret.toml: task[0]…",
    "…env.API_KEY: looks like…") and our own words would be masked as its value; the values
    in a message are still masked."""
    from loopctl import redact

    return ": ".join(redact(part) for part in parts)
