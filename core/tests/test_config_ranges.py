"""Bad numbers in the config: every timeout and limit is range-checked when the config loads
(finite, positive, at most a sane maximum), whichever source sets it, and the error names the
key path and the source; the CLI turns it into exit 2 before anything runs."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopctl.config import ConfigError, load_config
from loopctl.testing import make_project, python_test_cmd

#: Every number in the core config: key path -> (type, smallest allowed, largest allowed).
#: For floats the smallest is exclusive (a number of seconds must be more than 0).
NUMBERS: dict[str, tuple[type, float, float]] = {
    "limits.max_iterations": (int, 1, 100_000),
    "limits.max_restarts": (int, 0, 10),
    "limits.agent_timeout_s": (float, 0, 7 * 86400),
    "limits.idle_timeout_s": (float, 0, 7 * 86400),
    "limits.agent_exit_grace_s": (float, 0, 7 * 86400),
    "limits.wall_clock_s": (float, 0, 30 * 86400),
    "limits.test_timeout_s": (float, 0, 7 * 86400),
    "limits.max_tokens": (int, 1, 10**12),
    "limits.max_cost_usd": (float, 0, 1_000_000),
    "limits.max_agent_crashes": (int, 0, 1000),
    "limits.test_output_bytes": (int, 1, 100_000_000),
    "limits.agent_log_bytes": (int, 0, 1_000_000_000),
    "prompt.budget_chars": (int, 500, 10_000_000),
    "stuck.window": (int, 2, 1000),
}
INT64 = 2**63 - 1


def bad_values(kind: type, low: float, high: float) -> st.SearchStrategy[Any]:
    """Values ``kind`` must refuse: out of range, not finite, of the wrong type."""
    common: list[st.SearchStrategy[Any]] = [
        st.booleans(),
        st.sampled_from([math.nan, math.inf, -math.inf]),
    ]
    if kind is int:
        return st.one_of(
            *common,
            st.integers(min_value=-INT64, max_value=int(low) - 1),
            st.integers(min_value=int(high) + 1, max_value=INT64),
            st.floats(allow_nan=False, allow_infinity=False),  # 3.0 is not an integer either
        )
    return st.one_of(
        *common,
        st.floats(max_value=low, allow_nan=False),
        st.floats(min_value=high, exclude_min=True, allow_nan=False),
        st.integers(min_value=-INT64, max_value=int(low)),
        st.integers(min_value=int(high) + 1, max_value=INT64),
        st.sampled_from([1e7, 1e300, 86400.0 * 365]),
    )


@st.composite
def bad_settings(draw: st.DrawFn) -> tuple[str, Any]:
    path = draw(st.sampled_from(sorted(NUMBERS)))
    return path, draw(bad_values(*NUMBERS[path]))


def toml_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return repr(value)


def env_name(path: str) -> str:
    return "LOOPCTL_" + path.upper().replace(".", "__")


def load_from(root: Path, source: str, path: str, value: Any) -> None:
    """Load the config of ``root`` with ``path`` set to ``value`` by ``source``."""
    table, key = path.split(".")
    config = root / "loopctl.toml"
    config.unlink(missing_ok=True)
    if source == "file":
        config.write_text(f"[{table}]\n{key} = {toml_text(value)}\n", encoding="utf-8")
        load_config(root, env={})
    elif source == "env":
        load_config(root, env={env_name(path): toml_text(value)})
    elif source == "command line":
        load_config(root, env={}, overrides={path: value})
    else:  # a command-line flag as text, the way plugins' run options arrive
        load_config(root, env={}, overrides={path: toml_text(value)})


SOURCES = ["file", "env", "command line", "command line text"]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("ranges")
    (directory / ".git").mkdir()  # discovery stops here
    return directory


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(setting=bad_settings(), source=st.sampled_from(SOURCES))
def test_a_bad_number_is_refused_naming_the_key_and_its_source(
    root: Path, setting: tuple[str, Any], source: str
) -> None:
    path, value = setting
    with pytest.raises(ConfigError) as info:
        load_from(root, source, path, value)
    where = {
        "file": "loopctl.toml: ",
        "env": f"environment variable {env_name(path)}: ",
        "command line": "command line: ",
        "command line text": "command line: ",
    }[source]
    lines = str(info.value).splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"{where}{path}: "), lines[0]


@pytest.mark.parametrize("path", sorted(NUMBERS))
@pytest.mark.parametrize("source", SOURCES)
def test_the_bounds_themselves_are_allowed(root: Path, path: str, source: str) -> None:
    kind, low, high = NUMBERS[path]
    smallest = low if kind is int else 0.001
    for value in (kind(smallest), kind(high)):
        load_from(root, source, path, value)  # no error


@pytest.mark.slow
@pytest.mark.parametrize("value", ["1e7", "inf", "nan", "-1", "0"])
def test_run_with_a_bad_timeout_is_a_usage_error_before_anything_runs(
    tmp_path: Path, value: str
) -> None:
    """The campaign's case: ``idle_timeout_s`` or ``agent_timeout_s`` of 1e7 or inf crashed the
    supervisor with an OverflowError (exit 1) while loop.end said 13."""
    project = make_project(tmp_path / "project")
    project.write("loopctl.toml", f"[limits]\nidle_timeout_s = {value}\n")
    argv = [sys.executable, "-m", "loopctl", "run", "goal", "--test-cmd", python_test_cmd()]
    for extra in ([], ["--agent-timeout", value]):
        done = subprocess.run(
            [*argv, "--agent-cmd", "true", *extra],
            cwd=project.path,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 2, (done.stdout, done.stderr)
        assert "Traceback" not in done.stderr
        assert "loopctl: error: loopctl.toml: limits.idle_timeout_s: must be" in done.stderr
        if extra:
            assert "loopctl: error: command line: limits.agent_timeout_s: must be" in done.stderr
        assert not (project.path / ".loopctl").exists()


def test_model_windows_are_bounded(root: Path) -> None:
    (root / "loopctl.toml").write_text('[models]\n"big" = 1000000000\n', encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(root, env={})
    assert str(info.value) == (
        "loopctl.toml: models.big: must be a context window in tokens (1 to 100,000,000), "
        "got 1,000,000,000"
    )
    (root / "loopctl.toml").unlink()


def test_reference_names_every_bound() -> None:
    """The generated config reference shows each number's range (docs/reference/configuration.md
    is made from these docs)."""
    from loopctl.config import LoopctlConfig, describe_fields

    docs = {field.path: field.doc for field in describe_fields(LoopctlConfig)}
    for path in NUMBERS:
        assert any(word in docs[path] for word in ("at most", " to ")), (path, docs[path])
