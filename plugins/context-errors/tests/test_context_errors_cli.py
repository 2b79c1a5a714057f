"""`loopctl errors …` and `loopctl memory …`, run as real subprocesses."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from loopctl_context_errors.categories import categorize
from loopctl_context_errors.memory import FailureMemory

LOG = (
    "Traceback (most recent call last):\n"
    '  File "/app/main.py", line 3, in <module>\n'
    "ModuleNotFoundError: No module named 'yaml_tools'\n"
)


def loopctl(*args: str, cwd: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "LOOPCTL_PLUGINS"}
    env["NO_COLOR"] = "1"
    env["LOOPCTL_PLUGINS"] = "context-errors"  # allow-list: other installed plugins stay out
    return subprocess.run(
        [sys.executable, "-m", "loopctl", *args],
        cwd=cwd, input=stdin, capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip


@pytest.fixture
def log_file(tmp_path: Path) -> Path:
    path = tmp_path / "build.log"
    path.write_text(LOG, encoding="utf-8")
    return path


def test_report_json(tmp_path: Path, log_file: Path, private_memory: Path) -> None:
    done = loopctl("errors", "report", str(log_file), "--format", "json", "--stage", "ci",
                   cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["category"] == "RESOURCE_ERROR"
    assert data["rule"] == "resource.missing-python-module"
    assert data["decisive_lines"][-1] == "ModuleNotFoundError: No module named 'yaml_tools'"
    assert data["stage"] == "ci"
    assert 2 <= len(data["suggested_actions"]) <= 4
    assert data["similar_failures"] == []
    assert data["memory"]["status"] == "missing"
    assert not private_memory.exists()  # reporting reads the memory, never creates it


@pytest.mark.slow
def test_report_terminal_and_github_from_stdin(tmp_path: Path) -> None:
    done = loopctl("errors", "report", "-", cwd=tmp_path, stdin=LOG)
    assert done.returncode == 0, done.stderr
    assert "== What Failed ==" in done.stdout
    assert "RESOURCE_ERROR" in done.stdout
    done = loopctl("errors", "report", "--format", "github", cwd=tmp_path, stdin=LOG)
    assert done.returncode == 0
    assert "<details>" in done.stdout
    assert "#### Suggested Actions" in done.stdout


@pytest.mark.slow
def test_user_errors_are_one_line_and_exit_2(tmp_path: Path) -> None:
    done = loopctl("errors", "report", str(tmp_path / "nope.log"), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("loopctl: error: ")
    assert "no such file" in done.stderr
    done = loopctl("errors", "report", "-", "--format", "xml", cwd=tmp_path, stdin=LOG)
    assert done.returncode == 2
    assert "--format" in done.stderr
    done = loopctl("memory", "prune", cwd=tmp_path)
    assert done.returncode == 2
    assert "--older-than" in done.stderr


@pytest.mark.slow
def test_similar_stats_search_prune(tmp_path: Path, log_file: Path, private_memory: Path) -> None:
    memory = FailureMemory(private_memory)
    found = categorize(LOG)
    failure = memory.record_failure(
        decisive=found.decisive_lines, category=found.category.value, project="demo"
    )
    assert failure is not None
    memory.record_fix(failure, files=["requirements.txt"], suggestion="install it")

    done = loopctl("errors", "similar", str(log_file), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["similar_failures"][0]["fix_files"] == ["requirements.txt"]
    assert data["similar_failures"][0]["match"] == "exact"

    done = loopctl("errors", "report", str(log_file), "--format", "json", cwd=tmp_path)
    assert json.loads(done.stdout)["suggested_actions"][0]["source"] == "memory"

    done = loopctl("memory", "stats", "--json", cwd=tmp_path)
    stats = json.loads(done.stdout)
    assert stats["failures"] == 1
    assert stats["fixed"] == 1
    assert stats["path"] == str(private_memory)
    assert (stats["backend"], stats["location"], stats["schema_version"]) == (
        "sqlite", str(private_memory), 2,
    )  # fmt: skip
    done = loopctl("memory", "stats", cwd=tmp_path)
    assert "failures: 1" in done.stdout
    assert f"Failure memory: {private_memory} (sqlite, schema 2)" in done.stdout

    done = loopctl("memory", "search", "No", "module", "named", "yaml_tools", "--json",
                   cwd=tmp_path)  # fmt: skip
    assert json.loads(done.stdout)["results"][0]["project"] == "demo"

    done = loopctl("memory", "prune", "--keep", "0", "--dry-run", "--json", cwd=tmp_path)
    assert json.loads(done.stdout) == {
        "path": str(private_memory), "location": str(private_memory), "deleted": 0,
        "matched": 1, "dry_run": True,
    }  # fmt: skip
    done = loopctl("memory", "prune", "--keep", "0", cwd=tmp_path)
    assert "deleted 1" in done.stdout
    assert FailureMemory(private_memory).stats()["failures"] == 0


@pytest.mark.slow
def test_memory_flag_and_off(tmp_path: Path, log_file: Path) -> None:
    other = tmp_path / "other.sqlite3"
    FailureMemory(other).record_failure(decisive=["ValueError: x_1"], category="UNKNOWN")
    done = loopctl("memory", "stats", "--json", "--memory", str(other), cwd=tmp_path)
    assert json.loads(done.stdout)["failures"] == 1
    done = loopctl("memory", "stats", "--memory", "off", cwd=tmp_path)
    assert done.returncode == 2
    assert "off" in done.stderr


@pytest.mark.slow
def test_migrate_and_copy(tmp_path: Path) -> None:
    from test_context_errors_store_sqlite import _v1_file

    old, new = tmp_path / "old.sqlite3", tmp_path / "new.sqlite3"
    _v1_file(old)
    done = loopctl("memory", "migrate", "--memory", str(old), "--dry-run", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "location": str(old), "from_version": 1, "to_version": 2, "rows": 3, "dry_run": True,
    }  # fmt: skip
    done = loopctl("memory", "migrate", "--memory", str(old), cwd=tmp_path)
    assert done.stdout.strip() == f"{old}: migrated schema 1 → 2 (3 failure(s))"
    done = loopctl("memory", "migrate", "--memory", str(old), cwd=tmp_path)
    assert done.stdout.strip() == f"{old}: already at schema 2"
    done = loopctl("memory", "copy", "--memory", str(old), "--to", str(new), "--json",
                   cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "from": str(old), "to": str(new), "read": 3, "inserted": 3,
        "suggestions_read": 0, "suggestions_added": 0,
    }  # fmt: skip
    done = loopctl("memory", "copy", "--memory", str(old), "--to", str(new), cwd=tmp_path)
    assert done.stdout.strip() == (
        f"copied 0 failure(s) of 3 from {old} to {new} (3 already there)"
    )  # copying again adds nothing
    searches = [
        json.loads(loopctl("memory", "search", "KeyError", "cart_job_17", "--json", "--memory",
                           str(path), cwd=tmp_path).stdout)["ids"]
        for path in (old, new)
    ]  # fmt: skip
    assert searches[0] == searches[1] != []  # the same ids, in the same order


@pytest.mark.slow
def test_memory_errors_are_one_line_without_the_password(tmp_path: Path) -> None:
    password = "pw-Zx81-secret"
    done = loopctl("memory", "stats", "--memory", f"postgresql://loop:{password}@[::1/mem",
                   cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.startswith("loopctl: error: --memory: ")
    assert len(done.stderr.strip().splitlines()) == 1
    assert password not in done.stderr + done.stdout
    newer = tmp_path / "newer.sqlite3"
    FailureMemory(newer).record_failure(decisive=["ValueError: x_1"], category="UNKNOWN")
    import contextlib
    import sqlite3

    with contextlib.closing(sqlite3.connect(newer)) as conn:  # `with conn` would not close it
        conn.execute("PRAGMA user_version = 3")
    for command in (("stats",), ("prune", "--keep", "0"), ("migrate",), ("search", "x_1")):
        done = loopctl("memory", *command, "--memory", str(newer), cwd=tmp_path)
        assert done.returncode == 1, (command, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1
        assert "schema version 3 is newer" in done.stderr
    done = loopctl("memory", "copy", "--to", str(newer), "--memory", str(tmp_path / "x.db"),
                   cwd=tmp_path)  # fmt: skip
    assert done.returncode == 1
    assert "cannot copy into the failure memory" in done.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    ("user", "secrets"),
    [
        ("postgres:postgres", ()),  # a common password, the user name's twin
        ("loop:127", ("?%70assword=S3cretQQ77", "&sslpassword=K3yPass99")),  # a part of the host
        ("ci_runner_2024_loopctl_x:pw", ()),  # a user name the redactor takes for a token
    ],
)
def test_a_memory_that_cannot_be_reached_is_named_once_whole(
    tmp_path: Path, user: str, secrets: tuple[str, ...]
) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"postgresql://{user}@127.0.0.1:{port}/db" + "".join(secrets)
    done = loopctl("memory", "stats", "--memory", url, cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith("loopctl: error: cannot read the failure memory: ")
    assert done.stderr.count(f"@127.0.0.1:{port}/db") == 1, done.stderr
    assert "postgresql://" in done.stderr
    for secret in ("S3cretQQ77", "K3yPass99"):
        assert secret not in done.stderr


@pytest.mark.slow
def test_config_show_never_shows_the_memory_urls_password(tmp_path: Path) -> None:
    password = "pw-Qm42-secret"
    (tmp_path / "loopctl.toml").write_text(
        "[plugins.context-errors]\n"
        f'memory_url = "postgresql://loop:{password}@db.example:5432/mem"\n',
        encoding="utf-8",
    )
    for extra in ((), ("--json",)):
        done = loopctl("config", "show", *extra, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert "memory_url" in done.stdout
        assert "db.example" in done.stdout
        assert password not in done.stdout + done.stderr


def test_rules_lists_the_precedence(tmp_path: Path) -> None:
    done = loopctl("errors", "rules", "--json", cwd=tmp_path)
    rules = json.loads(done.stdout)
    assert rules[0]["tier_name"] == "override"
    assert [r["precedence"] for r in rules] == list(range(1, len(rules) + 1))
    assert {"name": "file.not-found", "category": "FILE_ACCESS"}.items() <= next(
        r for r in rules if r["name"] == "file.not-found"
    ).items()


#: Runs loopctl as its console script does and writes the modules it imported to argv[1].
DRIVER = """
import json, sys
from loopctl.__main__ import main
code = main(sys.argv[2:])
with open(sys.argv[1], "w") as out:
    json.dump(sorted(sys.modules), out)
sys.exit(code)
"""


def test_errors_report_imports_only_what_it_uses(tmp_path: Path, log_file: Path) -> None:
    modules = tmp_path / "modules.json"
    env = {k: v for k, v in os.environ.items() if k != "LOOPCTL_PLUGINS"}
    env["LOOPCTL_PLUGINS"] = "context-errors"
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, str(modules), "errors", "report", str(log_file)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "RESOURCE_ERROR" in done.stdout
    imported = set(json.loads(modules.read_text()))
    heavy = {"loopctl.engine", "loopctl.launch", "loopctl.state", "loopctl.model", "rich"}
    heavy |= {"typer", "cattrs", "loopctl.config.load", "loopctl.config.schema"}  # none is set
    heavy |= {"loopctl.config.errors", "traceback"}  # only a wrong setting, a failing plugin
    assert not heavy & imported


#: The attrs classes of loopctl and its plugins that ``errors report`` may define: each costs
#: its start-up about 0.3 ms (attrs generates and compiles its methods).
REPORT_CLASSES = {
    *(f"loopctl.pluginhost.{n}" for n in ("HookFailure", "PluginInfo", "PluginSelection")),
    *(f"loopctl.scan.{n}" for n in ("ScanMatch", "ScanRule", "_Limits")),
    "loopctl.testoutput.ParsedTestOutput",
    "loopctl.testparts.Partial",
    *(f"loopctl_context_errors.categories.{n}" for n in ("Categorization", "Rule", "_Evidence")),
    "loopctl_context_errors.config.ContextErrorsConfig",
    *(
        f"loopctl_context_errors.memory.{n}"
        for n in ("FailureRecord", "QueryOutcome", "SimilarFailure")
    ),
    # the storage interface's row types (store.py) and the SQLite backend's connection
    *(
        f"loopctl_context_errors.store.{n}"
        for n in (
            "Fix",
            "FixTarget",
            "MemoryLocation",
            "MigrationReport",
            "NewFailure",
            "PruneCriteria",
            "SchemaState",
            "StoredFailure",
        )
    ),
    "loopctl_context_errors.store_sqlite._Open",
    "loopctl_context_errors.project_id.ProjectIdentity",  # same-project hits first
    "loopctl_context_errors.report.ErrorReport",
    "loopctl_context_errors.suggest.Suggestion",
}

CLASSES_DRIVER = """
import gc, io, json, sys, contextlib
from loopctl.__main__ import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main(sys.argv[1:])
print(json.dumps([code, sorted(
    f"{o.__module__}.{o.__qualname__}" for o in gc.get_objects()
    if isinstance(o, type) and "__attrs_attrs__" in o.__dict__
    and o.__module__.startswith("loopctl"))]))
"""


def test_errors_report_defines_only_the_attrs_classes_it_needs(
    tmp_path: Path, log_file: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "LOOPCTL_PLUGINS"}
    env["LOOPCTL_PLUGINS"] = "context-errors"
    done = subprocess.run(
        [sys.executable, "-c", CLASSES_DRIVER, "errors", "report", str(log_file)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    code, defined = json.loads(done.stdout)
    assert code == 0
    assert "loopctl_context_errors.report.ErrorReport" in defined  # the probe sees them
    assert set(defined) <= REPORT_CLASSES


def test_rules_compile_when_a_text_needs_them_and_plugin_rules_at_once() -> None:
    from loopctl_context_errors.categories import DEFAULT_RULES, Rule, RuleSet, Tier

    code = (  # a fresh interpreter: nothing compiled by other tests
        "from loopctl_context_errors.categories import DEFAULT_RULES, categorize\n"
        "def compiled(): return sum(bool(p._compiled) for t in DEFAULT_RULES.by_tier.values() "
        "for _, p in t)\n"
        "total = sum(len(t) for t in DEFAULT_RULES.by_tier.values())\n"
        "print(compiled())\n"
        f"print(categorize({LOG!r}).category.value)\n"
        "print(0 < compiled() < total / 2)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["0", "RESOURCE_ERROR", "True"]
    assert RuleSet.with_extra([]) is DEFAULT_RULES
    broken = Rule("mine.broken", "RESOURCE_ERROR", r"(unclosed", ["unclosed"], Tier.CAUSE)
    with pytest.raises(re.error):
        RuleSet.with_extra([broken])


def test_the_memory_setting_of_the_plugins_section_is_read_and_a_wrong_one_ignored(
    tmp_path: Path,
) -> None:
    """``errors report`` reads the project lazily: the section is still read when written
    (through the typed configuration), and a wrong value still means the default."""
    import loopctl
    from loopctl_context_errors.reportcmd import configured_memory_path

    assert configured_memory_path(loopctl.load_project(tmp_path)) == ""
    (tmp_path / "loopctl.toml").write_text('[plugins.context-errors]\nmemory_path = "m.db"\n')
    assert configured_memory_path(loopctl.load_project(tmp_path)) == "m.db"
    (tmp_path / "loopctl.toml").write_text("[plugins.context-errors]\nmemory = false\n")
    assert configured_memory_path(loopctl.load_project(tmp_path)) == "off"
    (tmp_path / "loopctl.toml").write_text("[plugins.context-errors]\nmemory_path = 3\n")
    assert configured_memory_path(loopctl.load_project(tmp_path)) == ""


@pytest.mark.slow
def test_a_memory_url_with_an_encoded_setting_name_is_refused_without_its_value(
    tmp_path: Path,
) -> None:
    """libpq reads ``%70assword`` as ``password``; the redactor of ``config show`` reads it as
    written: such a URL is a config error that names the key, never the value."""
    secret = "S3cretQQ77zz"
    (tmp_path / "loopctl.toml").write_text(
        "[plugins.context-errors]\n"
        f'memory_url = "postgresql://loop@db.example/mem?%70assword={secret}"\n',
        encoding="utf-8",
    )
    done = loopctl("config", "show", cwd=tmp_path)
    assert done.returncode != 0
    assert "memory_url" in done.stderr
    assert secret not in done.stdout + done.stderr
