"""``loopctl fleet …`` without a server: the flags, the connection settings, one clear line when
there is no server or a port is taken, and no temporalio import where it is not needed."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fleet_testkit import free_port

from loopctl_fleet import cli, service
from loopctl_fleet.connect import ConnectError, ConnectOptions, connect_kwargs, unreachable


def fleet(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``loopctl fleet ARGS`` in a subprocess, with the fleet plugin allowed (the tests' plugin
    autoload is off)."""
    return subprocess.run(
        [sys.executable, "-m", "loopctl", "fleet", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "LOOPCTL_PLUGINS": "fleet", **(env or {})},
        timeout=120,
    )


def test_status_without_a_server_is_one_line_and_exit_1() -> None:
    port = free_port()
    done = fleet("status", "--address", f"127.0.0.1:{port}")
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"loopctl: error: no Temporal server at 127.0.0.1:{port} (connection refused): "
        "start one with `loopctl fleet up`"
    ]


def test_a_bad_task_file_is_refused_whole_before_any_connection(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.toml"
    tasks.write_text(
        '[[task]]\nid = "ok"\nrepo = "r"\ngoal = "g"\n'
        '[[task]]\nid = "bad"\nrepo = "r"\ngoal = "g"\n[task.limits]\nmax_iteration = 3\n'
    )
    # no server at that address: exit 2 and no connection error show nothing was tried
    done = fleet("submit", str(tasks), "--address", f"127.0.0.1:{free_port()}")
    assert done.returncode == 2
    assert "tasks.toml: task[1]: limits: unknown key 'max_iteration'" in done.stderr
    assert "no Temporal server" not in done.stderr


def test_submit_needs_a_file_or_flags_not_both(tmp_path: Path) -> None:
    assert fleet("submit").returncode == 2
    both = fleet("submit", str(tmp_path / "t.toml"), "--goal", "g")
    assert both.returncode == 2
    assert "not both (--goal)" in both.stderr


def test_submit_flags_are_checked_as_a_task_file_is() -> None:
    done = fleet("submit", "--goal", "g", "--max-iterations", "0", "--session", "sometimes")
    assert done.returncode == 2
    assert "submit: repo: missing" in done.stderr


@pytest.mark.slow
def test_the_task_flags_are_the_setting_flags_of_loopctl_run() -> None:
    run_help = subprocess.run(
        [sys.executable, "-m", "loopctl", "run", "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    ).stdout
    for flag in cli.RUN_FLAGS:
        assert flag.decls[0] in run_help, flag
    submit_help = fleet("submit", "--help", env={"COLUMNS": "200"}).stdout
    for flag in (*cli.RUN_FLAGS, *cli.TASK_FLAGS, *cli.CONNECTION):
        assert flag.decls[0].split("/")[0] in submit_help, flag


def test_tasks_from_flags_nest_the_limits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    values: dict[str, Any] = {flag.name: None for flag in (*cli.TASK_FLAGS, *cli.RUN_FLAGS)}
    values.update(repo="remote.git", goal="Fix it", max_iterations=3, agent_cmd="true", id="t9")
    [task] = cli.tasks_from_flags(values)
    assert task.id == "t9"
    assert task.repo == str(tmp_path / "remote.git")
    assert task.settings == {"limits": {"max_iterations": 3}, "agent_cmd": "true"}


def test_plugins_list_help_and_check_do_not_import_temporalio(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.toml"
    tasks.write_text('[[task]]\nid = "a"\nrepo = "r"\ngoal = "g"\n')
    code = (
        "import sys\n"
        "from loopctl.cli.app import main\n"
        "for args in (['plugins', 'list'], ['fleet', '--help'],\n"
        f"             ['fleet', 'check', {str(tasks)!r}]):\n"
        "    assert main(args) == 0, args\n"
        "assert 'temporalio' not in sys.modules, 'temporalio imported'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "LOOPCTL_PLUGINS": "fleet"},
    )
    assert done.returncode == 0, done.stderr


def test_up_on_a_port_in_use_says_so_in_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = fleet(
            "up", "--port", str(port), "--ui-port", str(free_port()),
            env={"XDG_STATE_HOME": str(tmp_path / "state")},
        )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"loopctl: error: port {port} is in use (another Temporal server?): "
        "choose another with --port"
    ]
    assert not (tmp_path / "state" / "loopctl-fleet" / "default" / service.SERVER_FILE).exists()


def test_down_when_nothing_runs(tmp_path: Path) -> None:
    done = fleet("down", "--name", "nothing", env={"XDG_STATE_HOME": str(tmp_path)})
    assert done.returncode == 0
    assert "is not running here" in done.stdout


# --- connection settings ---------------------------------------------------------------------


@pytest.fixture
def no_temporal_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    for name in list(os.environ):
        if name.startswith("TEMPORAL_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("TEMPORAL_CONFIG_FILE", str(tmp_path / "none.toml"))
    return monkeypatch


def test_the_default_is_fleet_ups_local_server(no_temporal_env: pytest.MonkeyPatch) -> None:
    kwargs = connect_kwargs(ConnectOptions())
    assert kwargs["target_host"] == "127.0.0.1:7233"
    assert kwargs["namespace"] == "default"
    assert "api_key" not in kwargs


def test_temporal_environment_then_flags(no_temporal_env: pytest.MonkeyPatch) -> None:
    no_temporal_env.setenv("TEMPORAL_ADDRESS", "env-host:7233")
    no_temporal_env.setenv("TEMPORAL_NAMESPACE", "env-ns")
    no_temporal_env.setenv("TEMPORAL_API_KEY", "k-from-env")
    kwargs = connect_kwargs(ConnectOptions())
    assert (kwargs["target_host"], kwargs["namespace"]) == ("env-host:7233", "env-ns")
    assert kwargs["api_key"] == "k-from-env"
    assert kwargs["tls"] is True  # an API key means TLS, as Temporal's own tools do
    flags = connect_kwargs(ConnectOptions(address="flag-host:1", namespace="ns", tls=False))
    assert (flags["target_host"], flags["namespace"], flags["tls"]) == ("flag-host:1", "ns", False)
    assert connect_kwargs(ConnectOptions(use_env=False))["target_host"] == "127.0.0.1:7233"


def test_the_api_key_comes_from_the_variable_named(no_temporal_env: pytest.MonkeyPatch) -> None:
    no_temporal_env.setenv("MY_KEY", "secret-value")
    assert connect_kwargs(ConnectOptions(api_key_env="MY_KEY"))["api_key"] == "secret-value"
    with pytest.raises(ConnectError, match="--api-key-env UNSET_KEY: that variable is not set"):
        connect_kwargs(ConnectOptions(api_key_env="UNSET_KEY"))


def test_mtls_files(no_temporal_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "c.pem").write_bytes(b"CERT")
    (tmp_path / "k.pem").write_bytes(b"KEY")
    tls = connect_kwargs(ConnectOptions(tls_cert=tmp_path / "c.pem", tls_key=tmp_path / "k.pem"))[
        "tls"
    ]
    assert (tls.client_cert, tls.client_private_key, tls.server_root_ca_cert) == (
        b"CERT",
        b"KEY",
        None,
    )
    with pytest.raises(ConnectError, match="go together"):
        connect_kwargs(ConnectOptions(tls_cert=tmp_path / "c.pem"))
    with pytest.raises(ConnectError, match="--tls-ca"):
        connect_kwargs(ConnectOptions(tls_ca=tmp_path / "missing.pem"))


def test_unreachable_names_the_address_and_what_to_do() -> None:
    refused = RuntimeError("Failed client connect: ... ConnectionRefused ... Connection refused")
    assert unreachable("127.0.0.1:7233", refused) == (
        "no Temporal server at 127.0.0.1:7233 (connection refused): "
        "start one with `loopctl fleet up`"
    )
    remote = unreachable("t.example.com:7233", RuntimeError("dns error: failed to lookup"))
    assert remote == (
        "no Temporal server at t.example.com:7233 (unknown host) "
        "(check --address, --tls and the API key)"
    )


# --- processes recorded by pid and start time ------------------------------------------------


def test_a_record_names_one_process_not_a_reused_pid(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                            stdin=subprocess.PIPE)  # fmt: skip
    try:
        record = {"pid": proc.pid, "started": service.start_time(proc.pid)}
        assert record["started"] is not None
        assert service.alive(record)
        assert not service.alive({**record, "started": "another process's"})
        service.write_record(tmp_path / "p.json", record)
        assert service.running(tmp_path / "p.json") == record
        service.stop(record)
        assert not service.alive(record)
        assert service.running(tmp_path / "p.json") is None
    finally:
        proc.kill()
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait()


def test_port_free() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        assert not service.port_free(taken.getsockname()[1])
    assert service.port_free(free_port())


# --- rendering -------------------------------------------------------------------------------


def test_rows_render_plain_and_rich_with_terminal_control_removed() -> None:
    from rich.console import Console

    from loopctl_fleet.status import TaskRow, plain_table, rich_table

    rows = [
        TaskRow("t1", "complete", 2, 1200, 0.5, "loopctl/t1", "the tests pass"),
        TaskRow("t2", "failed: auth", reason="bad key \x1b[31mred\x1b[0m\nsecond line"),
    ]
    text = plain_table(rows).splitlines()
    assert text[0].split() == ["TASK", "STATE", "ITERATION", "TOKENS", "COST", "BRANCH", "REASON"]
    assert text[1].split() == [
        "t1",
        "complete",
        "2",
        "1200",
        "$0.50",
        "loopctl/t1",
        "the",
        "tests",
        "pass",
    ]
    assert "\x1b" not in text[2]
    assert text[2].endswith("bad key red")  # the reason's first line only
    console = Console(record=True, width=120, color_system=None)
    console.print(rich_table(rows))
    shown = console.export_text()
    assert "loopctl/t1" in shown
    assert "failed: auth" in shown


# --- [plugins.fleet] ------------------------------------------------------------------------


def test_the_config_section_comes_after_flags_and_environment(
    no_temporal_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from loopctl_fleet.config import FleetConfig

    no_temporal_env.setenv("CFG_KEY", "from-config-var")
    config = FleetConfig(address="cfg-host:7233", namespace="cfg-ns", api_key_env="CFG_KEY")
    kwargs = connect_kwargs(ConnectOptions(config=config))
    assert (kwargs["target_host"], kwargs["namespace"]) == ("cfg-host:7233", "cfg-ns")
    assert (kwargs["api_key"], kwargs["tls"]) == ("from-config-var", True)
    no_temporal_env.setenv("TEMPORAL_ADDRESS", "env-host:7233")
    assert connect_kwargs(ConnectOptions(config=config))["target_host"] == "env-host:7233"
    flags = connect_kwargs(ConnectOptions(address="flag-host:1", config=config))
    assert flags["target_host"] == "flag-host:1"
    with pytest.raises(ConnectError, match=r"plugins\.fleet\.tls_cert and .*tls_key go together"):
        connect_kwargs(ConnectOptions(config=FleetConfig(tls_cert="c.pem")))


@pytest.mark.slow
def test_commands_read_the_projects_config_section(tmp_path: Path) -> None:
    port = free_port()
    (tmp_path / "loopctl.toml").write_text(
        f'[plugins.fleet]\nfleet = "team"\naddress = "127.0.0.1:{port}"\n'
    )
    env = {"TEMPORAL_CONFIG_FILE": str(tmp_path / "none.toml"), "TEMPORAL_ADDRESS": ""}
    done = subprocess.run(
        [sys.executable, "-m", "loopctl", "fleet", "status"],
        capture_output=True, text=True, cwd=tmp_path,
        env={**os.environ, "LOOPCTL_PLUGINS": "fleet", **env},
    )  # fmt: skip
    assert done.returncode == 1
    assert f"no Temporal server at 127.0.0.1:{port}" in done.stderr
    down = subprocess.run(
        [sys.executable, "-m", "loopctl", "fleet", "down"],
        capture_output=True, text=True, cwd=tmp_path,
        env={**os.environ, "LOOPCTL_PLUGINS": "fleet", "XDG_STATE_HOME": str(tmp_path)},
    )  # fmt: skip
    assert down.stdout == "Fleet 'team' is not running here.\n"
    (tmp_path / "loopctl.toml").write_text('[plugins.fleet]\nadress = "x"\n')
    typo = subprocess.run(
        [sys.executable, "-m", "loopctl", "fleet", "status"],
        capture_output=True, text=True, cwd=tmp_path,
        env={**os.environ, "LOOPCTL_PLUGINS": "fleet"},
    )  # fmt: skip
    assert typo.returncode == 2
    assert "plugins.fleet" in typo.stderr
    assert "adress" in typo.stderr


def test_a_secret_refusal_is_readable_and_only_values_are_redacted(tmp_path: Path) -> None:
    token = "ghp_" + "a1B2" * 9
    tasks = tmp_path / "secret.toml"  # a file name the redactor could take for a key
    tasks.write_text(
        f'[[task]]\nid = "s1"\nrepo = "/r"\ngoal = "g"\ntest_cmd = "true"\n'
        f'agent_cmd = "env TOKEN={token} true"\n'
        f'[task.agents.claude.env]\nANTHROPIC_API_KEY = "{token}"\n'
        '[task.limits]\nmax_iterations = "password=hunter2hunter2"\n'
    )
    done = fleet("check", str(tasks))
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert token not in done.stderr
    assert "hunter2hunter2" not in done.stderr  # a value in a message is still redacted
    for where in ("task[0].agent_cmd", "task[0].agents.claude.env.ANTHROPIC_API_KEY"):
        assert (
            f"loopctl: error: secret.toml: {where}: looks like a secret, and tasks are kept in "
            "the Temporal server's history (its Web UI shows them): give the worker the secret "
            "in its environment"
        ) in lines, lines
    [limits] = [line for line in lines if "max_iterations: expected" in line]
    assert limits.startswith("loopctl: error: secret.toml: task[0]: "), lines


def test_plain_status_shows_a_reason_whole() -> None:
    from loopctl_fleet.status import TaskRow, plain_table

    reason = "the agent failed 3 times in a row; last error: " + "word " * 40 + "the end"
    table = plain_table([TaskRow("t1", "failed: agent_crash", reason=reason + "\nmore")])
    assert table.splitlines()[1].endswith(reason.strip())
