"""tasks.toml: every problem named with its key path, nothing secret let through."""

from __future__ import annotations

import string
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopctl_fleet.taskfile import (
    ID_PATTERN,
    LandOptions,
    TaskFileError,
    TaskSpec,
    default_id,
    read_task_file,
    repo_problem,
    tasks_from_data,
)

SECRET = "sk-ant-api03-" + "A" * 93 + "-AAAAAAAA"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tasks.toml"
    path.write_text(text, encoding="utf-8")
    return path


def problems(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(TaskFileError) as caught:
        read_task_file(write(tmp_path, text))
    return caught.value.problems


def test_defaults_merge_under_each_task(tmp_path: Path) -> None:
    (tmp_path / "goal.md").write_text("Fix the parser\n\nDetails.", encoding="utf-8")
    tasks = read_task_file(
        write(
            tmp_path,
            """
[defaults]
repo = "repo"
test_cmd = "pytest -q"
[defaults.limits]
max_iterations = 15
max_cost_usd = 2.0

[[task]]
id = "issue-1"
goal_file = "goal.md"
[task.limits]
max_iterations = 10

[[task]]
repo = "git@example.com:org/app.git"
base = "v1.2"
goal = "Make the build pass"
[task.fleet.retry]
agent_crash = { max_attempts = 2, initial_interval_s = 1 }
stuck = "never"
""",
        )
    )
    first, second = tasks
    assert first.id == "issue-1"
    assert first.repo == str(tmp_path / "repo")  # relative to the task file
    assert first.base == "HEAD"
    assert first.goal.startswith("Fix the parser")
    assert first.settings == {
        "test_cmd": "pytest -q",
        "limits": {"max_iterations": 10, "max_cost_usd": 2.0},
    }
    assert first.branch == "loopctl/issue-1"
    assert second.repo == "git@example.com:org/app.git"
    assert second.base == "v1.2"
    assert second.retry["agent_crash"].max_attempts == 2
    assert second.retry["agent_crash"].initial_interval_s == 1
    assert second.retry["stuck"].max_attempts == 1
    assert ID_PATTERN.fullmatch(second.id)
    assert second.id.startswith("make-the-build-pass-")


def test_every_problem_is_named_with_its_key_path_and_nothing_is_returned(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        """
extra = 1
[defaults]
repo = "https://example.com/app.git"
id = "not-here"

[[task]]
id = "Bad Id"
goal = "x"
[task.limits]
max_iteration = 3
[task.fleet]
retyr = {}
[task.fleet.retry.agent_crsh]
max_attempts = 2

[[task]]
goal = "y"
goal_file = "z.md"

[[task]]
id = "dup"
goal = "a"

[[task]]
id = "dup"
goal = "b"
[task.fleet.retry.agent_crash]
max_attempts = 0
backof = 2
""",
    )
    expected = [
        "tasks.toml: extra: unknown key",
        "tasks.toml: defaults.id: belongs in each [[task]]",
        "tasks.toml: task[0].id: 'Bad Id' is not a task id",
        "tasks.toml: task[0]: limits: unknown key 'max_iteration' (did you mean 'max_iterations'?)",
        "tasks.toml: task[0].fleet.retyr: unknown key (did you mean 'retry'?)",
        "tasks.toml: task[0].fleet.retry.agent_crsh: no failure class is named so (did you mean 'agent_crash'?)",
        "tasks.toml: task[1]: give the task a goal or a goal_file (one of them)",
        "tasks.toml: task[3].fleet.retry.agent_crash.max_attempts: expected a whole number of at least 1",
        "tasks.toml: task[3].fleet.retry.agent_crash.backof: unknown key (did you mean 'backoff'?)",
    ]
    for line in expected:
        assert any(p.startswith(line) for p in found), (line, found)


def test_duplicate_ids_are_refused(tmp_path: Path) -> None:
    found = problems(
        tmp_path,
        '[defaults]\nrepo = "/r"\n[[task]]\nid = "a"\ngoal = "x"\n[[task]]\nid = "a"\ngoal = "y"\n',
    )
    assert found == ["tasks.toml: task[1].id: 'a' is task[0]'s id too"]


@pytest.mark.parametrize(
    ("where", "text"),
    [
        ("task[0].goal", f'goal = "use {SECRET}"'),
        (
            "task[0].agents.claude.env.ANTHROPIC_API_KEY",
            f'goal = "x"\nagents.claude.env.ANTHROPIC_API_KEY = "{SECRET}"',
        ),
    ],
)
def test_a_secret_anywhere_in_a_task_refuses_the_file(
    tmp_path: Path, where: str, text: str
) -> None:
    found = problems(tmp_path, f'[[task]]\nrepo = "/r"\n{text}\n')
    assert any(p.startswith(f"tasks.toml: {where}: looks like a secret") for p in found), found
    assert not any(SECRET in p for p in found)  # the message never repeats it


@pytest.mark.parametrize(
    "url",
    [
        "https://bob:hunter2@example.com/app.git",
        "https://x-access-token@example.com/app.git",
        "ssh://git:pw@host/app",
    ],
)
def test_credentials_in_a_repository_url_are_refused(tmp_path: Path, url: str) -> None:
    found = problems(tmp_path, f'[[task]]\nrepo = "{url}"\ngoal = "x"\n')
    assert len(found) == 1, found
    assert "the URL holds credentials" in found[0]
    assert "hunter2" not in found[0]


@pytest.mark.parametrize(
    "url",
    ["git@github.com:org/app.git", "ssh://git@host/app", "/srv/app.git", "file:///srv/app.git"],
)
def test_ordinary_repository_addresses_are_fine(url: str) -> None:
    assert repo_problem(url) is None


def test_a_file_that_is_not_toml_names_the_line(tmp_path: Path) -> None:
    (found,) = problems(tmp_path, "[[task]\n")
    assert found.startswith(f"{tmp_path / 'tasks.toml'}: not valid TOML")
    assert "line 1" in found


def test_a_file_without_tasks_submits_nothing(tmp_path: Path) -> None:
    assert problems(tmp_path, "[defaults]\n") == [
        "tasks.toml: task: no [[task]] table: nothing to submit"
    ]


def test_the_digest_tells_a_repeat_from_a_new_task() -> None:
    a = TaskSpec("a", "/r", "main", "goal")
    assert a.digest() == TaskSpec("a", "/r", "main", "goal").digest()
    assert a.digest() != TaskSpec("a", "/r", "main", "other goal").digest()


@given(st.text(min_size=1), st.text(), st.text())
def test_a_default_id_is_always_a_valid_id(goal: str, repo: str, base: str) -> None:
    assert ID_PATTERN.fullmatch(default_id(goal, repo, base))


toml_scalars = st.one_of(
    st.booleans(),
    st.integers(-5, 5),
    st.floats(allow_nan=False),
    st.text(string.printable, max_size=8),
)
toml_values = st.recursive(
    toml_scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.text(string.ascii_lowercase, min_size=1, max_size=6), inner, max_size=3
        )
    ),
    max_leaves=8,
)


@settings(deadline=None, max_examples=60)
@given(st.dictionaries(st.sampled_from(["defaults", "task", "x"]), toml_values, max_size=3))
def test_any_parsed_file_gives_tasks_or_a_task_file_error(data: dict) -> None:
    """Whatever the TOML holds: tasks, or problems each naming where; never another exception."""
    problems: list[str] = []
    problems: list[str] = []
    try:
        tasks = tasks_from_data(data, name="tasks.toml", base_dir=Path("/nonexistent"))
    except TaskFileError as exc:
        problems = exc.problems
        tasks = []
    assert problems or tasks
    assert all(p.startswith("tasks.toml: ") for p in problems)
    assert all(ID_PATTERN.fullmatch(t.id) for t in tasks)


def test_pr_is_a_boolean_of_the_fleet_table(tmp_path: Path) -> None:
    [task] = read_task_file(
        write(tmp_path, '[[task]]\nrepo = "/r"\ngoal = "g"\n[task.fleet]\npr = true\n')
    )
    assert task.pr is True
    found = problems(tmp_path, '[[task]]\nrepo = "/r"\ngoal = "g"\n[task.fleet]\npr = "yes"\n')
    assert found == ["tasks.toml: task[0].fleet.pr: expected true or false, got text"]


def test_land_options_are_read_checked_and_defaulted_by_the_fleet(tmp_path: Path) -> None:
    text = """
[defaults]
repo = "repo"
[[task]]
id = "a"
goal = "g"
[task.fleet]
land = true
land_mode = "merge"
land_attempts = 0
delete_branch = true
[[task]]
id = "b"
goal = "g"
[[task]]
id = "c"
goal = "g"
fleet = { land = false }
"""
    a, b, c = read_task_file(write(tmp_path, text), {"land": True})
    assert a.land == LandOptions("merge", 0, True)
    assert b.land == LandOptions()  # the fleet's land = true
    assert c.land is None  # the task's own word wins
    assert read_task_file(write(tmp_path, text))[1].land is None
    bad = problems(
        tmp_path,
        '[[task]]\nrepo = "r"\ngoal = "g"\n[task.fleet]\nland = true\npr = true\n'
        'land_mode = "squash"\nland_attempts = -1\n',
    )
    assert bad == [
        'tasks.toml: task[0].fleet.land_mode: expected "rebase" or "merge", got \'squash\'',
        "tasks.toml: task[0].fleet.land_attempts: expected a whole number from 0 to 10, got -1",
    ]
    [through] = read_task_file(  # a result with a pull request lands through it
        write(tmp_path, '[[task]]\nrepo = "r"\ngoal = "g"\n[task.fleet]\nland = true\npr = true\n')
    )
    assert (through.pr, through.land) == (True, LandOptions())
