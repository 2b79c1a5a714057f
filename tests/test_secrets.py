"""Nothing secret leaves loopctl in clear, and nothing an agent prints drives the user's terminal.

The corpus test plants a secret of every kind the redactor knows in the test output (printed,
in assertion messages and in test ids), in the agent's output (its messages and a tool's
output), in the goal and so in goal-guard's notes, and the value of a withheld variable in all of
them; it runs a real loop through the ``loopctl`` command with every first-party plugin, then
every report and query command, and searches every file under ``.loopctl/``, the failure
memory and every captured output for each secret. The hostile-agent test does the same for
terminal control: an agent whose stderr and final message carry OSC 52, a window title, a clear
screen, the C1 CSI, CR and BS.

Only the ``loopctl`` command and files are used here (no loopctl API), so the same tests run
against an older loopctl to count what it leaked: with ``LOOPCTL_SECRETS_REPORT=FILE`` set, the
corpus test writes its counts (kinds × places, hits) to FILE before it asserts.
"""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path
from typing import Any

from loopctl import state as st

_RANDOM = random.Random(20240512)
ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def _token(size: int, alphabet: str = ALNUM) -> str:
    body = "".join(_RANDOM.choice(alphabet) for _ in range(size - 3))
    return "Kq" + body + "7"  # an upper and a lower case letter and a digit, like any key


_PEM_LINE = _token(64, ALNUM + "+/")
_AWS_SECRET = _token(40, ALNUM + "+/")
#: kind -> (the secret as planted, the part that must never be seen again)
CORPUS: dict[str, tuple[str, str]] = {}


def _add(kind: str, planted: str, hidden: str) -> None:
    CORPUS[kind] = (planted, hidden)


_add(
    "aws access key id",
    "AKIA" + (key := _token(16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567").upper()),
    key,
)
_add("aws secret key after 'secret'", f"secret {_AWS_SECRET}", _AWS_SECRET)
for _prefix in ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"):
    _add(f"github {_prefix}", _prefix + (key := _token(36)), key)
_add("github_pat_", "github_pat_" + (key := _token(82, ALNUM + "_")), key)
_add("gitlab glpat-", "glpat-" + (key := _token(20)), key)
_add("slack xoxb-", "xoxb-2048204820-4096409640-" + (key := _token(24)), key)
_add("slack webhook", "https://hooks.slack.com/services/" + (key := _token(44)), key)
_add("stripe sk_live_", "sk_live_" + (key := _token(24)), key)
_add("google AIza", "AIza" + (key := _token(35)), key)
_add(
    "private key block",
    f"-----BEGIN RSA PRIVATE KEY-----\n{_PEM_LINE}\n{_token(64)}\n-----END RSA PRIVATE KEY-----",
    _PEM_LINE,
)
_add("jwt", f"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ{(key := _token(24))}.{_token(30)}", key)
_add("password in a url", f"https://deploy:{(key := _token(18))}@git.example.com/x.git", key)
_add("pypi", "pypi-AgEIcHlwaS5vcmc" + (key := _token(80, ALNUM + "-_")), key)
_add("sendgrid", f"SG.{_token(22)}.{(key := _token(43))}", key)
_add("twilio", "SK" + (key := "".join(_RANDOM.choice("0123456789abcdef") for _ in range(32))), key)
_add("telegram bot", f"bot 7312045617:AA{(key := _token(33))}", key)
_add(
    "databricks",
    "dapi" + (key := "".join(_RANDOM.choice("0123456789abcdef") for _ in range(32))),
    key,
)
_add(
    "hugging face",
    "hf_" + (key := "".join(_RANDOM.choice("abcdefghijKLMNOPQRST") for _ in range(34))),
    key,
)
_add("openai", "sk-proj-" + (key := _token(48)), key)
_add("anthropic", "sk-ant-api03-" + (key := _token(93)) + "AA", key)
_add("bearer header", f"Authorization: Bearer {(key := _token(32))}", key)
_add("basic header", f"Authorization: Basic {(key := _token(24))}", key)
_add("password=", f"DB_PASSWORD={(key := _token(14))}", key)
_add("token=", f"X_SERVICE_TOKEN={(key := _token(24))}", key)
_add("secret=", f"client_secret={(key := _token(20))}", key)
#: A withheld variable's value has no shape at all: only withhold_env says it is a secret.
WITHHELD_NAME, WITHHELD_VALUE = "CORPUS_DEPLOY_HANDLE", "plain-words-" + _token(10).lower()
_add("withheld variable's value", WITHHELD_VALUE, WITHHELD_VALUE)
#: Test ids carry these too (parametrized ids end up in records, events and notes).
ID_KINDS = ("github ghp_", "aws access key id", "stripe sk_live_", "hugging face", "openai")

PLANTED = "\n".join(f"{kind}: {planted}" for kind, (planted, _) in CORPUS.items())

TEST_FILE = f"""\
import os
from pathlib import Path

import pytest

PLANTED = {PLANTED!r}
IDS = {[CORPUS[k][0] for k in ID_KINDS]!r}


@pytest.mark.parametrize("leaked", IDS, ids=IDS)
def test_service(leaked):
    print("config dump:")
    print(PLANTED)
    print("withheld variable seen by the tests:", os.environ.get({WITHHELD_NAME!r}, "(none)"))
    assert Path("fixed.txt").exists(), "the service rejected " + leaked + " and " + PLANTED
"""


def _turns() -> list[list[dict[str, Any]]]:
    """Two turns that only talk (secrets in messages and in a tool's output), then the fix."""
    talk = [{"say": f"Looking at the failure. I found:\n{PLANTED}"}]
    tool = {
        "run": "printf '%s\\n' " + " ".join(f"'{p}'" for p, _ in CORPUS.values() if "'" not in p)
    }
    return [
        [*talk, tool, {"say": "not fixed yet"}],
        [*talk, {"say": "still not fixed"}],
        [{"say": "fixing"}, {"write": "fixed.txt", "content": "ok\n"}, {"done": True}],
    ]


def _search(places: dict[str, bytes]) -> dict[str, list[str]]:
    """kind -> the places where its secret was found."""
    return {
        kind: [place for place, data in places.items() if hidden.encode() in data]
        for kind, (_, hidden) in CORPUS.items()
    }


def test_no_secret_of_any_kind_reaches_any_file_or_output(sandbox: Any, tmp_path: Path) -> None:
    memory = tmp_path / "memory.sqlite3"
    box = sandbox
    box.project.write("test_service.py", TEST_FILE)
    box.project.commit("a test that prints secrets")
    test_cmd = f"{sys.executable} -m pytest -q -p no:cacheprovider test_service.py"
    box.configure(test_cmd=test_cmd, max_iterations=5)
    config = box.project.read("loopctl.toml")
    box.project.write(
        "loopctl.toml",
        f"withhold_env = [{WITHHELD_NAME!r}]\n"
        + config
        + f"\n[plugins.context-errors]\nmemory_path = {json.dumps(str(memory))}\n",
    )
    box.script(_turns())
    os.environ[WITHHELD_NAME] = WITHHELD_VALUE  # the loop's environment (copied by box.env)
    raw_log = tmp_path / "raw-test-output.log"  # outside .loopctl: the commands must redact
    raw_log.write_text(f"FAILED test_service.py::test_service\n{PLANTED}\nE  AssertionError\n")
    try:
        outputs: dict[str, str] = {}
        run = box.run("run", f"Make test_service pass. Context:\n{PLANTED}", timeout=240)
        outputs["run (plain)"] = run.stdout + run.stderr
        commands = {
            "status": ["status"],
            "status --json": ["status", "--json"],
            "classify": ["classify", str(box.state_dir)],
            "classify --json": ["classify", str(box.state_dir), "--json"],
            "classify --log": ["classify", "--log", str(raw_log)],
            "classify --log --json": ["classify", "--log", str(raw_log), "--json"],
            "config show": ["config", "show"],
            "goal show": ["goal", "show"],
            "goal notes": ["goal", "notes"],
            "goal notes --json": ["goal", "notes", "--json"],
            "memory search": ["memory", "search", "--memory", str(memory), "AssertionError"],
        }
        for fmt in ("terminal", "github", "json"):
            commands[f"errors report --format {fmt}"] = [
                "errors", "report", str(raw_log), "--format", fmt, "--memory", str(memory),
                "--goal", PLANTED,
            ]  # fmt: skip
        commands["errors similar"] = ["errors", "similar", str(raw_log), "--memory", str(memory)]
        for name, args in commands.items():
            done = box.run(*args, timeout=120)
            outputs[name] = done.stdout + done.stderr
    finally:
        del os.environ[WITHHELD_NAME]
    places: dict[str, bytes] = {
        f".loopctl/{path.relative_to(box.state_dir)}": path.read_bytes()
        for path in sorted(box.state_dir.rglob("*"))
        if path.is_file()
    }
    for path in sorted(tmp_path.glob("memory.sqlite3*")):
        places[f"memory: {path.name}"] = path.read_bytes()
    places.update({f"output: loopctl {name}": text.encode() for name, text in outputs.items()})
    found = _search(places)
    hits = sum(len(where) for where in found.values())
    summary = {
        "kinds": len(CORPUS),
        "places": len(places),
        "pairs": len(CORPUS) * len(places),
        "hits": hits,
        "found": {kind: where for kind, where in found.items() if where},
        "run_exit_code": run.returncode,
    }
    report = os.environ.get("LOOPCTL_SECRETS_REPORT")
    if report:
        Path(report).write_text(json.dumps(summary, indent=2), encoding="utf-8")
    # the loop really ran through its failures to the fix, with every plugin
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    start = next(e for e in box.events() if e["type"] == "loop.start")
    plugins = start["plugins"]
    for name in ("context-errors", "context-monitor", "failure-classifier", "goal-guard"):
        assert name in plugins
    assert len(box.iterations()) == 3
    assert (box.state_dir / "goal-guard" / "notes.jsonl").exists()
    assert memory.exists()
    assert hits == 0, json.dumps(summary["found"], indent=1)


# --- terminal control ---------------------------------------------------------------------------

HOSTILE = (
    "clip\x1b]52;c;ZXZpbCBjbGlwYm9hcmQ=\x07 title\x1b]0;owned title\x07 clear\x1b[2J\x1b[H "
    "csi\x9b2J over\rwritten back\x08\x08\x08space bell\x07"
)
AGENT = f"""\
import sys
sys.stdin.read()
sys.stdout.write({HOSTILE!r} + "\\n")
sys.stderr.write({HOSTILE!r} + "\\n")
sys.exit(1)
"""
CONTROL = {chr(c) for c in [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)]} - {"\t", "\n"}


def test_a_hostile_agent_cannot_drive_the_terminal(sandbox: Any) -> None:
    box = sandbox
    box.project.write("agent.py", AGENT)
    box.project.commit("the hostile agent")
    box.configure(limits={"max_agent_crashes": 0})
    agent_cmd = f"{sys.executable} agent.py"
    run = box.run("run", "Fix add.", "--agent-cmd", agent_cmd, timeout=120)
    assert run.returncode == 13, run.stdout + run.stderr  # agent_error: its stderr is the reason
    status = box.run("status")
    status_json = box.run("status", "--json")
    report_md = (box.state_dir / st.REPORT_MD_FILE).read_text("utf-8")
    shown = {
        "run stdout": run.stdout,
        "run stderr": run.stderr,
        "report.md": report_md,
        "progress.md": (box.state_dir / st.PROGRESS_FILE).read_text("utf-8"),
        "status": status.stdout + status.stderr,
        "status --json": status_json.stdout,
    }
    # the agent's words did arrive (the test would pass vacuously otherwise), without control
    assert "written" in run.stdout
    assert "space bell" in status.stdout
    assert "clip" in report_md
    for name, text in shown.items():
        assert not CONTROL & set(text), (name, sorted(CONTROL & set(text)))
    assert "csi\x9b2J" in json.loads(status_json.stdout)["state"]["reason"]  # exact, escaped
