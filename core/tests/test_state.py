"""The state directory: atomic writers, the JSONL appender and readers, loop-state.md front matter
(with legacy files of the bash predecessor), the lock, restart archives and progress.md."""

from __future__ import annotations

import enum
import inspect
import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
import unicodedata
from pathlib import Path
from typing import Any

import attrs
import cattrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopctl import state
from loopctl.model import AgentSummary, ErrorKind, IterationRecord, Usage
from loopctl.state import (
    JsonlAppender,
    LoopState,
    StateError,
    StateLock,
    archive_restart,
    atomic_write_json,
    atomic_write_text,
    json_one_line,
    log_name,
    parse_front_matter,
    read_error_summary,
    read_jsonl,
    read_loop_state,
    remove_stale_temp_files,
    render_loop_state,
    render_progress,
    restart_numbers,
    tail_jsonl,
    to_jsonable,
    write_error_summary,
    write_loop_state,
)
from loopctl.state.loopstate import (
    FIELD_KINDS,
    LEGACY_AGENT_CMD,
    LEGACY_CONFIG_FILE,
    RunSettings,
    default_body,
)
from loopctl.state.running import RECORD_BYTES as RUNNING_BYTES

#: Any text, lone surrogates included (``st.characters()`` leaves them out by default), but no
#: high surrogate directly followed by a low one: JSON cannot tell such a pair from the astral
#: character it encodes (a documented limitation of :func:`json_one_line`).
_SURROGATE_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")
any_text = st.text(
    st.one_of(st.characters(exclude_categories=()), st.characters(categories=["Cs"]))
).filter(lambda text: _SURROGATE_PAIR.search(text) is None)
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63),
    st.floats(allow_nan=False),
    any_text,
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(any_text, inner, max_size=4)
    ),
    max_leaves=10,
)


def temp_files(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir() if path.name.endswith(".tmp"))


def run_python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=30
    )


# --- atomic writes -------------------------------------------------------------------------------


def test_atomic_write_text_replaces_content_and_keeps_mode(tmp_path: Path) -> None:
    target = tmp_path / "progress.md"
    atomic_write_text(target, "old\n")
    target.chmod(0o640)
    atomic_write_text(target, "new ✓\r\nline\n")
    assert target.read_bytes() == "new ✓\r\nline\n".encode()  # no newline translation
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert temp_files(tmp_path) == []


def test_atomic_write_text_crash_before_rename_keeps_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "loop-state.md"
    target.write_text("old content\n")

    def crash(src: Any, dst: Any) -> None:
        assert Path(src).read_text() == "new content\n"  # the temp file was fully written
        raise OSError("simulated crash")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="simulated crash"):
        atomic_write_text(target, "new content\n")
    assert target.read_text() == "old content\n"
    assert [p.name for p in tmp_path.iterdir()] == ["loop-state.md"]


def test_a_durable_write_fsyncs_the_file_and_a_new_file_s_directory_a_view_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append("dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    target = tmp_path / "loop-state.md"
    atomic_write_text(target, "new\n")
    assert synced == ["file", "dir"]  # a new name is made durable too
    atomic_write_text(target, "rewritten\n")
    assert synced == ["file", "dir", "file"]  # a rename over it: the old or the new version
    atomic_write_text(tmp_path / "progress.md", "a view\n", durable=False)
    atomic_write_text(target, "again\n", durable=False)
    assert synced == ["file", "dir", "file"]
    assert (target.read_text(), (tmp_path / "progress.md").read_text()) == ("again\n", "a view\n")


def test_running_json_names_the_command_that_runs_and_reads_back(tmp_path: Path) -> None:
    record = state.RunningRecord(tmp_path)
    assert state.read_running(tmp_path) is None  # created empty: nothing runs
    record.set("agent", [4321, 987654321])
    assert state.read_running(tmp_path) == ("agent", [4321, 987654321])
    record.set("tests", [7, 8])  # shorter: no tail of the longer record is left
    raw = (tmp_path / state.RUNNING_FILE).read_bytes()
    assert len(raw) == RUNNING_BYTES
    assert raw.endswith(b"\n")
    assert state.read_running(tmp_path) == ("tests", [7, 8])
    record.clear()
    assert state.read_running(tmp_path) is None
    record.close()
    record.set("agent", [1, 2])  # closed: nothing happens
    assert state.read_running(tmp_path) is None
    assert state.read_running(tmp_path / "missing") is None


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_running_json_that_is_damaged_reads_as_nothing_running(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / state.RUNNING_FILE).write_bytes(raw)
        found = state.read_running(Path(tmp), attempts=1)
    if found is not None:  # only a well-formed record is believed
        kind, group = found
        assert kind in ("agent", "tests")
        assert len(group) == 2
        assert min(group) > 0


@pytest.mark.parametrize(
    "record",
    [
        {"running": "agent", "group": [1, True]},
        {"running": "agent", "group": [0, 5]},
        {"running": "shell", "group": [1, 5]},
        {"running": "tests", "group": [1, 2, 3]},
        ["agent", [1, 2]],
    ],
)
def test_running_json_of_an_odd_shape_reads_as_nothing_running(
    tmp_path: Path, record: object
) -> None:
    (tmp_path / state.RUNNING_FILE).write_text(json.dumps(record))
    assert state.read_running(tmp_path) is None


@pytest.mark.slow
def test_concurrent_rewrites_of_one_file_never_show_a_mix(tmp_path: Path) -> None:
    """Threads here and processes elsewhere rewrite one file while others read it: every read
    is one whole version (each names its writer and repeats its payload to a checked length)."""
    target = tmp_path / "loop-state.md"
    target.write_text(_version("start", 0))
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from loopctl.state import atomic_write_text\n"
        f"{inspect.getsource(_version)}\n"
        "for n in range(150):\n"
        "    atomic_write_text(Path(sys.argv[1]), _version(sys.argv[2], n))\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, str(target), f"p{k}"]) for k in range(2)]
    stop = threading.Event()
    bad: list[str] = []

    def write(name: str) -> None:
        for n in range(150):
            atomic_write_text(target, _version(name, n))

    def read() -> None:
        while not stop.is_set():
            text = target.read_text()
            if not _is_version(text):
                bad.append(text[:200])

    writers = [threading.Thread(target=write, args=(f"t{k}",)) for k in range(2)]
    readers = [threading.Thread(target=read) for _ in range(2)]
    for thread in [*writers, *readers]:
        thread.start()
    for thread in writers:
        thread.join()
    assert [proc.wait(timeout=120) for proc in procs] == [0, 0]
    stop.set()
    for thread in readers:
        thread.join()
    assert bad == []
    assert _is_version(target.read_text())


def _version(writer: str, n: int) -> str:
    """A file's content that says whether it is whole: its length, then a body that long."""
    body = f"{writer}:{n}:" * (1 + n % 7) * 40
    return f"{len(body)}\n{body}\n"


def _is_version(text: str) -> bool:
    head, _, rest = text.partition("\n")
    return head.isdigit() and len(rest) == int(head) + 1 and rest.endswith("\n")


def test_real_kill_before_rename_leaves_old_file_and_a_temp_that_cleanup_removes(
    tmp_path: Path,
) -> None:
    target = tmp_path / "loop-state.md"
    target.write_text("old content\n")
    code = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from loopctl.state import atomic_write_text\n"
        "os.replace = lambda *a: os.kill(os.getpid(), signal.SIGKILL)\n"
        "atomic_write_text(Path(sys.argv[1]), 'new content\\n')\n"
    )
    result = run_python(code, str(target))
    assert result.returncode == -signal.SIGKILL
    assert target.read_text() == "old content\n"
    (leftover,) = temp_files(tmp_path)
    assert leftover.startswith(".loop-state.md.")
    # A temp file of a live writer (here: our parent) is left alone.
    live = tmp_path / f".report.md.{os.getppid()}.0123abcd.tmp"
    live.write_text("in progress")
    assert remove_stale_temp_files(tmp_path) == [tmp_path / leftover]
    assert temp_files(tmp_path) == [live.name]


def test_atomic_write_text_survives_unencodable_text(tmp_path: Path) -> None:
    target = tmp_path / "progress.md"
    atomic_write_text(target, "goal \udcff end")  # e.g. undecodable bytes from argv
    assert target.read_text(encoding="utf-8") == "goal \\udcff end"


def test_atomic_write_json_format(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    atomic_write_json(target, {"goal": "é", "n": [1]})
    assert target.read_text(encoding="utf-8") == '{\n  "goal": "é",\n  "n": [\n    1\n  ]\n}\n'


# --- one-line JSON -------------------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(json_values)
def test_json_one_line_is_one_printable_line_that_round_trips(value: Any) -> None:
    text = json_one_line(value)
    assert text.splitlines() == [text] or text == ""
    assert all(char.isprintable() or unicodedata.category(char) == "Zs" for char in text)
    assert not re.search("[\ud800-\udfff\x85\u2028\u2029\x7f]", text)
    text.encode("utf-8")  # never raises: no lone surrogates left
    assert json.loads(text) == value


@settings(max_examples=100, deadline=None)
@given(
    json_values,
    st.sampled_from(
        [
            {},
            {"default": str},
            {"separators": (",", ":"), "default": str},
            {"separators": [",", ":"]},
        ]
    ),
)
def test_json_one_line_with_arguments_is_json_dumps_of_them(
    value: Any, kwargs: dict[str, Any]
) -> None:
    """The encoders built once for the usual arguments write what ``json.dumps`` writes (then
    escaped as always)."""
    from loopctl.state.encoding import _NON_ASCII_RUN, _escape_run

    plain = json.dumps(value, ensure_ascii=False, **kwargs)
    assert json_one_line(value, **kwargs) == _NON_ASCII_RUN.sub(_escape_run, plain)


@settings(max_examples=300, deadline=None)
@given(st.one_of(json_scalars, st.floats(), st.sampled_from([enum.IntEnum("E", "A")["A"]])))
def test_json_one_line_of_a_scalar_is_json_dumps_of_it(value: Any) -> None:
    """Scalars take a shortcut past the encoder (most values of loop-state.md are scalars); it
    spells each exactly as ``json.dumps`` does, escaped as always (NaN, an int subclass: the
    encoder's own way)."""
    from loopctl.state.encoding import _NON_ASCII_RUN, _escape_run

    plain = json.dumps(value, ensure_ascii=False, default=str)
    assert json_one_line(value, default=str) == _NON_ASCII_RUN.sub(_escape_run, plain)
    assert json_one_line(value) == _NON_ASCII_RUN.sub(
        _escape_run, json.dumps(value, ensure_ascii=False)
    )


# --- JSONL ---------------------------------------------------------------------------------------


def test_appender_writes_compact_lines_and_keeps_the_file_open(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    with JsonlAppender(path, fsync=True) as appender:
        appender.append({"type": "a", "text": "x\u2028y", "path": tmp_path})
        moved = tmp_path / "moved.jsonl"
        path.rename(moved)  # the open descriptor follows the file
        appender.append({"type": "b"})
    lines = moved.read_text(encoding="utf-8").split("\n")
    assert lines[0] == '{"type":"a","text":"x\\u2028y","path":"' + str(tmp_path) + '"}'
    assert lines[1:] == ['{"type":"b"}', ""]
    assert not path.exists()
    with pytest.raises(ValueError, match="closed"):
        appender.append({"type": "c"})


def test_appender_ends_a_torn_line_before_its_own(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"type":"a"}\n{"type":"b","da')  # a crash tore the second line
    appender = JsonlAppender(path)
    appender.append({"type": "c"})
    appender.append({"type": "d"})
    appender.close()
    assert path.read_bytes() == b'{"type":"a"}\n{"type":"b","da\n{"type":"c"}\n{"type":"d"}\n'
    result = read_jsonl(path)
    assert [r["type"] for r in result.records] == ["a", "c", "d"]
    assert result.problems == ["events.jsonl line 2: not valid JSON (torn write?)"]


def test_appender_is_safe_across_threads(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    appender = JsonlAppender(path)
    payload = "x" * 5000

    def work(worker: int) -> None:
        for index in range(100):
            appender.append({"worker": worker, "index": index, "payload": payload})

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    appender.close()
    result = read_jsonl(path)
    assert result.problems == []
    assert len(result.records) == 800


def test_read_jsonl_reports_every_kind_of_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "iterations.jsonl"
    path.write_bytes(
        b'{"iteration":1}\n\n[1,2]\n\xff\xfe\n{"iteration":2}\nnot json\n{"iteration":3}\n{"itera'
    )
    result = read_jsonl(path)
    assert result.records == [{"iteration": 1}, {"iteration": 2}, {"iteration": 3}]
    assert result.problems == [
        "iterations.jsonl line 3: not a JSON object",
        "iterations.jsonl line 4: not valid UTF-8 (torn write?)",
        "iterations.jsonl line 6: not valid JSON (torn write?)",
        "iterations.jsonl line 8: not valid JSON (torn write?)",
    ]


def test_read_jsonl_missing_file_and_directory(tmp_path: Path) -> None:
    assert read_jsonl(tmp_path / "events.jsonl") == state.JsonlRead([], [])
    (tmp_path / "events.jsonl").mkdir()
    result = read_jsonl(tmp_path / "events.jsonl")
    assert result.records == []
    assert result.problems[0].startswith("events.jsonl: cannot read it")


def test_read_jsonl_bounds_its_problem_list(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text("garbage\n" * 1000)
    problems = read_jsonl(path).problems
    assert len(problems) == 51
    assert problems[-1] == "events.jsonl: 950 more bad lines not listed"


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.dictionaries(st.text(max_size=3), json_scalars, max_size=3).map(json_one_line),
            st.binary(max_size=20).map(lambda b: b.decode("latin-1")),
            st.sampled_from(["", "[]", "{", '{"a":', "  "]),
        ),
        max_size=12,
    ),
    st.booleans(),
    st.integers(1, 40),
    st.integers(0, 14),
)
def test_tail_jsonl_agrees_with_read_jsonl(
    tmp_path_factory: pytest.TempPathFactory,
    lines: list[str],
    trailing_newline: bool,
    chunk_size: int,
    n: int,
) -> None:
    path = tmp_path_factory.mktemp("tail") / "events.jsonl"
    data = "\n".join(lines).encode("utf-8", "surrogatepass")
    path.write_bytes(data + (b"\n" if trailing_newline and lines else b""))
    records = read_jsonl(path).records
    expected = records[-n:] if n else []
    assert tail_jsonl(path, n, chunk_size=chunk_size) == expected


def test_tail_jsonl_reads_only_the_end_of_a_huge_file(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    with open(path, "wb") as stream:
        stream.write(b'{"first":true}\n')
        stream.seek(1 << 30)  # a 1 GiB hole: reading it whole would take seconds and 1 GiB
        stream.write(b"\n" + b"".join(b'{"n":%d}\n' % n for n in range(1000)) + b'{"torn"')
    if path.stat().st_blocks * 512 > 1 << 20:
        pytest.skip("this file system does not make sparse files")
    tracemalloc.start()
    try:
        assert tail_jsonl(path, 3) == [{"n": 997}, {"n": 998}, {"n": 999}]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20  # the hole was never read
    assert tail_jsonl(tmp_path / "missing.jsonl", 3) == []
    assert tail_jsonl(path, 0) == []


# --- loop-state.md -------------------------------------------------------------------------------

loop_states = st.builds(
    LoopState,
    goal=any_text,
    original_goal=any_text,
    iteration=st.integers(0, 10**6),
    status=st.sampled_from(["running", "complete", "stuck", "max_iterations", "---", "a: b"]),
    reason=any_text,
    restarts=st.integers(0, 1000),
    session_id=st.none() | any_text,
    session_mode=st.sampled_from(["fresh", "resume"]),
    agent=st.text(max_size=10),
    test_cmd=any_text,
    started_at=st.floats(allow_nan=False, allow_infinity=False),
    updated_at=st.floats(0, 2e9),
    start_commit=st.none() | st.text("0123456789abcdef", min_size=40, max_size=40),
    workdir=any_text,
    pid=st.none() | st.integers(1, 2**22),
    loopctl_version=st.just("0.1.0"),
    max_iterations=st.integers(0, 10**4),
    failed_approaches=st.lists(any_text, max_size=3),
    stuck_nudge=st.none() | any_text,
    stuck_level=st.integers(0, 3),
    agent_process=st.none() | st.lists(st.integers(1, 2**40), min_size=2, max_size=2),
    test_process=st.none() | st.lists(st.integers(1, 2**40), min_size=2, max_size=2),
    rate_limit_waits=st.integers(0, 100),
    wall_clock_used_s=st.floats(0, 1e9),
    restart_reason=any_text,
    restart_message=any_text,
    settings=st.none()
    | st.builds(
        RunSettings,
        config=st.none() | st.dictionaries(any_text, json_values, max_size=4),
        config_file=st.none() | any_text,
        agent=any_text,
        agent_cmd=st.none() | any_text,
        no_plugins=st.booleans(),
        env=st.dictionaries(any_text, any_text, max_size=3),
        origins=st.dictionaries(any_text, any_text, max_size=3),
    ),
    # Plugins' values; the names of the engine's own fields, and of where loopctl 0.1 kept some
    # of them, are read into those fields (see the test of earlier versions' files below).
    extra=st.dictionaries(
        any_text.filter(lambda k: k not in {*FIELD_KINDS, LEGACY_AGENT_CMD, LEGACY_CONFIG_FILE}),
        json_values,
        max_size=4,
    ),
)


@settings(max_examples=60, deadline=None)
@given(loop_states, any_text)
def test_loop_state_round_trips_exactly(
    tmp_path_factory: pytest.TempPathFactory, loop_state: LoopState, body: str
) -> None:
    path = tmp_path_factory.mktemp("state") / "loop-state.md"
    write_loop_state(path, loop_state, body)
    assert read_loop_state(path) == loop_state
    text = render_loop_state(loop_state, body)
    values, parsed_body = parse_front_matter(text)
    assert parsed_body == (body or default_body(loop_state))
    assert values["goal"] == loop_state.goal
    # The front matter is YAML-safe: `key: <JSON>` lines of printable characters only.
    front = text.split("\n---\n", 1)[0].split("\n")[1:]
    assert [line.split(":", 1)[0] for line in front] == [f.name for f in attrs.fields(LoopState)]
    for line in front:
        assert all(char.isprintable() or unicodedata.category(char) == "Zs" for char in line)


def test_loop_state_tricky_goals_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "loop-state.md"
    goals = [
        'multi\nline "quoted" \\ backslash\n---\nnot: yaml\n',
        "line\u2028separators\u2029and\x85nel",
        "lone \ud800 and \udcff surrogates",
        "😀 emoji\u200d and \ufeff bom and \x7f del",
        "x" * 200_000,
        "",
    ]
    for goal in goals:
        write_loop_state(path, LoopState(goal=goal, original_goal=goal))
        loaded = read_loop_state(path)
        assert (loaded.goal, loaded.original_goal) == (goal, goal)


def test_loop_state_settings_are_written_as_they_are_when_replaced() -> None:
    """The settings' text is kept for the same object only: new settings are written anew."""
    state = LoopState(goal="g", original_goal="g", settings=RunSettings(agent="claude"))
    first = render_loop_state(state)
    assert '"agent": "claude"' in first
    assert render_loop_state(state) == first
    state.settings = RunSettings(agent="codex")
    assert '"agent": "codex"' in render_loop_state(state)
    state.settings = None
    assert "\nsettings: null\n" in render_loop_state(state)


def test_default_body_is_a_human_summary() -> None:
    text = render_loop_state(
        LoopState(goal="Fix the parser", original_goal="fix parser", iteration=3, max_iterations=9)
    )
    _, body = parse_front_matter(text)
    assert "- iteration: 3 of 9, restarts: 0" in body
    assert "## Goal\n\nFix the parser" in body
    assert "## Original goal\n\nfix parser" in body


LEGACY_BASH_STATE = """\
---
goal: "fix the \\"login\\" bug\\nand add a test for C:\\\\temp"
iteration: 3
status: running
session_id: abc-123
started_at: 2024-05-01T12:00:00Z
max_iterations: "20"
test_cmd: npm test
branch: feature/login
retries: 2
---

# Ralph loop state
Iteration 3 of 20.
"""


def test_reads_legacy_bash_state(tmp_path: Path) -> None:
    path = tmp_path / "loop-state.md"
    path.write_text(LEGACY_BASH_STATE)
    loaded = read_loop_state(path)
    assert loaded.goal == 'fix the "login" bug\nand add a test for C:\\temp'
    assert loaded.original_goal == ""  # a plugin recovers it
    assert (loaded.iteration, loaded.status, loaded.session_id) == (3, "running", "abc-123")
    assert loaded.started_at == 1714564800.0
    assert loaded.max_iterations == 20
    assert loaded.test_cmd == "npm test"
    assert (loaded.restarts, loaded.session_mode) == (0, "fresh")  # defaults
    assert loaded.extra == {"branch": "feature/login", "retries": 2}
    # Writing it back migrates unknown keys into `extra` and reads back the same.
    write_loop_state(path, loaded)
    assert read_loop_state(path) == loaded


def test_reads_legacy_variants(tmp_path: Path) -> None:
    path = tmp_path / "loop-state.md"
    path.write_bytes(
        b"\xef\xbb\xbf---\r\n"
        b"# written by hand\r\n"
        b"goal: 'it''s done'   # a comment\r\n"
        b'reason: "tab\there"\r\n'
        b"test_cmd: 42\r\n"
        b"pid:\r\n"
        b"extra: null\r\n"
        b"nested: [1, 2]\r\n"
        b"---\r\n"
    )
    loaded = read_loop_state(path)
    assert loaded.goal == "it's done"
    assert loaded.reason == "tab\there"
    assert loaded.test_cmd == "42"  # spelled as written, not the number
    assert loaded.pid is None
    assert loaded.extra == {}  # lists are not kept from unknown keys


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", r"line 1: expected '---'"),
        ("# My notes\n---\ngoal: x\n---\n", r"line 1: expected '---'.*not a loop-state file"),
        ("---\ngoal: x\n", r"no closing '---'"),
        ("---\ngoal: x\njust words\n---\n", r"line 3: expected `key: value`"),
        ("---\ngoal: |\n  multi\n---\n", r"line 3: indented line"),
        ('---\ngoal: "unterminated\n---\n', r"line 2: the value of `goal` is a malformed"),
        ("---\ngoal: 'open\n---\n", r"line 2: the value of `goal` has no closing quote"),
        ('---\ngoal: "a" "b"\n---\n', r"line 2: unexpected text"),
        ("---\nstatus: running\n---\n", r"no `goal`"),
        ("---\ngoal: null\n---\n", r"no `goal`"),
        ("---\ngoal: x\niteration: three\n---\n", r"line 3: `iteration` should be a whole number"),
        ("---\ngoal: [1]\n---\n", r"line 2: `goal` should be text"),
        ("---\ngoal: x\nextra: [1]\n---\n", r"line 3: `extra` should be a JSON object"),
        ("---\ngoal: x\nstarted_at: yesterday\n---\n", r"line 3: `started_at` should be a time"),
    ],
)
def test_bad_loop_state_files_name_file_and_line(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "loop-state.md"
    path.write_text(text)
    with pytest.raises(StateError, match=expected) as info:
        read_loop_state(path)
    assert str(info.value).startswith(str(path))


@pytest.mark.parametrize(
    "written",
    [
        "1714564800",
        '"1714564800.0"',
        "2024-05-01T12:00:00Z",
        "2024-05-01T12:00:00.000Z",
        "2024-05-01 14:00:00+02:00",
        "2024-05-01T07:00-0500",
    ],
)
def test_reads_legacy_times(tmp_path: Path, written: str) -> None:
    path = tmp_path / "loop-state.md"
    path.write_text(f'---\ngoal: "g"\nupdated_at: {written}\n---\n')
    assert read_loop_state(path).updated_at == 1714564800.0


def test_missing_loop_state_file(tmp_path: Path) -> None:
    with pytest.raises(StateError, match="does not exist"):
        read_loop_state(tmp_path / "loop-state.md")


one_line_text = any_text.filter(lambda text: "\n" not in text)
front_matter_lines = st.one_of(
    one_line_text,
    st.builds(
        "{}:{}{}".format,
        st.sampled_from([*FIELD_KINDS, "other", "x y"]),
        st.sampled_from(["", " ", "\t"]),
        st.one_of(
            json_values.map(json_one_line),
            one_line_text,
            st.sampled_from(
                [
                    '"',
                    "'",
                    "'a''",
                    "1e999",
                    "9" * 5000,
                    "[" * 3000,
                    "-0",
                    "2024-13-45",
                    "2024-05-01T12:00+99:99",
                ]
            ),
        ),
    ),
)


@settings(max_examples=100, deadline=None)
@given(any_text, st.lists(front_matter_lines, max_size=10), st.booleans())
def test_loop_state_readers_raise_only_state_error(
    tmp_path_factory: pytest.TempPathFactory, noise: str, lines: list[str], framed: bool
) -> None:
    text = "---\n" + "\n".join(lines) + "\n---\n" + noise if framed else noise
    path = tmp_path_factory.mktemp("fuzz") / "loop-state.md"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    messages = []
    for read in (lambda: parse_front_matter(text), lambda: read_loop_state(path)):
        try:
            read()
        except StateError as exc:  # anything else fails the test
            messages.append(str(exc))
    assert all(messages)


# --- error-summary.json --------------------------------------------------------------------------


def test_error_summary_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "error-summary.json"
    assert read_error_summary(path) is None
    write_error_summary(path, iteration=4, error_lines=["E  assert 1 == 2", "é"], test_cmd="pytest")
    assert read_error_summary(path) == {
        "iteration": 4,
        "error_count": 2,
        "error_lines": ["E  assert 1 == 2", "é"],
        "test_cmd": "pytest",
    }


def test_error_summary_legacy_keys_default(tmp_path: Path) -> None:
    path = tmp_path / "error-summary.json"
    path.write_text('{"error_lines": ["boom"], "runner": "jest"}')
    assert read_error_summary(path) == {
        "iteration": 0,
        "error_count": 1,
        "error_lines": ["boom"],
        "test_cmd": "",
        "runner": "jest",
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"iteration": 1, "error_li', "line 1: not valid JSON"),
        ("[]", "expected a JSON object"),
        ('{"error_lines": "boom"}', "`error_lines` should be a list of strings"),
        ('{"iteration": "4"}', "`iteration` should be a whole number"),
        ('{"test_cmd": 1}', "`test_cmd` should be a string"),
    ],
)
def test_malformed_error_summary(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "error-summary.json"
    path.write_text(text)
    with pytest.raises(StateError, match=re.escape(expected)) as info:
        read_error_summary(path)
    assert str(path) in str(info.value)


# --- the lock ------------------------------------------------------------------------------------

HOLD_LOCK = (
    "import sys\n"
    "from pathlib import Path\n"
    "from loopctl.state import StateLock\n"
    "StateLock(Path(sys.argv[1])).acquire()\n"
    "print('locked', flush=True)\n"
    "sys.stdin.read()\n"
)


def test_lock_is_exclusive_across_processes_and_dies_with_its_holder(tmp_path: Path) -> None:
    state_dir = tmp_path / ".loopctl"
    with subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(state_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "locked\n"
        lock = StateLock(state_dir)
        info = lock.holder()
        assert info is not None
        assert info["pid"] == holder.pid
        with pytest.raises(StateError) as raised:
            lock.acquire()
        message = str(raised.value)
        assert f"another loop (pid {holder.pid}, started " in message
        assert message.endswith(f"is running in {state_dir}; stop it or use --state-dir")
        assert not lock.held
        holder.kill()  # SIGKILL: no clean-up runs
        holder.wait()
    lock.acquire()  # the kernel dropped the dead holder's lock
    try:
        assert lock.held
        assert json.loads(lock.path.read_text())["pid"] == os.getpid()
    finally:
        lock.release()
    assert lock.holder() is None


def test_lock_within_one_process(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    with StateLock(state_dir) as first:
        first.acquire()  # re-acquiring what we hold is a no-op
        second = StateLock(state_dir)
        assert second.holder() == {
            "pid": os.getpid(),
            "started_at": pytest.approx(time.time(), abs=60),
            "hostname": socket.gethostname(),
        }
        with pytest.raises(StateError, match=f"pid {os.getpid()}"):
            second.acquire()
    assert StateLock(state_dir).holder() is None
    assert (state_dir / "loopctl.lock").exists()  # never deleted
    with StateLock(state_dir) as again:
        assert again.held


def test_lock_message_reads_a_legacy_bare_pid(tmp_path: Path) -> None:
    state_dir = tmp_path / ".loopctl"
    state_dir.mkdir()
    (state_dir / "loopctl.lock").write_text("4242\n")
    code = (
        "import fcntl, sys\n"
        "f = open(sys.argv[1], 'r')\n"
        "fcntl.flock(f, fcntl.LOCK_EX)\n"
        "print('locked', flush=True)\n"
        "sys.stdin.read()\n"
    )
    with subprocess.Popen(
        [sys.executable, "-c", code, str(state_dir / "loopctl.lock")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "locked\n"
        with pytest.raises(StateError, match=r"another loop \(pid 4242\) is running"):
            StateLock(state_dir).acquire()
        holder.kill()
        holder.wait()


# --- restart archives ----------------------------------------------------------------------------


def snapshot(directory: Path) -> dict[str, bytes | None]:
    return {
        str(path.relative_to(directory)): path.read_bytes() if path.is_file() else None
        for path in sorted(directory.rglob("*"))
    }


def test_archive_restart_copies_files_and_moves_logs(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    (tmp_path / "loop-state.md").write_text("state\n")
    (tmp_path / "progress.md").write_text("progress\n")
    (tmp_path / "events.jsonl").write_text("{}\n")
    logs.mkdir()
    (logs / log_name(7, "agent.jsonl")).write_text("agent\n")
    (logs / log_name(7, "tests.log")).write_text("tests\n")

    archive = archive_restart(tmp_path, 1)

    assert archive == tmp_path / "restart-1"
    assert snapshot(archive) == {
        "logs": None,
        "logs/iteration-0007.agent.jsonl": b"agent\n",
        "logs/iteration-0007.tests.log": b"tests\n",
        "loop-state.md": b"state\n",
        "progress.md": b"progress\n",
    }
    assert (tmp_path / "loop-state.md").read_text() == "state\n"  # copied, not moved
    assert list(logs.iterdir()) == []  # the next session starts clean
    assert (tmp_path / "events.jsonl").exists()
    assert not (archive / "events.jsonl").exists()
    assert restart_numbers(tmp_path) == [1]


def test_archive_restart_finishes_after_a_crash_and_is_idempotent(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    (tmp_path / "loop-state.md").write_text("state\n")
    (tmp_path / "error-summary.json").write_text("{}\n")
    (tmp_path / "context-summary.md").write_text("summary\n")
    # A crash left: restart-2 with a stale copy, a dead writer's temp file, and the logs
    # half-merged (a re-run may also find a new logs/ next to an archived one).
    archive = tmp_path / "restart-2"
    (archive / "logs").mkdir(parents=True)
    (archive / "loop-state.md").write_text("stale\n")
    (archive / ".progress.md.999999999.deadbeef.tmp").write_text("torn")
    (archive / "logs" / "iteration-0001.agent.jsonl").write_text("one\n")
    logs.mkdir()
    (logs / log_name(2, "tests.log")).write_text("two\n")
    (logs / "sub").mkdir()
    (logs / "sub" / "x").write_text("x\n")
    (archive / "logs" / "sub").mkdir()

    archive_restart(tmp_path, 2)
    first = snapshot(tmp_path)
    archive_restart(tmp_path, 2)

    assert snapshot(tmp_path) == first
    assert snapshot(archive) == {
        "context-summary.md": b"summary\n",
        "error-summary.json": b"{}\n",
        "logs": None,
        "logs/iteration-0001.agent.jsonl": b"one\n",
        "logs/iteration-0002.tests.log": b"two\n",
        "logs/sub": None,
        "logs/sub.1": None,
        "logs/sub.1/x": b"x\n",
        "loop-state.md": b"state\n",
    }
    assert list(logs.iterdir()) == []


# --- progress.md ---------------------------------------------------------------------------------


def iteration_record(number: int, **changes: Any) -> dict[str, Any]:
    record = IterationRecord(
        iteration=number,
        restarts=number // 10,
        duration_s=65.0,
        tests_passed=False,
        failing_tests=["tests/test_a.py::test_x", "tests/test_a.py::test_y"],
        error_fingerprint="AssertionError: N != N | in tests/test_a.py",
        error_count=2,
        agent=AgentSummary(usage=Usage(input_tokens=1000, output_tokens=500), cost_usd=0.25),
    )
    return {**to_jsonable(record), **changes}


def test_render_progress_content() -> None:
    records = [iteration_record(n) for n in range(1, 25)]
    records[-1] = iteration_record(
        24, tests_passed=True, failing_tests=[], error_fingerprint="", decision="stop"
    )
    records[-2] = iteration_record(23, decision="restart", reason="context_exhaustion")
    text = render_progress(
        records, goal="Make the parser pass\nsecond line", status="complete", max_rows=5
    )
    assert "**Goal:** Make the parser pass …" in text
    assert "**Status:** complete" in text
    rows = [line for line in text.split("\n") if re.match(r"\| \d", line)]
    assert [row.split(" | ")[0] for row in rows] == ["| 20", "| 21", "| 22", "| 23", "| 24"]
    assert rows[-1] == "| 24 | pass | 0 |  | 1,500 | 1m 05s | stop |"
    assert rows[-2].endswith("| restart: context_exhaustion |")
    assert "AssertionError: N != N \\| in tests/test_a.py" in rows[0]
    assert "Last 5 of 24 iterations" in text
    assert "**Totals:** 24 iterations, 2 restarts, 36,000 tokens (24,000 in, 12,000 out" in text
    assert "$6.00" in text


def test_render_progress_size_does_not_grow_with_iterations() -> None:
    few = render_progress([iteration_record(n) for n in range(1, 21)], goal="g", status="running")
    many = render_progress(
        [iteration_record(n) for n in range(1, 1001)], goal="g", status="running"
    )
    assert len(many) < len(few) + 200  # only longer numbers and the "last 20 of" note
    huge = iteration_record(1, error_fingerprint="e" * 10**6, decision="d" * 10**6)
    assert len(render_progress([huge], goal="g" * 10**6, status="s" * 10**6)) < 2000
    assert render_progress([], goal="", status="running").count("No iterations yet.") == 1


small_values = st.one_of(json_scalars, st.lists(json_scalars, max_size=3))
record_keys = st.sampled_from(
    [
        "iteration",
        "restarts",
        "duration_s",
        "tests_passed",
        "failing_tests",
        "error_fingerprint",
        "error_count",
        "agent",
        "decision",
        "reason",
    ]
)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.dictionaries(record_keys, small_values),
            st.builds(
                lambda usage, cost: {"agent": {"usage": usage, "cost_usd": cost}},
                st.dictionaries(st.sampled_from(["input_tokens", "output_tokens"]), small_values),
                small_values,
            ),
        ),
        max_size=8,
    ),
    any_text,
    any_text,
)
def test_render_progress_never_raises_and_stays_small(
    records: list[dict[str, Any]], goal: str, status: str
) -> None:
    text = render_progress(records, goal=goal, status=status)
    assert len(text) < 8000
    assert text.startswith("# loopctl progress\n")


# --- the rest ------------------------------------------------------------------------------------


def test_to_jsonable_writes_model_classes_as_cattrs_reads_them() -> None:
    record = IterationRecord(
        iteration=3,
        agent=AgentSummary(error_kind=ErrorKind.RATE_LIMIT.value, usage=Usage(5, 6, 7, 8)),
        annotations={"kind": ErrorKind.NETWORK, "where": Path("a/b"), "tags": ("x",)},
    )
    data = to_jsonable(record)
    assert data["agent"]["usage"] == {
        "input_tokens": 5,
        "output_tokens": 6,
        "cache_creation_input_tokens": 7,
        "cache_read_input_tokens": 8,
    }
    assert data["annotations"] == {"kind": "network", "where": "a/b", "tags": ["x"]}
    assert json.loads(json.dumps(data)) == data
    assert cattrs.structure(data, IterationRecord).agent == record.agent


def test_state_files_of_earlier_versions_read_into_the_typed_fields(tmp_path: Path) -> None:
    """loopctl 0.1 kept the engine's own state among the plugins' values in ``extra`` and
    counted restarts as ``generation``: both read into today's fields."""
    path = tmp_path / "loop-state.md"
    path.write_text(
        "---\n"
        'goal: "g"\n'
        "generation: 2\n"
        'extra: {"failed_approaches": ["a"], "stuck_nudge": "KeyError", "stuck_level": 1, '
        '"agent_process": [123, 456], "rate_limit_waits": 3, "wall_clock_used_s": 12.5, '
        '"restart_reason": "stuck", "goal_guard_run": "r1", '
        '"cli_agent_cmd": "python agent.py", "cli_config_file": "/p/ci.toml"}\n'
        'agent: "command"\n'
        "---\n"
    )
    loaded = read_loop_state(path)
    # 0.1 remembered --agent-cmd and --config there; not the configuration itself
    assert loaded.settings == RunSettings(
        config=None, config_file="/p/ci.toml", agent="command", agent_cmd="python agent.py"
    )
    assert loaded.restarts == 2
    assert loaded.failed_approaches == ["a"]
    assert (loaded.stuck_nudge, loaded.stuck_level) == ("KeyError", 1)
    assert loaded.agent_process == [123, 456]
    assert (loaded.rate_limit_waits, loaded.wall_clock_used_s) == (3, 12.5)
    assert loaded.restart_reason == "stuck"
    assert loaded.extra == {"goal_guard_run": "r1"}  # only the plugins' values stay there


def test_recorded_settings_round_trip_and_bad_ones_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "loop-state.md"
    recorded = RunSettings(
        config={"completion_signal": "DONE", "limits": {"wall_clock_s": 8.0}},
        config_file="/p/loopctl.toml",
        agent="command",
        agent_cmd="python agent.py",
        no_plugins=True,
        env={"LOOPCTL_FAILURE_MEMORY": "/tmp/m.sqlite3"},
    )
    write_loop_state(path, LoopState(goal="g", original_goal="g", settings=recorded))
    assert read_loop_state(path).settings == recorded
    text = path.read_text()
    path.write_text(text.replace('"no_plugins": true', '"no_plugins": "yes"'))
    with pytest.raises(StateError, match=r"line \d+: `settings` has a bad `no_plugins`"):
        read_loop_state(path)
    path.write_text(text.replace('"agent": "command"', '"agent": "command", "later": 1'))
    assert read_loop_state(path).settings == recorded  # keys of a later version are ignored


SETTINGS_KEYS = ["config", "config_file", "agent", "agent_cmd", "no_plugins", "env", "origins"]


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.sampled_from([*SETTINGS_KEYS, "later"]), json_values, max_size=8))
def test_recorded_settings_of_any_shape_read_typed_or_raise_state_error(
    tmp_path_factory: pytest.TempPathFactory, value: dict[str, Any]
) -> None:
    path = tmp_path_factory.mktemp("settings") / "loop-state.md"
    path.write_text(f'---\ngoal: "g"\nsettings: {json_one_line(value)}\n---\n', encoding="utf-8")
    try:
        recorded = read_loop_state(path).settings
    except StateError as exc:
        message = str(exc)
    else:
        message = ""
    if message:
        assert "`settings`" in message
        return
    assert isinstance(recorded, RunSettings)
    assert recorded.config is None or isinstance(recorded.config, dict)
    assert isinstance(recorded.no_plugins, bool)
    assert all(isinstance(v, str) for v in [*recorded.env.values(), *recorded.origins.values()])
