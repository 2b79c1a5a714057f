"""``[plugins.otel]``: bad values stop the run before it starts, naming the key; the parsers of
outside input (headers, endpoints, OTEL_* values) never raise anything else."""

from __future__ import annotations

import math
import string
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from otel_testkit import DONE, FIX, PLUGINS

from loopctl_otel.config import OtelConfig
from loopctl_otel.headers import HeaderError, format_headers, parse_env_headers, parse_headers
from loopctl_otel.peers import CONTEXT_USAGE
from loopctl_otel.urls import (
    MAX_TIMEOUT_S,
    EndpointError,
    check_endpoint,
    env_timeout_s,
    signal_endpoint,
)


@pytest.mark.parametrize(
    ("section", "key", "words"),
    [
        ({"exporter": "zipkin"}, "plugins.otel.exporter", "'otlp', 'console', 'none'"),
        ({"endpoint": "localhost:4318"}, "plugins.otel.endpoint", "http(s) URL"),
        ({"endpoint": "http://host:99999"}, "plugins.otel.endpoint", "not a URL"),
        ({"endpoint": "http://c:4318/v1/traces"}, "plugins.otel.endpoint", "'http://c:4318'"),
        ({"headers": "no-equals-sign"}, "plugins.otel.headers", "key=value"),
        ({"headers": {"x-key": "line\nbreak"}}, "plugins.otel.headers", "printable ASCII"),
        ({"headers": {"x-key": 5}}, "plugins.otel.headers", "string value"),
        ({"headers": 5}, "plugins.otel.headers", "a table of strings"),
        ({"timeout_s": 0}, "plugins.otel.timeout_s", "above 0"),
        ({"timeout_s": "soon"}, "plugins.otel.timeout_s", "number"),
        ({"traces": "yes"}, "plugins.otel.traces", "boolean"),
        ({"goal_max_chars": -1}, "plugins.otel.goal_max_chars", "0 (no goal) or more"),
        ({"service_name": " "}, "plugins.otel.service_name", "empty"),
        ({"endpont": "http://x"}, "plugins.otel", "endpont"),
    ],
)
def test_a_bad_value_names_its_key(
    run_loop: Any, section: dict[str, Any], key: str, words: str
) -> None:
    with pytest.raises(Exception) as caught:
        run_loop(
            "make add add",
            turns=[[FIX, DONE]],
            plugins=PLUGINS,
            config={"plugins": {"otel": section}},
        )
    message = str(caught.value)
    assert f"{key}:" in message or f"{key} " in message, message
    assert words in message, message
    assert type(caught.value).__name__ == "ConfigError"


def test_the_defaults() -> None:
    config = OtelConfig()
    assert (config.traces, config.metrics, config.exporter) == (True, True, "otlp")
    assert config.endpoint is None
    assert config.service_name is None
    assert config.timeout_s is None
    assert config.header_map == {}
    assert config.use_global_provider is True
    assert "agent.rate_limit_waiting" in config.exclude_events
    if CONTEXT_USAGE is not None:  # the context monitor's reading, through its constant
        assert CONTEXT_USAGE in config.exclude_events


def test_without_the_context_monitor_otel_loads_and_excludes_only_core_events() -> None:
    """The peers' constants are optional imports: with loopctl-context-monitor missing, the
    config still loads and its default names no event of that plugin."""
    code = (
        "import sys\n"
        "sys.modules['loopctl_context_monitor'] = None\n"
        "sys.modules['loopctl_context_monitor.events'] = None\n"
        "from loopctl_otel.config import OtelConfig\n"
        "from loopctl_otel.peers import CONTEXT_USAGE\n"
        "print(CONTEXT_USAGE, OtelConfig().exclude_events)\n"
    )
    found = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert found.strip() == "None ['agent.rate_limit_waiting']"


def test_headers_in_string_form_are_decoded() -> None:
    config = OtelConfig(headers="Authorization=Bearer%20abc, x-team = loops ,")
    assert config.header_map == {"authorization": "Bearer abc", "x-team": "loops"}


def test_the_endpoint_is_normalised_and_resolved_per_signal() -> None:
    assert check_endpoint(" http://collector:4318/ ") == "http://collector:4318"
    assert signal_endpoint("traces", "http://c:4318", {}) == "http://c:4318/v1/traces"
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "https://e:1/base/"}
    assert signal_endpoint("metrics", None, env) == "https://e:1/base/v1/metrics"
    env["OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"] = "https://m:2/custom"
    assert signal_endpoint("metrics", None, env) == "https://m:2/custom"
    assert signal_endpoint("traces", None, {}) == "http://localhost:4318/v1/traces"


def test_the_timeout_from_the_environment() -> None:
    assert env_timeout_s("traces", {}) == 10.0
    assert env_timeout_s("traces", {"OTEL_EXPORTER_OTLP_TIMEOUT": "3"}) == 3.0
    assert env_timeout_s("traces", {"OTEL_EXPORTER_OTLP_TIMEOUT": "x"}) == 10.0
    assert (
        env_timeout_s(
            "traces", {"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "2", "OTEL_EXPORTER_OTLP_TIMEOUT": "3"}
        )
        == 2.0
    )
    assert env_timeout_s("traces", {"OTEL_EXPORTER_OTLP_TIMEOUT": "10000"}) == MAX_TIMEOUT_S


# --- property tests for the parsers of outside input -------------------------------------------

NAME_CHARS = string.ascii_letters + string.digits + "-_.!#$%&'*+^`|~"
names = st.text(alphabet=NAME_CHARS, min_size=1, max_size=20)
values = st.text(
    alphabet=string.printable.replace("\r", "")
    .replace("\n", "")
    .replace("\x0b", "")
    .replace("\x0c", ""),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(names, values, max_size=6))
def test_headers_survive_the_string_form(headers: dict[str, str]) -> None:
    expected: dict[str, str] = {}
    for name, value in headers.items():
        expected[name.lower()] = value.strip()
    assert parse_headers(format_headers(headers)) == expected


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=120))
def test_any_headers_string_parses_or_says_why(text: str) -> None:
    problem = ""
    try:
        parsed = parse_headers(text)
    except HeaderError as exc:
        problem = str(exc)
        parsed = {}
    assert problem or all(name == name.lower() and name for name in parsed)
    assert not problem or "header" in problem or "key=value" in problem
    good, problems = parse_env_headers(text)  # the environment: never raises
    assert all(isinstance(p, str) and p for p in problems)
    assert all(isinstance(v, str) for v in good.values())


@settings(max_examples=150, deadline=None)
@given(
    st.text(max_size=80)
    | st.from_regex(r"https?://[a-z0-9.\-]{1,20}(:[0-9]{1,6})?(/[a-z/]{0,10})?", fullmatch=True)
)
def test_any_endpoint_is_accepted_or_refused_with_a_reason(text: str) -> None:
    try:
        url = check_endpoint(text)
    except EndpointError as exc:
        problem = str(exc)
        url = ""
    else:
        problem = ""
    if problem:
        assert repr(text) in problem  # the message shows what was written
    else:
        assert url.startswith(("http://", "https://"))
        assert not url.endswith("/")
        assert signal_endpoint("traces", url, {}) == f"{url}/v1/traces"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=30), st.text(max_size=30))
def test_any_timeout_variable_gives_a_usable_timeout(specific: str, general: str) -> None:
    env = {"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": specific, "OTEL_EXPORTER_OTLP_TIMEOUT": general}
    timeout = env_timeout_s("traces", env)
    assert math.isfinite(timeout)
    assert 0 < timeout <= MAX_TIMEOUT_S
