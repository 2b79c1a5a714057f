"""Secrets never leave a log: not in reports, events, the ledger or the memory."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from loopctl import Redactor, redact
from loopctl_context_errors.categories import categorize
from loopctl_context_errors.ledger import Ledger
from loopctl_context_errors.memory import FailureMemory
from loopctl_context_errors.report import (
    build_report,
    render_github,
    render_json,
    render_markdown,
    render_plain,
    render_terminal,
)

MARK = Redactor.MARK
ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
UPPER_DIGITS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def core(alphabet: str, size: int) -> st.SearchStrategy[str]:
    """A random secret body with at least one digit (so it cannot be an ordinary word)."""
    return st.text(alphabet=alphabet, min_size=size, max_size=size).map(lambda s: s[:-1] + "7")


# (secret as it appears in the log, the part that must never be seen again)
SECRETS = st.one_of(
    core(ALNUM, 40).map(lambda c: (f"sk-ant-api03-{c}", c)),
    core(ALNUM, 36).map(lambda c: (f"ghp_{c}", c)),
    core(ALNUM + "_", 40).map(lambda c: (f"github_pat_{c}", c)),
    core(ALNUM, 24).map(lambda c: (f"glpat-{c}", c)),
    core(UPPER_DIGITS, 16).map(lambda c: (f"AKIA{c}", c)),
    core(ALNUM, 35).map(lambda c: (f"AIza{c}", c)),
    core(ALNUM, 36).map(lambda c: (f"npm_{c}", c)),
    core(ALNUM, 24).map(lambda c: (f"xoxb-{c}", c)),
    core(ALNUM, 24).map(lambda c: (f"sk_live_{c}", c)),
    core(ALNUM, 20).map(lambda c: (f"eyJhbGciOiJIUzI1NiJ9.eyJzdWIi{c}.{c}sig", c)),
    core(ALNUM, 20).map(lambda c: (f"Authorization: Bearer {c}", c)),
    core(ALNUM, 20).map(lambda c: (f"authorization: Basic {c}", c)),
    core(ALNUM, 16).map(lambda c: (f"https://deploy:{c}@git.example.com/repo.git", c)),
    core(ALNUM, 16).map(lambda c: (f"postgres://app:{c}@db.internal:5432/app", c)),
    core(ALNUM, 14).map(lambda c: (f"DB_PASSWORD={c}", c)),
    core(ALNUM, 14).map(lambda c: (f'"password": "{c}"', c)),
    core(ALNUM, 20).map(lambda c: (f"api_key: {c}", c)),
    core(ALNUM, 20).map(lambda c: (f"client_secret={c}&grant=x", c)),
    core(ALNUM, 20).map(lambda c: (f"--token {c}", c)),
    core(ALNUM, 20).map(lambda c: (f"X_AUTH_TOKEN={c}", c)),
)
NOISE = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=80)
LINE_SHAPES = st.sampled_from(
    [
        "{noise} {secret}",
        "E       AssertionError: request failed with {secret}",
        "TypeError: cannot use {secret} {noise}",
        '  File "/app/x.py", line 3, in f: {secret}',
        "ConnectionRefusedError: {secret} refused",
        "{secret}",
    ]
)


def _log(shape: str, secret: str, noise: str) -> str:
    line = shape.format(secret=secret, noise=noise.replace("{", "").replace("}", ""))
    return f"Traceback (most recent call last):\n{noise}\n{line}\nFileNotFoundError: 'x'\n{line}\n"


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("Authorization: Bearer abc123def456ghi789", "Authorization: Bearer [REDACTED]"),
        ("https://bob:hunter22@example.com/x", "https://bob:[REDACTED]@example.com/x"),
        ("PASSWORD=letmein now", "PASSWORD=[REDACTED] now"),
        ("SyntaxError: Unexpected token: ')'", "SyntaxError: Unexpected token: ')'"),
        ("KeyError: 'token'", "KeyError: 'token'"),
        ("assert key == 3", "assert key == 3"),
    ],
)
def test_examples(text: str, kept: str) -> None:
    assert redact(text) == kept


def test_private_key_blocks_go_whole_and_cut_ones_too() -> None:
    body = "MIIEowIBAAKCAQEAx4Yz9Qk2yVbq8Lq7Yv0Q3zJ2Zf8Xk1Yh2Q9Wc4Tn6Pa8Rb3Sd5Uf7Vg9Xh1Yj3"
    block = f"-----BEGIN RSA PRIVATE KEY-----\n{body}\n{body}\n-----END RSA PRIVATE KEY-----"
    assert body not in redact(f"before\n{block}\nafter")
    assert redact(f"before\n{block}\nafter").startswith("before\n")
    assert body not in redact(f"{body}\n{body}\n-----END RSA PRIVATE KEY-----")


@settings(max_examples=200, deadline=None)
@given(SECRETS, LINE_SHAPES, NOISE)
def test_redact_removes_every_generated_secret(
    secret: tuple[str, str], shape: str, noise: str
) -> None:
    text, hidden = secret
    assume(hidden not in noise)
    out = redact(_log(shape, text, noise))
    assert hidden not in out
    assert MARK in out
    assert redact(out) == out  # idempotent


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(SECRETS, LINE_SHAPES, NOISE)
def test_no_output_path_leaks_a_secret(
    tmp_path: Path, secret: tuple[str, str], shape: str, noise: str
) -> None:
    text, hidden = secret
    assume(hidden not in noise)
    log = _log(shape, text, noise)
    memory = FailureMemory(tmp_path / f"m-{abs(hash(hidden))}.sqlite3")
    found = categorize(log)
    failure = memory.record_failure(
        decisive=found.decisive_lines, category=found.category.value, rule=found.rule_name,
        stage=f"tests {text}", project=f"proj {text}",
    )  # fmt: skip
    if failure is not None:
        memory.record_fix(failure, files=[f"a {text}"], suggestion=f"use {text}", summary=text)
    report = build_report(
        log, stage=f"build {text}", goal=f"goal {text}", issue=text, memory=memory,
        failing_tests=[f"t::{text}"],
    )  # fmt: skip
    outputs = [
        render_plain(report),
        render_terminal(report, color=True),
        render_markdown(report),
        render_github(report),
        json.dumps(render_json(report)),
    ]
    ledger = Ledger(tmp_path / f"state-{abs(hash(hidden))}")
    ledger.record_suggestion(
        "s1", category="UNKNOWN", stage=text, actions=[s.to_json() for s in report.suggestions],
        failing_tests=[text],
    )  # fmt: skip
    outputs.append(ledger.path.read_text(encoding="utf-8"))
    conn = sqlite3.connect(memory.path)
    for row in conn.execute("SELECT * FROM failures"):
        outputs.append(json.dumps(row))
    conn.close()
    for out in outputs:
        assert hidden not in out
