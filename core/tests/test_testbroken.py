"""A test command that cannot pass whatever the code says (loopctl.testbroken), read from the
real outputs of pytest, unittest and the shell, and the loop that stops on it at once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from calc_loop import FIX, IDLE, make_calc_project, run
from hypothesis import given
from hypothesis import strategies as hs

from loopctl import agent_may_have_caused, broken_test_command
from loopctl.testbroken import NO_TESTS, PATH, PROGRAM, USAGE

PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"


@pytest.fixture
def project(loopctl_project):
    return make_calc_project(loopctl_project)


def _run(command: str, cwd: Path) -> tuple[int, str]:
    done = subprocess.run(
        command, shell=True, cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )
    return done.returncode, done.stdout + done.stderr


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


PASSING = {"test_a.py": "def test_a():\n    assert True\n"}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("arguments", "kind", "name"),
    [
        ("tests/unit", PATH, "tests/unit"),
        ("--no-such-option", USAGE, None),
        ("-k nomatch", NO_TESTS, None),
    ],
)
def test_pytest_says_its_command_is_broken(
    tmp_path: Path, arguments: str, kind: str, name: str | None
) -> None:
    command = f"{PYTEST} {arguments}"
    code, output = _run(command, _tree(tmp_path, PASSING))
    broken = broken_test_command(command, code, output)
    assert broken is not None, output
    assert (broken.kind, broken.name) == (kind, name)
    assert broken.evidence in output
    assert f"`{command}`" in broken.message(command)


@pytest.mark.slow
def test_a_test_id_pytest_does_not_find_names_its_file(tmp_path: Path) -> None:
    command = f"{PYTEST} test_a.py::test_nope"
    code, output = _run(command, _tree(tmp_path, PASSING))
    broken = broken_test_command(command, code, output)
    assert broken is not None
    assert broken.kind == PATH
    assert broken.name is not None
    assert broken.name.endswith("test_a.py")
    assert "no test" in broken.problem


@pytest.mark.slow
@pytest.mark.parametrize(
    "files",
    [
        {"test_a.py": "def test_a(:\n"},  # a SyntaxError in a test file: exit 2
        {"test_a.py": "import no_such_module_here\n"},  # an ImportError in a test file
        {"conftest.py": "x = (\n", **PASSING},  # a conftest that does not compile: exit 4
        {"conftest.py": "import no_such_module_here\n", **PASSING},  # nor import: exit 4
        {"test_a.py": "def test_a():\n    assert False\n"},  # a plain failure
    ],
)
def test_the_projects_own_collection_errors_are_the_codes(
    tmp_path: Path, files: dict[str, str]
) -> None:
    code, output = _run(PYTEST, _tree(tmp_path, files))
    assert code != 0
    assert broken_test_command(PYTEST, code, output) is None, output


@pytest.mark.parametrize(
    ("command", "kind", "name"),
    [
        ("cd no_such_folder && true", PATH, "no_such_folder"),
        ("true && no-such-program-xyz -q", PROGRAM, "no-such-program-xyz"),
        (f"{sys.executable} -m no_such_module_xyz", PROGRAM, "no_such_module_xyz"),
    ],
)
def test_the_shell_says_the_command_is_broken(
    tmp_path: Path, command: str, kind: str, name: str
) -> None:
    code, output = _run(command, tmp_path)
    broken = broken_test_command(command, code, output)
    assert broken is not None, output
    assert (broken.kind, broken.name) == (kind, name)


def test_a_program_missing_inside_a_script_is_not_the_commands(tmp_path: Path) -> None:
    """`make test` whose recipe runs a missing tool: a dependency, not the command's words."""
    _tree(tmp_path, {"run.sh": "no-such-program-xyz\n"})
    code, output = _run("sh run.sh", tmp_path)
    assert code == 127
    assert broken_test_command("sh run.sh", code, output) is None


def test_a_missing_module_the_code_imports_is_not_the_commands() -> None:
    output = "E   ModuleNotFoundError: No module named 'yaml_lite'\n1 error in 0.1s\n"
    assert broken_test_command(PYTEST, 2, output) is None


def test_what_the_agents_own_changes_may_have_caused() -> None:
    code, output = 4, "ERROR: file or directory not found: tests/unit\n"
    broken = broken_test_command(f"{PYTEST} tests/unit", code, output)
    assert broken is not None
    assert not agent_may_have_caused(broken, [])
    assert not agent_may_have_caused(broken, ["calc.py"])
    assert agent_may_have_caused(broken, ["tests/unit/test_calc.py"])  # it removed the folder
    usage = broken_test_command(f"{PYTEST} --x", 4, "ERROR: usage: pytest\npytest: error: no\n")
    assert usage is not None
    assert not agent_may_have_caused(usage, ["calc.py"])
    assert agent_may_have_caused(usage, ["pyproject.toml"])  # addopts may be its doing
    none = broken_test_command(PYTEST, 5, "\n1 deselected in 0.01s\n")
    assert none is not None
    assert not agent_may_have_caused(none, [])
    assert agent_may_have_caused(none, ["tests/test_new.py"])  # it may be writing them


@given(hs.text(), hs.one_of(hs.none(), hs.integers(-300, 300)), hs.text())
def test_any_output_is_read_without_raising(command: str, code: int | None, output: str) -> None:
    broken = broken_test_command(command, code, output)
    if broken is not None:
        assert broken.message(command)


# --- the loop ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_loop_with_a_broken_test_command_stops_after_its_first_run(project) -> None:
    command = f"{PYTEST} tests/unit"
    result = run(project, [IDLE], test_cmd=command, config={"limits": {"max_iterations": 5}})
    assert result.status == "usage_error"
    assert result.outcome.exit_code == 2
    assert len(result.records) == 1
    assert result.records[0]["reason"] == "test_command_broken"
    assert "tests/unit" in result.outcome.message
    assert f"`{command}`" in result.outcome.message


@pytest.mark.slow
def test_a_loop_whose_agent_removed_the_tested_folder_goes_on(project) -> None:
    """The command names tests/unit, which the agent's own turn removed: that is the agent's
    to fix (and the next turn does), not a broken command."""
    project.write("tests/unit/test_calc.py", project.read("test_calc.py"))
    project.commit("tests in tests/unit")
    remove = {"run": "rm -r tests"}
    restore = {"run": "git checkout -- tests"}
    result = run(
        project,
        [[remove], [restore, FIX]],
        test_cmd=f"{PYTEST} tests/unit",
        config={"limits": {"max_iterations": 3}},
    )
    assert result.status == "complete"
    assert len(result.records) == 2


@pytest.mark.slow
def test_a_collection_error_in_the_code_is_left_to_the_agent(project) -> None:
    project.write("calc.py", "def add(a, b):\n    return a - b (\n")
    project.commit("a syntax error")
    fix = {"write": "calc.py", "content": "def add(a, b):\n    return a + b\n"}
    result = run(project, [[fix]], test_cmd=PYTEST, config={"limits": {"max_iterations": 3}})
    assert result.status == "complete"
