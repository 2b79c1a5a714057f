"""The plugin in real loops: reports, the ledger, the prompt section, the memory, events."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

import loopctl_context_errors.plugin as plugin
from loopctl import hookimpl, read_jsonl
from loopctl.testing import make_project
from loopctl.testing import run_loop as run_a_loop
from loopctl_context_errors.categories import Rule
from loopctl_context_errors.events import (
    CONTEXT_GENERATED,
    EVENT_TYPES,
    MEMORY_SPOOL,
    MEMORY_UNAVAILABLE,
    SUGGESTION_RECORDED,
    SUGGESTION_RESOLVED,
    validate,
)
from loopctl_context_errors.runtime import report_path, sanitize_stage


def run_loop(project: Any, goal: str, **kwargs: Any) -> Any:
    """:func:`loopctl.testing.run_loop` without the tests before the first turn: these tests
    are about the failures of iterations (the one before the first turn has a test of its own,
    ``test_a_failure_fixed_in_the_first_turn_is_remembered_with_its_change``)."""
    config = {"test_first": False, **kwargs.pop("config", {})}
    return run_a_loop(project, goal, config=config, **kwargs)


PLUGINS = {"context-errors": plugin}
CALC_TEST = (
    "import unittest\nfrom calc import add, mul\n\n"
    "class CalcTest(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n"
    "    def test_mul(self):\n        self.assertEqual(mul(2, 3), 6)\n"
)
FIX_ADD = {"replace": "calc.py", "old": "a - b", "new": "a + b"}
FIX_MUL = {"replace": "calc.py", "old": "a + b + 0", "new": "a * b"}


def _calc_project(path: Path, *, mul_broken: bool = False):  # type: ignore[no-untyped-def]
    project = make_project(path)
    mul = "a + b + 0" if mul_broken else "a * b"
    project.write(
        "calc.py", f"def add(a, b):\n    return a - b\n\ndef mul(a, b):\n    return {mul}\n"
    )
    project.write("test_calc.py", CALC_TEST)
    project.commit("calc")
    # its own identity in the memory (two projects made alike in the same second would share
    # their root commit)
    subprocess.run(
        [
            "git",
            "-C",
            str(path),
            "remote",
            "add",
            "origin",
            f"https://example.com/acme/{path.name}",
        ],
        check=True,
    )
    return project


def _events(state_dir: Path, prefix: str = "") -> list[dict[str, Any]]:
    lines = (state_dir / "events.jsonl").read_text(encoding="utf-8").splitlines()
    events = [json.loads(line) for line in lines if line.strip()]
    return [e for e in events if e["type"].startswith(prefix)]


@pytest.mark.slow
def test_failure_then_fix_reports_resolves_and_remembers(
    tmp_path: Path, private_memory: Path
) -> None:
    project = _calc_project(tmp_path / "shop")
    result = run_loop(project, "make the tests pass", turns=[[{"say": "looking"}], [FIX_ADD]],
                      plugins=PLUGINS)  # fmt: skip
    assert result.status == "complete"
    state = result.state_dir

    report = (state / "context-error-tests.md").read_text(encoding="utf-8")
    for section in ("What Failed", "Why", "Similar Past Issues", "Suggested Actions"):
        assert f"## {section}" in report
    assert "ASSERTION_FAILURE" in report
    assert "AssertionError: -1 != 5" in report
    assert "Iteration: 1" in report
    assert "make the tests pass" in report

    generated = result.events_of(CONTEXT_GENERATED)
    assert len(generated) == 1
    assert generated[0]["category"] == "ASSERTION_FAILURE"
    assert generated[0]["rule"] == "assertion.failed"
    assert generated[0]["report_path"] == str(state / "context-error-tests.md")
    recorded = result.events_of(SUGGESTION_RECORDED)
    resolved = result.events_of(SUGGESTION_RESOLVED)
    assert [r["suggestion_id"] for r in resolved] == [recorded[0]["suggestion_id"]]
    assert resolved[0]["effective"] is True
    assert resolved[0]["reason"] == "tests_pass"

    ledger = [json.loads(x) for x in (state / "suggestions.jsonl").read_text().splitlines()]
    assert [entry["kind"] for entry in ledger] == ["suggestion", "resolution"]
    assert 2 <= len(ledger[0]["actions"]) <= 4
    assert ledger[0]["failing_tests"] == ["test_calc.CalcTest.test_add"]

    prompt = (state / "logs" / "iteration-0002.prompt.md").read_text(encoding="utf-8")
    assert "## Historical Context" in prompt
    assert "ASSERTION_FAILURE" in prompt
    assert "Suggested actions:" in prompt
    first_prompt = (state / "logs" / "iteration-0001.prompt.md").read_text(encoding="utf-8")
    assert "Historical Context" not in first_prompt

    annotations = result.records[0]["annotations"]["context_errors"]
    assert annotations["category"] == "ASSERTION_FAILURE"
    assert "Context Errors" in json.dumps(result.report())

    with contextlib.closing(sqlite3.connect(private_memory)) as conn:
        row = conn.execute(
            "SELECT project, category, fix_files, fix_suggestion FROM failures"
        ).fetchone()
        stats = conn.execute("SELECT sum(shown), sum(effective) FROM suggestion_stats").fetchone()
    assert row[0] == "shop"
    assert row[1] == "ASSERTION_FAILURE"
    assert json.loads(row[2]) == ["calc.py"]
    assert row[3]
    assert stats[0] == stats[1]
    assert stats[0] >= 2

    for event in _events(state):
        if event["type"] in EVENT_TYPES:
            assert validate(event) == [], event

    # another project, the same failure: the report and the prompt bring the earlier fix
    other = _calc_project(tmp_path / "crm")
    second = run_loop(other, "make the tests pass", turns=[[{"say": "hm"}], [FIX_ADD]],
                      plugins=PLUGINS)  # fmt: skip
    report = (second.state_dir / "context-error-tests.md").read_text(encoding="utf-8")
    assert "[exact 1.00]" in report
    assert "(another project: shop)" in report  # labelled: not this project's failure
    assert "calc.py" in report
    prompt = (second.state_dir / "logs" / "iteration-0002.prompt.md").read_text(encoding="utf-8")
    assert "fixed by changing calc.py" in prompt
    assert "(another project: shop)" in prompt
    actions = second.events_of(SUGGESTION_RECORDED)[0]["actions"]
    assert actions[0].startswith(
        "A matching failure (another project: shop) was fixed by changing calc.py"
    )


def test_effective_only_when_the_tests_it_was_about_pass(tmp_path: Path) -> None:
    project = _calc_project(tmp_path / "p", mul_broken=True)
    result = run_loop(project, "fix both", turns=[[{"say": "x"}], [FIX_MUL], [FIX_ADD]],
                      plugins=PLUGINS)  # fmt: skip
    assert result.status == "complete"
    recorded = result.events_of(SUGGESTION_RECORDED)
    resolved = {r["suggestion_id"]: r for r in result.events_of(SUGGESTION_RESOLVED)}
    assert len(recorded) == 2
    first, second = recorded
    assert sorted(first["failing_tests"]) == [
        "test_calc.CalcTest.test_add",
        "test_calc.CalcTest.test_mul",
    ]
    # iteration 2 fixed mul only: the first set was about add too, so it did not work
    assert resolved[first["suggestion_id"]]["effective"] is False
    assert resolved[first["suggestion_id"]]["still_failing"] == ["test_calc.CalcTest.test_add"]
    assert resolved[second["suggestion_id"]]["effective"] is True
    assert resolved[second["suggestion_id"]]["suggested_at_iteration"] == 2


@pytest.mark.slow
def test_plugin_rules_from_the_hook(tmp_path: Path) -> None:
    class LockRules:
        @hookimpl
        def context_errors_rules(self) -> list[Rule]:
            return [
                Rule(
                    "demo.add-mismatch",
                    "TYPE_ERROR",
                    r"-1 != 5",
                    needles=("!=",),
                    tier=1,
                    description="the demo's own rule",
                ),
                Rule("assertion.failed", "UNKNOWN", r".", needles=("a",)),  # taken: ignored
            ]

    project = _calc_project(tmp_path / "p")
    result = run_loop(project, "fix", turns=[[{"say": "x"}], [FIX_ADD]],
                      plugins={**PLUGINS, "lock-rules": LockRules()})  # fmt: skip
    generated = result.events_of(CONTEXT_GENERATED)[0]
    assert (generated["rule"], generated["category"]) == ("demo.add-mismatch", "TYPE_ERROR")


@pytest.mark.slow
def test_other_plugins_receive_each_report(tmp_path: Path) -> None:
    from loopctl_context_errors import render_github

    received: list[str] = []

    class Forwarder:
        @hookimpl
        def context_errors_report(self, loop: Any, report: Any) -> None:
            received.append(render_github(report))

    class Broken:
        @hookimpl
        def context_errors_report(self, loop: Any, report: Any) -> None:
            raise RuntimeError("chat server down")

    project = _calc_project(tmp_path / "p")
    result = run_loop(project, "fix", turns=[[{"say": "x"}], [FIX_ADD]],
                      plugins={**PLUGINS, "forwarder": Forwarder(), "broken": Broken()})  # fmt: skip
    assert result.status == "complete"
    assert len(received) == 1
    assert "ASSERTION_FAILURE" in received[0] or "Assertion" in received[0]
    errors = result.events_of("plugin.error")
    assert [e["plugin"] for e in errors] == ["broken"]
    assert "chat server down" in errors[0]["error"]


@pytest.mark.slow
def test_memory_off_by_config_and_by_environment(
    tmp_path: Path, private_memory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = _calc_project(tmp_path / "p")
    result = run_loop(project, "fix", turns=[[{"say": "x"}], [FIX_ADD]], plugins=PLUGINS,
                      config={"plugins": {"context-errors": {"memory": False}}})  # fmt: skip
    assert result.events_of(CONTEXT_GENERATED)[0]["memory_status"] == "disabled"
    assert not private_memory.exists()
    monkeypatch.setenv("LOOPCTL_FAILURE_MEMORY", "off")
    project = _calc_project(tmp_path / "q")
    result = run_loop(project, "fix", turns=[[{"say": "x"}], [FIX_ADD]], plugins=PLUGINS)
    assert result.events_of(CONTEXT_GENERATED)[0]["memory_status"] == "disabled"
    assert not private_memory.exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("postgresql://loop:{pw}@[::1/mem", "bad-url"),  # malformed: never reaches a server
        ("postgresql://loop:{pw}@db@example/mem", "bad-url"),
        # nothing listens on port 1: refused (or no-driver where psycopg is not installed)
        ("postgresql://loop:{pw}@127.0.0.1:1/mem", "refused|no-driver"),
    ],
)
def test_an_unusable_memory_warns_once_and_the_loop_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str, reason: str
) -> None:
    password = "pw-" + uuid.uuid4().hex
    monkeypatch.setenv("LOOPCTL_FAILURE_MEMORY", value.format(pw=password))
    project = _calc_project(tmp_path / "p")
    result = run_loop(project, "fix", plugins=PLUGINS,
                      turns=[[{"say": "x"}], [{"say": "y"}], [FIX_ADD]])  # fmt: skip
    assert result.status == "complete"
    generated = result.events_of(CONTEXT_GENERATED)
    assert len(generated) == 2
    assert {e["memory_status"] for e in generated} == {"unavailable"}
    assert {e["memory_reason"] for e in generated} <= set(reason.split("|"))
    warnings = result.events_of(MEMORY_UNAVAILABLE)
    assert len(warnings) == 1  # once a run, not once a failure
    assert warnings[0]["summary"].startswith("warning: failure memory ")
    if warnings[0]["memory_reason"] == "refused":  # a server that may come back: kept
        assert warnings[0]["summary"].endswith(" and written to it when it is back)")
        kept = read_jsonl(Path(warnings[0]["spool"])).records
        assert [record["kind"] for record in kept] == ["failure", "failure", "fix"]
    else:  # a URL that names no server, no driver: nothing to wait for
        assert warnings[0]["summary"].endswith("(going on without memory)")
        assert "spool" not in warnings[0]
        assert not (tmp_path / "xdg" / "loopctl" / "spool").exists()
    assert validate(warnings[0]) == []
    report = (result.state_dir / "context-error-tests.md").read_text(encoding="utf-8")
    assert "None: the failure memory is unavailable." in report
    for path in [*result.state_dir.rglob("*"), *(tmp_path / "xdg").rglob("*")]:
        if path.is_file():
            assert password not in path.read_text(encoding="utf-8", errors="replace"), path


@pytest.mark.slow
def test_a_locked_memory_file_keeps_the_failures_until_it_is_free(
    tmp_path: Path, private_memory: Path
) -> None:
    """Another writer holds the SQLite file for longer than ``memory_timeout_s`` while the run
    meets its failure for the second and third time: both are kept in the spool (one warning
    says so) and written once the file is free; the row counts all four, the fix is known."""
    holder: list[sqlite3.Connection] = []

    class LockThenFree:
        @hookimpl
        def before_iteration(self, loop: Any) -> None:
            loop.wait_for_background(30)  # the last failure's write was tried
            if loop.iteration == 2:
                holder.append(sqlite3.connect(private_memory, isolation_level=None))
                holder[0].execute("BEGIN IMMEDIATE")
            if loop.iteration == 4:
                holder[0].execute("ROLLBACK")
                holder.pop().close()

    project = _calc_project(tmp_path / "p")
    four = [[{"say": "x"}], [{"say": "y"}], [{"say": "z"}], [{"say": "w"}], [FIX_ADD]]
    result = run_loop(project, "fix", turns=four, plugins={**PLUGINS, "lock": LockThenFree()},
                      config={"plugins": {"context-errors": {"memory_timeout_s": 0.3}},
                              "stuck": {"enabled": False}})  # fmt: skip  # idle turns
    assert result.status == "complete"
    with contextlib.closing(sqlite3.connect(private_memory)) as conn:
        rows = conn.execute("SELECT occurrences, resolved_at IS NOT NULL FROM failures").fetchall()
    assert rows == [(4, 1)]
    statuses = [e["memory_status"] for e in result.events_of(CONTEXT_GENERATED)]
    assert statuses == ["missing", "cached", "cached", "cached"]  # reads were never locked out
    (warning,) = result.events_of(MEMORY_UNAVAILABLE)
    assert (warning["memory_status"], warning["memory_reason"]) == ("locked", "locked")
    assert warning["summary"] == (
        f"warning: failure memory {private_memory}: locked by another writer (failures are "
        f"kept in {warning['spool']} and written to it when it is back)"
    )
    (written,) = result.events_of(MEMORY_SPOOL)
    assert (written["state"], written["records"]) == ("written", 2)
    assert not Path(warning["spool"]).exists()
    for event in (warning, written):
        assert validate(event) == []


@pytest.mark.slow
def test_a_full_spool_is_said_once_and_keeps_no_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The spool's cap: once it is reached, what cannot reach the store is not kept, and one
    line says so (the warning that failures are kept came first)."""
    pytest.importorskip("psycopg")
    from loopctl_context_errors import spool

    monkeypatch.setattr(spool, "MAX_BYTES", 1)  # room for one record
    monkeypatch.setenv("LOOPCTL_FAILURE_MEMORY", "postgresql://loop@127.0.0.1:1/mem")
    project = _calc_project(tmp_path / "p")
    result = run_loop(project, "fix", plugins=PLUGINS, config={"stuck": {"enabled": False}},
                      turns=[[{"say": "x"}], [{"say": "y"}], [{"say": "z"}], [FIX_ADD]])  # fmt: skip
    assert result.status == "complete"
    (warning,) = result.events_of(MEMORY_UNAVAILABLE)
    assert len(read_jsonl(Path(warning["spool"])).records) == 1
    (full,) = result.events_of(MEMORY_SPOOL)
    assert full["state"] == "full"
    assert full["summary"] == (
        "warning: failure memory postgresql://loop@127.0.0.1:1/mem: the local spool "
        f"{warning['spool']} is full (1 bytes): failures that cannot reach the store are not kept"
    )
    assert validate(full) == []
    types = [e["type"] for e in result.events]
    assert types.index(MEMORY_UNAVAILABLE) < types.index(MEMORY_SPOOL)


def test_config_errors_name_the_key(tmp_path: Path) -> None:
    from loopctl import ConfigError

    project = _calc_project(tmp_path / "p")
    with pytest.raises(ConfigError, match=r"plugins\.context-errors\.memory_timeout_s"):
        run_loop(project, "fix", turns=[[{"say": "x"}]], plugins=PLUGINS,
                 config={"plugins": {"context-errors": {"memory_timeout_s": 0}}})  # fmt: skip


@pytest.mark.slow
def test_prompt_section_keeps_its_budget(tmp_path: Path) -> None:
    project = _calc_project(tmp_path / "p")
    result = run_loop(
        project, "fix", turns=[[{"say": "x"}], [FIX_ADD]], plugins=PLUGINS,
        config={"plugins": {"context-errors": {"prompt_budget_chars": 200}}},
    )  # fmt: skip
    prompt = (result.state_dir / "logs" / "iteration-0002.prompt.md").read_text(encoding="utf-8")
    section = prompt.split("## Historical Context\n\n", 1)[1].split("\n## ", 1)[0]
    assert 0 < len(section.strip()) <= 200


def test_secrets_in_test_output_never_reach_state_or_memory(
    tmp_path: Path, private_memory: Path
) -> None:
    secret = "ghp_" + "Zq9" * 12
    project = make_project(tmp_path / "p")
    project.write(
        "test_api.py",
        "import unittest\n\nclass ApiTest(unittest.TestCase):\n"
        "    def test_call(self):\n"
        f"        self.assertEqual('Authorization: Bearer {secret}', 'ok')\n",
    )
    project.commit("api")
    result = run_loop(project, f"call the API with {secret}", turns=[[{"say": "x"}]],
                      plugins=PLUGINS, config={"limits": {"max_iterations": 1}})  # fmt: skip
    assert result.events_of(CONTEXT_GENERATED)
    written = [
        (result.state_dir / "context-error-tests.md").read_text(encoding="utf-8"),
        (result.state_dir / "suggestions.jsonl").read_text(encoding="utf-8"),
        json.dumps([e for e in _events(result.state_dir) if e["type"] in EVENT_TYPES]),
    ]
    with contextlib.closing(sqlite3.connect(private_memory)) as conn:
        written.append(json.dumps(conn.execute("SELECT * FROM failures").fetchall()))
    for text in written:
        assert secret not in text
    assert "[REDACTED]" in written[0]


@pytest.mark.slow
def test_an_agent_failure_is_reported_as_its_own_stage(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p")
    project.write("test_ok.py", "import unittest\n\nclass T(unittest.TestCase):\n"
                  "    def test_ok(self):\n        pass\n")  # fmt: skip
    project.commit("ok")
    result = run_loop(
        project, "do it",
        turns=[[{"error": "network", "message": "ECONNRESET: socket hang up", "once": True}],
               [{"say": "done"}]],
        plugins=PLUGINS,
    )  # fmt: skip
    generated = result.events_of(CONTEXT_GENERATED)
    assert generated
    assert generated[0]["stage"] == "agent"
    assert generated[0]["category"] == "NETWORK_ERROR"
    assert (result.state_dir / "context-error-agent.md").exists()


@pytest.mark.parametrize(
    ("stage", "name"),
    [
        ("tests", "tests"),
        ("../../etc/passwd", "etc-passwd"),
        ("build: lint & type", "build-lint-type"),
        ("", "stage"),
        ("....", "stage"),
        ("x" * 200, "x" * 64),
    ],
)
def test_stage_names_are_safe_file_names(tmp_path: Path, stage: str, name: str) -> None:
    assert sanitize_stage(stage) == name
    path = report_path(tmp_path, stage)
    assert path.parent == tmp_path
    assert path.name == f"context-error-{name}.md"


@pytest.mark.slow
def test_the_failure_is_read_from_the_test_run_the_core_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """on_failure's ``test_run`` is the input: its error lines, failing tests and runner, never
    a second parse of its output, and never a plugin's re-run made before it."""
    import loopctl_context_errors.categories as categories

    def no_second_parse(text: str) -> Any:
        raise AssertionError("the test output was parsed again")

    monkeypatch.setattr(categories, "extract_decisive", no_second_parse)
    seen: list[Any] = []

    class Rerunner:  # runs first and re-runs the tests with a command that passes
        @hookimpl(tryfirst=True)
        def on_failure(self, loop: Any, test_run: Any) -> None:
            seen.append((test_run, loop.run_tests("true", label="flaky-check")))

    project = _calc_project(tmp_path / "p")
    result = run_loop(project, "fix", turns=[[{"say": "x"}], [FIX_ADD]],
                      plugins={**PLUGINS, "rerunner": Rerunner()})  # fmt: skip
    assert result.status == "complete"
    ((test_run, rerun),) = seen
    assert rerun.passed
    assert not test_run.passed
    generated = result.events_of(CONTEXT_GENERATED)[0]
    assert generated["stage"] == "tests"
    assert generated["category"] == "ASSERTION_FAILURE"
    assert generated["runner"] == test_run.runner
    assert generated["failing"] == len(test_run.failing_tests) == 1
    assert set(test_run.error_lines) & set(generated["decisive_lines"])
    recorded = result.events_of(SUGGESTION_RECORDED)[0]
    assert recorded["failing_tests"] == test_run.failing_tests


@pytest.mark.slow
def test_run_state_lives_in_the_loops_stash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ledger and the memory's answers belong to one run: a failure repeated within a run
    asks the memory once, a second run asks again, and the ledger is closed at the end."""
    from loopctl_context_errors import runtime
    from loopctl_context_errors.memory import FailureMemory

    asked: list[str] = []
    query = FailureMemory.query_similar

    def counting(self: FailureMemory, decisive: Any, **kwargs: Any) -> Any:
        asked.append(kwargs.get("exclude_run", ""))
        return query(self, decisive, **kwargs)

    monkeypatch.setattr(FailureMemory, "query_similar", counting)
    during: list[Any] = []
    after: list[Any] = []

    class Watcher:
        @hookimpl
        def after_iteration(self, loop: Any) -> None:
            during.append(loop.stash.get(runtime.LEDGER))

        @hookimpl(trylast=True)
        def on_loop_end(self, loop: Any) -> None:
            after.append((loop.stash.get(runtime.LEDGER), loop.stash.get(runtime.SIMILAR)))

    for name in ("first", "second"):
        project = _calc_project(tmp_path / name)
        result = run_loop(project, "fix", turns=[[{"say": "x"}], [{"say": "y"}], [FIX_ADD]],
                          plugins={**PLUGINS, "watcher": Watcher()})  # fmt: skip
        assert len(result.events_of(CONTEXT_GENERATED)) == 2
    assert len(asked) == 2  # once per run
    assert asked[0] != asked[1]  # each run its own id
    ledgers = [ledger for ledger in during if ledger is not None]
    assert len({id(ledger) for ledger in ledgers}) == 2  # one per run, kept open between appends
    assert all(ledger.keep_open for ledger in ledgers)
    assert [ledger for ledger, _ in after] == [None, None]  # closed and dropped at the end
    assert all(len(answers) == 1 for _, answers in after)
    assert not [name for name in vars(runtime) if name in ("_LEDGERS", "_SIMILAR")]


@pytest.mark.slow
def test_the_memory_is_made_once_a_run_until_what_chooses_it_changes(
    tmp_path: Path, private_memory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure reuses the run's memory instead of resolving its path again; once
    LOOPCTL_FAILURE_MEMORY points elsewhere (here, after the first failure), the next failure
    writes to the new store."""
    from loopctl_context_errors import runtime

    moved = tmp_path / "moved" / "failures.sqlite3"
    seen: list[Any] = []

    class Watcher:
        @hookimpl
        def after_iteration(self, loop: Any) -> None:
            kept = loop.stash.get(runtime.MEMORY)
            seen.append(kept[1] if kept is not None else None)
            if len(seen) == 2:
                monkeypatch.setenv("LOOPCTL_FAILURE_MEMORY", str(moved))

    project = _calc_project(tmp_path / "shop", mul_broken=True)
    turns = [[{"say": "x"}], [{"say": "y"}], [{"say": "z"}], [FIX_MUL], [FIX_ADD]]
    result = run_loop(
        project,
        "fix",
        turns=turns,
        plugins={**PLUGINS, "watcher": Watcher()},
        config={"stuck": {"enabled": False}},  # three idle turns would stop a fresh loop
    )
    assert result.status == "complete"
    first, second, third = seen[:3]
    assert first is second  # made once for the first two failures
    assert (first.path, third.path) == (private_memory, moved)
    with contextlib.closing(sqlite3.connect(moved)) as conn:
        assert conn.execute("SELECT count(*) FROM failures").fetchone()[0] >= 1


def _section(result: Any) -> str:
    (section,) = [s for s in result.report()["sections"] if s["title"] == "Context Errors"]
    return str(section["body"])


@pytest.mark.slow
def test_the_report_section_counts_without_reading_the_ledger_back(
    tmp_path: Path, private_memory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ledger grows with every failing iteration: the loop's end counts from the running
    tally kept in loop-state.md. A loop resumed from an earlier version (no tally) counts its
    ledger once, at the start."""
    from loopctl_context_errors import ledger, runtime

    project = _calc_project(tmp_path / "shop")
    config = {"limits": {"max_iterations": 3}, "stuck": {"enabled": False}}
    whole = ledger.Ledger.entries

    def refuse(self: Any) -> Any:
        raise AssertionError("the whole ledger was read back")

    monkeypatch.setattr(ledger.Ledger, "entries", refuse)
    first = run_loop(project, "make the tests pass", turns=[[{"say": "x"}]], config=config,
                     plugins=PLUGINS)  # fmt: skip
    assert first.status == "max_iterations"
    assert not first.events_of("plugin.error")
    expected = (
        "Failures reported: 3 (ASSERTION_FAILURE 3)\n"
        "Suggestion sets judged: 2, effective: 0, outstanding: 1\n"
        "Latest report: context-error-tests.md"
    )
    assert _section(first) == expected

    state_file = first.state_dir / "loop-state.md"  # as an earlier version left it
    text = state_file.read_text(encoding="utf-8")
    state_file.write_text(
        text.replace(f'"{runtime.TALLY_KEY}"', '"no.tally"').replace(
            'status: "max_iterations"', 'status: "interrupted"'
        ),
        encoding="utf-8",
    )
    monkeypatch.setattr(ledger.Ledger, "entries", whole)
    config["limits"]["max_iterations"] = 4
    second = run_loop(project, "", turns=[[{"say": "x"}]], config=config, plugins=PLUGINS,
                      resume=True)  # fmt: skip
    assert _section(second) == expected.replace(
        "3 (ASSERTION_FAILURE 3)", "4 (ASSERTION_FAILURE 4)"
    ).replace("judged: 2", "judged: 3")


TESTS_FIRST = {"test_first": True}


@pytest.mark.slow
def test_a_failure_fixed_in_the_first_turn_is_remembered_with_its_change(
    tmp_path: Path, private_memory: Path
) -> None:
    """The failure the tests show before the first turn, fixed by that turn: the memory keeps
    it with the change that fixed it, and shows that change when the failure comes back."""
    project = _calc_project(tmp_path / "shop")
    first = run_loop(
        project, "make the tests pass", turns=[[FIX_ADD]], plugins=PLUGINS, config=TESTS_FIRST
    )
    assert first.status == "complete"
    assert [r["iteration"] for r in first.records] == [1]  # fixed within one turn
    with contextlib.closing(sqlite3.connect(private_memory)) as conn:
        files, summary = conn.execute("SELECT fix_files, fix_summary FROM failures").fetchone()
    assert json.loads(files) == ["calc.py"]
    assert "-    return a - b" in summary
    assert "+    return a + b" in summary

    other = _calc_project(tmp_path / "crm")
    second = run_loop(
        other, "make the tests pass", turns=[[FIX_ADD]], plugins=PLUGINS, config=TESTS_FIRST
    )
    prompt = (second.state_dir / "logs" / "iteration-0001.prompt.md").read_text(encoding="utf-8")
    context = prompt.split("## Historical Context", 1)[1]
    assert "before the first turn" in context
    assert "(another project: shop)" in context
    assert "the change that fixed it:" in context
    assert "    +    return a + b" in context  # the fix's own line, for the agent to apply
