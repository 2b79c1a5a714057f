"""Where the memory is (``parse_location``) and how its secrets stay out of sight: every secret
libpq reads from a URL (the password, written in the user part or as a query key, percent-encoded
or not, and the SSL key's passphrase) is kept out of ``display``, out of ``repr`` and out of
every error message; ``scrub`` masks them in other text without garbling the location."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from loopctl_context_errors.memory import FailureMemory, naming, one_line
from loopctl_context_errors.store import MIN_MASKED, MemoryLocation, StoreError, parse_location

#: How a URL can hold a secret: ``{}`` is the secret, percent-encoded.
SECRET_FORMS = {
    "user part": "postgresql://loop:{}@db.example:5432/mem",
    "password key": "postgresql://loop@db.example:5432/mem?password={}",
    "encoded key": "postgresql://loop@db.example:5432/mem?%70assword={}",
    "encoded inside": "postgresql://loop@db.example:5432/mem?pass%77ord={}",
    "ssl passphrase": "postgresql://loop@db.example:5432/mem?sslmode=require&sslpassword={}",
    "encoded ssl passphrase": "postgresql://loop@db.example/mem?%73slpassword={}&sslmode=require",
}


def _forms(secret: str) -> set[str]:
    return {secret, quote(secret, safe="")}


@pytest.mark.parametrize("form", SECRET_FORMS)
def test_no_secret_is_displayed_and_every_one_is_scrubbed(form: str) -> None:
    secret = "S3cret-Passphrase"
    location = parse_location(SECRET_FORMS[form].format(secret))
    assert secret not in location.display + repr(location)
    assert "assword" not in location.display  # no empty key left either
    assert location.display.startswith("postgresql://loop@db.example")
    assert secret in location.secrets
    assert location.scrub(f"psycopg said: {secret}!") == "psycopg said: [REDACTED]!"


def test_the_password_is_the_last_password_key_whatever_its_spelling() -> None:
    location = parse_location("postgresql://loop:first@db/mem?password=second&%70assword=third")
    assert location.password == "third"
    assert set(location.secrets) == {"first", "second", "third"}
    assert location.display == "postgresql://loop@db/mem"


@settings(max_examples=200, deadline=None)
@example(secret="000@?", form="user part", other="", encode=False)  # found in CI: an @ after ?
@given(
    secret=st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1),
    form=st.sampled_from(sorted(SECRET_FORMS)),
    other=st.sampled_from(["", "&sslmode=disable", "&connect_timeout=x", "#frag", "&a=%zz"]),
    encode=st.booleans(),
)
def test_parse_location_never_shows_a_secret(
    secret: str, form: str, other: str, encode: bool
) -> None:
    secret = f"pw-{secret}"  # "pw-": a secret our own words cannot hold by chance
    raw = "".join(quote(c) if c in "&#%" or c.isspace() else c for c in secret)  # a value still
    written = quote(secret, safe="") if encode else raw
    url = SECRET_FORMS[form].format(written) + other
    try:
        location = parse_location(url)
    except StoreError as exc:
        shown = one_line(str(exc)) + exc.reason
    else:
        shown = location.display + repr(location) + naming(location, "cannot connect")
        if len(secret) >= MIN_MASKED:  # shorter ones are left alone in free text
            shown += location.scrub(f"x {secret} {written} x")
    for text in _forms(secret) | {written}:
        assert text not in shown


# --- scrub: masks secrets, never the location ---------------------------------------------------


@pytest.mark.parametrize(
    ("url", "line"),
    [
        # a password that is the user name (and a word of the scheme)
        ("postgresql://postgres:postgres@127.0.0.1:5432/db", "cannot connect to {}: timed out"),
        # a password that is part of the host
        ("postgresql://loop:127@127.0.0.1:5432/mem", "{}: busy (another writer held it too long)"),
        ("postgresql://loop:mem@127.0.0.1:5432/mem?password=5432", "{} is not a valid URL"),
        ("postgresql://u@h/db?sslpassword=db", "cannot connect to {}: wrong password or user"),
    ],
)
def test_scrub_leaves_the_location_and_short_secrets_alone(url: str, line: str) -> None:
    location = parse_location(url)
    text = line.format(location.display)
    assert location.scrub(text) == text
    assert naming(location, location.scrub(text)) == text  # the location once, not twice


def test_scrub_masks_a_long_secret_outside_the_location_only() -> None:
    location = MemoryLocation(
        kind="postgres", display="postgresql://db-secret-1@h/db", secrets=("db-secret-1",)
    )
    text = "postgresql://db-secret-1@h/db: said db-secret-1 and db-secret-1db-secret-1"
    assert location.scrub(text) == "postgresql://db-secret-1@h/db: said [REDACTED] and [REDACTED]"
    # an occurrence that runs out of the location is masked
    assert location.scrub(f"{location.display}-secret-1") == "postgresql://db-secret-1@h/[REDACTED]"


def test_a_memory_that_cannot_be_reached_names_its_location_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "loopctl_context_errors.store_postgres", None)
    memory = FailureMemory("postgresql://postgres:postgres@127.0.0.1:5432/db")
    outcome = memory.status()
    assert outcome.message == (
        "the failure memory at postgresql://postgres@127.0.0.1:5432/db needs psycopg: "
        "pip install 'loopctl-context-errors[postgres]'"
    )
    assert naming(memory.location, outcome.message) == outcome.message


def test_naming_knows_a_location_the_redactor_changed() -> None:
    location = parse_location("postgresql://ci_runner_2024_loopctl_x@db:5432/mem")
    from loopctl import redact

    assert redact(location.display) != location.display  # a long user name looks like a token
    message = f"cannot connect to {redact(location.display)}: connection refused"
    assert naming(location, message) == message
    assert naming(location, "timed out") == f"{location.display}: timed out"


@pytest.mark.parametrize(
    "url", ["postgresql://loop:pw-a\tb@db/mem", "postgresql://h/db?password=x\ny"]
)
def test_a_tab_or_line_break_in_a_url_is_refused(url: str) -> None:
    # urlsplit drops them and libpq keeps them: the secret we would hide is not the one it reads
    with pytest.raises(StoreError) as raised:
        parse_location(url)
    assert raised.value.reason == "bad-url"
    assert "pw-a" not in str(raised.value)
    assert "x\ny" not in str(raised.value)
