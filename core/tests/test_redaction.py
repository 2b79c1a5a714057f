"""The one redactor (``loopctl.redact``), the withheld environment (``loopctl.child_environment``)
and the one sanitiser (``loopctl.sanitize``)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from loopctl import Redactor, child_environment, redact, redaction, sanitize
from loopctl.redaction import StreamRedactor, redact_data
from loopctl.terminal import json_for_terminal, sanitize_line
from loopctl.withhold import ENV_VARIABLE, set_withheld

MARK = Redactor.MARK
ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
UPPER_DIGITS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
HEX = "0123456789abcdef"
LOWER = "abcdefghijklmnopqrstuvwxyz"


def core(alphabet: str, size: int, end: str = "7") -> st.SearchStrategy[str]:
    """A random secret body ending in ``end`` (a digit, so it cannot be an ordinary word)."""
    return st.text(alphabet=alphabet, min_size=size, max_size=size).map(lambda s: s[:-1] + end)


def mixed(size: int) -> st.SearchStrategy[str]:
    """A body with an upper, a lower case letter and a digit, like a generated key."""
    return core(ALNUM, size - 3).map(lambda s: "Qz" + s + "9")


# (kind, strategy of (the secret as it appears in a log, the part that must never be seen))
KINDS: dict[str, st.SearchStrategy[tuple[str, str]]] = {
    "aws access key id": core(UPPER_DIGITS, 16, "Q").map(lambda c: (f"AKIA{c}", c)),
    "aws temporary key id": core(UPPER_DIGITS, 16, "Q").map(lambda c: (f"ASIA{c}", c)),
    "aws secret key, bare": mixed(40).map(lambda c: (f"aws secret {c}", c)),
    "aws secret key, assigned": mixed(40).map(lambda c: (f"AWS_SECRET_ACCESS_KEY={c}", c)),
    "github ghp_": core(ALNUM, 36).map(lambda c: (f"ghp_{c}", c)),
    "github gho_": core(ALNUM, 36).map(lambda c: (f"gho_{c}", c)),
    "github ghu_": core(ALNUM, 36).map(lambda c: (f"ghu_{c}", c)),
    "github ghs_": core(ALNUM, 36).map(lambda c: (f"ghs_{c}", c)),
    "github ghr_": core(ALNUM, 36).map(lambda c: (f"ghr_{c}", c)),
    "github_pat_": core(ALNUM + "_", 82).map(lambda c: (f"github_pat_{c}", c)),
    "gitlab glpat-": core(ALNUM, 20).map(lambda c: (f"glpat-{c}", c)),
    "gitlab deploy": core(ALNUM, 20).map(lambda c: (f"gldt-{c}", c)),
    "gitlab runner": core(ALNUM, 20).map(lambda c: (f"glrt-{c}", c)),
    "slack bot": core(ALNUM, 24).map(lambda c: (f"xoxb-1234567890-1234567890-{c}", c)),
    "slack webhook": core(ALNUM, 44).map(lambda c: (f"https://hooks.slack.com/services/{c}", c)),
    "stripe live": core(ALNUM, 24).map(lambda c: (f"sk_live_{c}", c)),
    "stripe restricted": core(ALNUM, 24).map(lambda c: (f"rk_test_{c}", c)),
    "google api key": core(ALNUM + "_-", 35).map(lambda c: (f"AIza{c}", c)),
    "jwt": core(ALNUM, 20).map(lambda c: (f"eyJhbGciOiJIUzI1NiJ9.eyJzdWIi{c}.{c}sig", c)),
    "pypi": core(ALNUM, 70).map(lambda c: (f"pypi-AgEIcHlwaS5vcmc{c}", c)),
    "sendgrid": core(ALNUM, 43).map(lambda c: (f"SG.abcdefghij0123456789ab.{c}", c)),
    "twilio api key": core(HEX, 32, "a").map(lambda c: (f"SK{c}", c)),
    "twilio account": core(HEX, 32, "b").map(lambda c: (f"AC{c}", c)),
    "telegram bot": core(ALNUM, 34).map(lambda c: (f"bot 123456789:A{c}", c)),
    "databricks": core(HEX, 32).map(lambda c: (f"dapi{c}", c)),
    "hugging face": core(LOWER, 34, "q").map(lambda c: (f"hf_{c}", c)),
    "hugging face org": core(LOWER, 34, "q").map(lambda c: (f"api_org_{c}", c)),
    "openai": core(ALNUM, 48).map(lambda c: (f"sk-proj-{c}", c)),
    "anthropic": core(ALNUM, 93).map(lambda c: (f"sk-ant-api03-{c}AA", c)),
    "npm": core(ALNUM, 36).map(lambda c: (f"npm_{c}", c)),
    "bearer header": core(ALNUM, 24).map(lambda c: (f"Authorization: Bearer {c}", c)),
    "basic header": core(ALNUM, 24).map(lambda c: (f"authorization: Basic {c}", c)),
    "bearer alone": core(ALNUM, 24).map(lambda c: (f"sent bearer {c} upstream", c)),
    "url password": core(ALNUM, 16).map(lambda c: (f"https://deploy:{c}@git.example.com/r", c)),
    "database url": core(ALNUM, 16).map(lambda c: (f"postgres://app:{c}@db:5432/app", c)),
    "password=": core(ALNUM, 14).map(lambda c: (f"DB_PASSWORD={c}", c)),
    "password json": core(ALNUM, 14).map(lambda c: (f'"password": "{c}"', c)),
    "secret:": core(ALNUM, 14).map(lambda c: (f"client_secret: {c}", c)),
    "api_key =": core(ALNUM, 20).map(lambda c: (f"api_key = '{c}'", c)),
    "token=": core(ALNUM, 20).map(lambda c: (f"X_AUTH_TOKEN={c}", c)),
    "--password flag": core(ALNUM, 14).map(lambda c: (f"--password {c}", c)),
    "--token flag": core(ALNUM, 20).map(lambda c: (f"--token {c}", c)),
}
SECRETS = st.sampled_from(sorted(KINDS)).flatmap(lambda kind: KINDS[kind])
NOISE = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60)
LINE_SHAPES = st.sampled_from(
    [
        "{noise} {secret}",
        "E       AssertionError: request failed with {secret}",
        '  File "/app/x.py", line 3, in f: {secret}',
        "{secret}",
        "[{secret}]",
        "  {secret}\t({noise})",
    ]
)


@pytest.mark.parametrize("kind", sorted(KINDS))
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_every_kind_is_masked(kind: str, data: st.DataObject) -> None:
    """Each kind on its own, so a kind the mixed test below rarely draws is still covered."""
    text, hidden = data.draw(KINDS[kind])
    out = redact(f"log line: {text} (end)")
    assert hidden not in out
    assert MARK in out


@settings(max_examples=300, deadline=None)
@given(SECRETS, LINE_SHAPES, NOISE)
def test_a_secret_of_every_kind_is_masked_in_any_line(
    secret: tuple[str, str], shape: str, noise: str
) -> None:
    text, hidden = secret
    assume(hidden not in noise)
    line = shape.format(secret=text, noise=noise.replace("{", "").replace("}", ""))
    out = redact(f"Traceback (most recent call last):\n{noise}\n{line}\nValueError: x\n")
    assert hidden not in out
    assert MARK in out
    assert redact(out) == out


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_redact_is_idempotent_and_never_raises(text: str) -> None:
    once = redact(text)
    assert redact(once) == once


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.one_of(st.none(), st.booleans(), st.integers(), st.text(), SECRETS.map(lambda s: s[0])),
        lambda children: st.one_of(
            st.lists(children, max_size=4), st.dictionaries(st.text(max_size=8), children)
        ),
        max_leaves=12,
    )
)
@example({"PWD": None})  # a secret's name with no value: once masked as `[REDACTED]` with the }
@example({"a": {"password": None}, "b": [{"secret": True}]})
def test_redacting_serialized_json_leaves_valid_json(data: object) -> None:
    """Journals are redacted as serialized lines: a match never leaves its JSON string."""
    for text in (json.dumps(data), json.dumps(data, ensure_ascii=False, indent=2)):
        json.loads(redact(text))
    json.dumps(redact_data(data))  # still plain JSON data


@pytest.mark.parametrize(
    "text",
    [
        "SyntaxError: Unexpected token: ')'",
        "KeyError: 'token'",
        "assert key == 3",
        "Basic usage of the tool",
        "bearer authentication required",
        "tests/test_api.py::test_login PASSED                     [ 50%]",
        "commit 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39",
        "password reset requested for alice",
        "see https://example.com:8080/path@v2",
        "AKIA is a prefix, AKIAEXAMPLE is too short",
        '{"apiKeySource":"ANTHROPIC_API_KEY","model":"claude"}',  # names a secret, holds none
        "password=$DB_PASSWORD api_key=${API_KEY}",
    ],
)
def test_ordinary_lines_stay(text: str) -> None:
    assert redact(text) == text


def test_private_key_blocks_go_whole_even_cut_or_escaped() -> None:
    body = "MIIEowIBAAKCAQEAx4Yz9Qk2yVbq8Lq7Yv0Q3zJ2Zf8Xk1Yh2Q9Wc4Tn6Pa8Rb3Sd5Uf7Vg9Xh1Yj3"
    block = f"-----BEGIN RSA PRIVATE KEY-----\n{body}\nAbC=\n-----END RSA PRIVATE KEY-----"
    assert redact(f"before\n{block}\nafter") == f"before\n{MARK}\nafter"
    assert body not in redact(f"{body}\nAbC=\n-----END RSA PRIVATE KEY-----")  # BEGIN cut off
    assert body not in redact(f"-----BEGIN PRIVATE KEY-----\n{body}\n")  # END cut off
    escaped = json.dumps({"key": block})
    assert body not in redact(escaped)
    assert json.loads(redact(escaped)) == {"key": MARK}


def test_values_of_withheld_variables_are_masked_anywhere(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DEPLOY_THING", "plain-looking-value-42")
    monkeypatch.setenv("SERVICE_PASSWORD", "hunter22-but-longer")
    monkeypatch.setenv("SHORT_TOKEN", "abc")  # too short to mask: it would mask words
    try:
        set_withheld(["DEPLOY_*"])
        out = redact("x plain-looking-value-42 y hunter22-but-longer abc")
        assert out == f"x {MARK} y {MARK} abc"
        quoted = redact("url=https://h/?v=plain-looking-value-42%20 " + json.dumps('a"b'))
        assert "plain-looking-value-42" not in quoted
        monkeypatch.setenv(ENV_VARIABLE, "OTHER_VAR")
        monkeypatch.setenv("OTHER_VAR", "from-the-env-variable")
        set_withheld([])
        assert redact("from-the-env-variable") == MARK
    finally:
        set_withheld([])


def test_a_redactor_given_values_masks_them() -> None:
    redactor = Redactor(["s3cr3t-value"])
    assert redactor.redact("a s3cr3t-value b") == f"a {MARK} b"
    assert redactor.with_values(["other-value"]).redact("other-value") == MARK


def test_redact_data_by_name_hides_secret_settings() -> None:
    shown = redact_data(
        {
            "agents": {"x": {"env": {"SERVICE_KEY": "k1", "HOME_DIR": "/h"}}},
            "github": {"token_env": "GITHUB_TOKEN", "token": "x", "cmd": "run --token abcdef1"},
        },
        by_name=True,
        mark="<hidden>",
    )
    assert shown == {
        "agents": {"x": {"env": {"SERVICE_KEY": "<hidden>", "HOME_DIR": "/h"}}},
        "github": {"token_env": "GITHUB_TOKEN", "token": "<hidden>", "cmd": f"run --token {MARK}"},
    }


def chunkings(data: bytes) -> Iterator[list[bytes]]:
    for cut in range(1, len(data)):
        yield [data[:cut], data[cut:]]
    yield [data[i : i + 3] for i in range(0, len(data), 3)]


@pytest.mark.parametrize(
    "text",
    [
        'out {"text": "token=ghp_' + "a1B2" * 9 + '"}\nnext\n',
        "x\n-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVJk5oCnR\nAbCd0==\n"
        "-----END EC PRIVATE KEY-----\nafter\n",
        "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC\nHello there\n",
        "E   -----BEGIN RSA PRIVATE KEY-----\nE   MIIEowIBAAKCAQEAx4Yz9Qk2yVbq8Lq7Yv0Q\nE   Ab==\n"
        "E   -----END RSA PRIVATE KEY-----\nE   next\n",
    ],
)
def test_a_stream_catches_a_secret_split_across_chunks(text: str) -> None:
    expected = redact(text).encode()
    for chunks in chunkings(text.encode()):
        stream = StreamRedactor()
        out = b"".join(stream.feed(chunk) for chunk in chunks) + stream.finish()
        assert out == expected, chunks
    assert b"\xff\xfe raw" in StreamRedactor().feed(b"\xff\xfe raw\n")  # not UTF-8: kept


def test_child_environment_leaves_withheld_variables_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_" + "z" * 36)
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.delenv(ENV_VARIABLE, raising=False)
    try:
        set_withheld(["GITHUB_TOKEN", "AWS_*"])
        env = child_environment({"EXTRA": "1", "PATH": None})
        assert "GITHUB_TOKEN" not in env
        assert "AWS_REGION" not in env
        assert env["EXTRA"] == "1"
        assert "PATH" not in env
        assert "GITHUB_TOKEN" in child_environment(withhold=[])
        monkeypatch.setenv(ENV_VARIABLE, "GITHUB_*")
        assert "GITHUB_TOKEN" not in child_environment(withhold=[])
    finally:
        set_withheld([])


def test_child_environment_follows_every_change_of_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The environment is filtered again only when it changed (it is kept between the three
    processes an iteration starts): a variable set, changed or removed since, or new withheld
    patterns, show at once; and each caller gets its own dict."""
    monkeypatch.delenv(ENV_VARIABLE, raising=False)
    monkeypatch.setenv("LOOPCTL_TEST_VALUE", "one")
    try:
        first = child_environment()
        assert first["LOOPCTL_TEST_VALUE"] == "one"
        first["LOOPCTL_TEST_VALUE"] = "mutated by a caller"
        assert child_environment()["LOOPCTL_TEST_VALUE"] == "one"
        monkeypatch.setenv("LOOPCTL_TEST_VALUE", "two")
        assert child_environment()["LOOPCTL_TEST_VALUE"] == "two"
        monkeypatch.setenv("LOOPCTL_TEST_OTHER", "new")
        assert child_environment()["LOOPCTL_TEST_OTHER"] == "new"
        set_withheld(["LOOPCTL_TEST_OTHER"])
        assert "LOOPCTL_TEST_OTHER" not in child_environment()
        set_withheld([])
        monkeypatch.delenv("LOOPCTL_TEST_VALUE")
        assert "LOOPCTL_TEST_VALUE" not in child_environment()
        assert child_environment()["LOOPCTL_TEST_OTHER"] == "new"
    finally:
        set_withheld([])


# --- the sanitiser --------------------------------------------------------------------------------

HOSTILE = (
    "\x1b]52;c;ZXZpbCBjbGlwYm9hcmQ=\x07",  # OSC 52: write the clipboard
    "\x1b]0;owned title\x1b\\",  # OSC 0: the window title, ST-terminated
    "\x1b[2J\x1b[H",  # clear the screen, cursor home
    "\x9b2J",  # the same clear with the C1 CSI
    "\x9d0;c1 title\x9c",  # C1 OSC
    "\x1bP1$r0m\x1b\\",  # DCS
    "line\roverwritten",  # CR
    "abc\x08\x08\x08xyz",  # BS
    "\x1b(B\x1b7\x1b8",  # charset, save/restore cursor
    "\x07\x00\x7f\x85",  # BEL, NUL, DEL, NEL
)
CONTROL = {chr(c) for c in [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)]} - {"\t", "\n"}


@pytest.mark.parametrize("sequence", HOSTILE)
def test_sanitize_removes_terminal_control_whole(sequence: str) -> None:
    out = sanitize(f"before {sequence} after")
    assert not CONTROL & set(out)
    assert "52;" not in out
    assert "title" not in out
    assert "2J" not in out
    assert out.startswith("before ")
    assert out.endswith(" after")


@settings(max_examples=500, deadline=None)
@given(
    st.lists(
        st.one_of(st.sampled_from(HOSTILE), st.text(), st.sampled_from(sorted(CONTROL))),
        max_size=8,
    ).map("".join)
)
def test_sanitized_text_holds_no_control_character_and_sanitizing_is_idempotent(
    text: str,
) -> None:
    out = sanitize(text)
    assert not CONTROL & set(out)
    assert sanitize(out) == out
    line = sanitize_line(text)
    assert "\n" not in line
    assert "\t" not in line
    assert sanitize_line(line) == line


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.one_of(st.text(), st.integers()), lambda c: st.lists(c, max_size=3)))
def test_json_for_terminal_keeps_the_data_and_escapes_every_control(data: object) -> None:
    text = json_for_terminal(data, indent=2)
    assert json.loads(text) == data
    assert not CONTROL & set(text.replace("\n", ""))


def test_the_views_lines_are_sanitized() -> None:
    from loopctl.model import Event
    from loopctl.view import describe

    message = "".join(HOSTILE)
    line = describe(
        Event(type="agent.end", ts=0.0, data={"outcome": "crashed", "message": message})
    )
    assert not CONTROL & set(line)
    assert "owned title" not in line
    assert "ZXZpbCBjbGlwYm9hcmQ=" not in line


def test_a_rule_is_compiled_only_when_a_text_holds_its_literal() -> None:
    """Importing the redactor compiles nothing; a short text compiles the rules it needs."""
    code = (
        "import loopctl.redaction as r\n"
        "def compiled(): return sorted(f.literals[0].decode() for f in r._FINDERS "
        "if f.pattern._compiled is not None)\n"
        "print(compiled())\n"
        "assert r.redact('just words') == 'just words'\n"
        "print(compiled())\n"
        "assert r.redact('password=hunter2') == 'password=[REDACTED]'\n"
        "print(compiled())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == ["[]", "[]", "['passw']"]


def test_a_remembered_text_is_redacted_again_once_the_withheld_values_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Short texts are remembered with what they became (a loop redacts the same goal, test
    ids and suggestions several times an iteration), but never past a change of the withheld
    values: a value withheld from now on is masked in a text seen before."""
    import loopctl.redaction as redaction

    value = "s3cr3t-" + "q" * 12
    text = f"connect with {value} please"
    monkeypatch.setenv("LOOPCTL_TEST_PLAIN", value)
    monkeypatch.delenv(ENV_VARIABLE, raising=False)
    scans: list[bytes] = []
    real = redaction._find_spans

    def counted(data: bytes) -> Any:
        scans.append(data)
        return real(data)

    monkeypatch.setattr(redaction, "_find_spans", counted)
    try:
        set_withheld([])
        assert redact(text) == text
        assert redact(text) == text
        assert len(scans) == 1  # the second time, remembered
        set_withheld(["LOOPCTL_TEST_PLAIN"])
        assert redact(text) == "connect with [REDACTED] please"
        set_withheld([])
        assert redact(text) == text
    finally:
        set_withheld([])


#: Every rule's literals, and pieces of them, for texts where literals overlap and nest.
_LITERAL_PIECES = sorted(
    {
        piece
        for finder in redaction._FINDERS
        for literal in finder.literals
        for piece in (literal.decode(), literal.decode().upper(), literal.decode()[1:])
    }
)


@settings(max_examples=500, deadline=None)
@given(
    st.lists(st.one_of(st.sampled_from(_LITERAL_PIECES), st.text(max_size=3)), max_size=30).map(
        "".join
    )
)
def test_the_literal_gate_lets_every_rule_run_whose_literal_occurs(text: str) -> None:
    """On a short text, two searches choose the rules to run (instead of a check per literal):
    they never leave out a rule one of whose literals is in the text, overlapping others or not."""
    data = text.encode("utf-8", "surrogatepass")
    lowered = data.lower()
    expected = {
        index
        for index, finder in enumerate(redaction._FINDERS)
        if any(literal in (lowered if finder.lower else data) for literal in finder.literals)
    }
    wanted = redaction._wanted(data, lowered)
    assert wanted is None or wanted == expected


def test_overlapping_literals_of_two_rules_both_run() -> None:
    """``:A`` (a Telegram bot token's) ends inside ``AC`` (a Twilio account id's)."""
    sid = "AC" + "0123456789abcdef" * 2
    assert redact(f"id :{sid} end") == f"id :{MARK} end"
