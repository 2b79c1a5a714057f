"""Shared pieces of goal-guard's tests: a fast fake test runner, note-reporting plugins, and
readers for the prompts a loop logged. (A plain module, not a conftest: several plugins' test
directories are collected in one pytest run.)"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from loopctl import hookimpl
from loopctl.testing import Project
from loopctl_goal_guard import plugin as guard_plugin

#: Register goal-guard with ``run_loop(..., plugins=PLUGINS)``.
PLUGINS: dict[str, object] = {"goal-guard": guard_plugin}

#: Prints pytest-like output for every test id listed in failing.txt (one per line), and exits
#: 1 when there is any: a test command that costs a shell, not an interpreter.
TESTS_SH = """\
n=0
while IFS= read -r t; do
  if [ -n "$t" ]; then
    echo "FAILED $t - AssertionError: $t is broken"
    n=$((n+1))
  fi
done < failing.txt
echo "=========================== short test summary info ============================"
if [ "$n" -gt 0 ]; then echo "============ $n failed in 0.01s ============"; exit 1; fi
echo "============ 1 passed in 0.01s ============"
"""
TEST_CMD = "sh tests.sh"


def prepare_project(project: Project, failing: Sequence[str] = ("test_a.py::test_one",)) -> None:
    project.write("tests.sh", TESTS_SH)
    project.write("failing.txt", "".join(f"{t}\n" for t in failing))
    project.commit("fake tests")


def config(max_iterations: int = 3, **extra: Any) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "limits": {"max_iterations": max_iterations, "max_restarts": 3},
        "stuck": {"enabled": False},
    }
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(settings.get(key), dict):
            settings[key] = {**settings[key], **value}
        else:
            settings[key] = value
    return settings


def fix_tests(names: Sequence[str] = ()) -> dict[str, Any]:
    """A scenario action that leaves only ``names`` failing."""
    return {"write": "failing.txt", "content": "".join(f"{t}\n" for t in names)}


_PROMPT_LOG = re.compile(r"iteration-(\d{4})\.prompt\.md\Z")


def prompts(state_dir: Path) -> dict[int, str]:
    """Every prompt the loop logged, by iteration (restart archives included)."""
    found: dict[int, str] = {}
    for path in state_dir.rglob("iteration-*.prompt.md"):
        match = _PROMPT_LOG.search(path.name)
        if match:
            # bytes, not read_text: universal newlines would turn a goal's "\r" into "\n"
            found[int(match.group(1))] = path.read_bytes().decode("utf-8")
    return dict(sorted(found.items()))


def goal_section_is(prompt: str, goal: str) -> bool:
    """The prompt opens with exactly one "Your Goal" section whose body is ``goal``, byte for
    byte, followed by the next section, the core's trim notice, or the end."""
    head = f"## Your Goal\n\n{goal}" + ("" if goal.endswith("\n") else "\n")
    if not prompt.startswith(head):
        return False
    rest = prompt[len(head) :]
    if rest and not rest.startswith(("\n## ", "\n_Prompt budget reached")):
        return False
    return "\n## Your Goal\n" not in rest


def notes_section(prompt: str) -> str:
    """The body of the "Notes" section ("" when the prompt has none)."""
    start = prompt.find("\n## Notes\n\n")
    if start < 0:
        return ""
    body = prompt[start + len("\n## Notes\n\n") :]
    end = body.find("\n## ")
    return body if end < 0 else body[: end + 1]


class NoteSource:
    """A plugin reporting notes through goal-guard's hook: ``per_iteration`` new ones every
    iteration (unique keys), plus ``steady`` texts that repeat every time."""

    def __init__(
        self, per_iteration: int = 1, steady: Sequence[str] = (), priority: int = 50
    ) -> None:
        self.per_iteration = per_iteration
        self.steady = list(steady)
        self.priority = priority

    @hookimpl
    def goal_guard_notes(self, loop: Any) -> list[Any]:
        notes: list[Any] = [
            {
                "text": f"review remark {n} of iteration {loop.iteration}: rename the helper",
                "key": f"remark-{loop.iteration}-{n}",
                "priority": self.priority,
            }
            for n in range(self.per_iteration)
        ]
        notes.extend(self.steady)
        return notes
