"""Reports (terminal, GitHub markdown, JSON) and suggested actions."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopctl_context_errors.categories import Category, categorize
from loopctl_context_errors.memory import FailureMemory, FailureRecord, SimilarFailure
from loopctl_context_errors.report import (
    GITHUB_COMMENT_LIMIT,
    SECTIONS,
    build_report,
    fenced,
    md_escape,
    render_github,
    render_json,
    render_markdown,
    render_plain,
    render_terminal,
    use_color,
)
from loopctl_context_errors.suggest import (
    CATEGORY_ACTIONS,
    MAX_ACTIONS,
    MIN_ACTIONS,
    generate_suggested_actions,
)

LOG = (
    "Traceback (most recent call last):\n"
    '  File "/app/main.py", line 3, in <module>\n'
    "    open('config/settings.json')\n"
    "FileNotFoundError: [Errno 2] No such file or directory: 'config/settings.json'\n"
)
BOX = re.compile(r"[─│╭╮╰╯┌┐└┘━┃]")


def _report(**kwargs: object):  # type: ignore[no-untyped-def]
    defaults: dict[str, object] = {
        "stage": "tests",
        "iteration": 3,
        "goal": "make the config loader work",
        "issue": "#42",
    }
    defaults.update(kwargs)
    text = str(defaults.pop("text", LOG))
    return build_report(text, **defaults)  # type: ignore[arg-type]


def _fixed(project: str = "shop") -> SimilarFailure:
    record = FailureRecord(
        id=7, signature="abc", category="FILE_ACCESS", rule="file.not-found", stage="tests",
        project=project, decisive=["FileNotFoundError: x"], created_at=1.0, last_seen=1.0,
        resolved_at=2.0, fix_files=["config/settings.json"], fix_suggestion="create the file",
    )  # fmt: skip
    return SimilarFailure(record, 1.0, "exact")


def test_four_sections_with_stage_iteration_issue_goal() -> None:
    report = _report()
    for text in (render_plain(report), render_markdown(report), render_github(report)):
        for section in SECTIONS:
            assert section in text
        assert "tests" in text
        assert "3" in text
        assert "42" in text
        assert "config loader" in text
        assert "FILE_ACCESS" in text
        assert "file.not-found" in text
    data = render_json(report)
    assert data["category"] == "FILE_ACCESS"
    assert data["rule"] == "file.not-found"
    assert data["decisive_lines"][-1].startswith("FileNotFoundError")
    assert data["issue"] == "#42"
    assert data["iteration"] == 3
    assert MIN_ACTIONS <= len(data["suggested_actions"]) <= MAX_ACTIONS
    assert data["similar_failures"] == []
    assert data["memory"]["status"] == "disabled"
    json.dumps(data)


def test_terminal_is_plain_without_colour_and_boxed_with_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    report = _report()
    monkeypatch.setenv("NO_COLOR", "1")
    assert use_color() is False
    plain = render_terminal(report)
    assert not BOX.search(plain)
    assert "\x1b[" not in plain
    assert "== What Failed ==" in plain
    monkeypatch.delenv("NO_COLOR")
    coloured = render_terminal(report, color=True)
    assert BOX.search(coloured)
    assert "\x1b[" in coloured
    assert "What Failed" in coloured
    assert "Suggested Actions" in coloured


def test_github_comment_escapes_log_and_collapses_it() -> None:
    hostile = (
        "</details><script>alert(1)</script> @octocat see #12 [click](https://evil.example)\n"
        "```\n# Heading\n- [ ] task\n<img src=x onerror=alert(1)>\n"
        "TypeError: boom ``` </details>\n"
    )
    report = _report(text=hostile, goal="<b>goal</b> @someone", issue="<i>#1</i>")
    comment = render_github(report)
    assert "<details><summary>" in comment
    assert comment.rstrip().endswith("</details>")
    # outside code blocks no log or user text becomes markup
    outside = re.sub(r"(?ms)^(`{3,})text\n.*?^\1$", "", comment)
    for raw in ("<script", "<img", "<b>", "<i>", "@octocat", "@someone", "](https"):
        assert raw not in outside, raw
    assert outside.count("<details>") == 1
    assert outside.count("</details>") == 1
    # the log itself is in a fence no backtick run in it can close
    fence = re.search(r"(?m)^(`{3,})text$", comment.split("<details>")[1])
    assert fence is not None
    assert len(fence.group(1)) > 3


def test_fence_and_escape_helpers() -> None:
    assert fenced("a ```` b").startswith("`````text\n")
    assert fenced("plain").startswith("```text\n")
    assert md_escape("a\nb") == "a b"
    assert "&lt;" in md_escape("<x>")
    assert "@\u200b" in md_escape("@bob")
    assert "https\u200b:" in md_escape("https://x.example")


@settings(max_examples=40, deadline=None)
@given(st.text(min_size=0, max_size=2000), st.integers(min_value=0, max_value=400))
def test_github_comment_always_fits(chunk: str, repeats: int) -> None:
    log = (chunk + "\n") * repeats + "AssertionError: " + "`" * 50 + "\n"
    report = _report(text=log, goal=chunk * 3)
    comment = render_github(report)
    assert len(comment) <= GITHUB_COMMENT_LIMIT
    assert len(render_github(report, max_chars=5000)) <= 5000


def test_a_huge_log_is_trimmed_from_the_start_into_the_limit() -> None:
    lines = [f"line {i} " + "x" * 150 for i in range(2000)] + ["E   assert 1 == 2"]
    comment = render_github(_report(text="\n".join(lines)))
    assert len(comment) <= GITHUB_COMMENT_LIMIT
    assert "E   assert 1 == 2" in comment
    assert "line 0 " not in comment


def test_similar_fixes_come_first_in_suggestions_and_report() -> None:
    found = categorize(LOG)
    actions = generate_suggested_actions(
        found.category, similar=[_fixed()], rule=found.rule_name, matched_line=found.matched_line
    )
    assert actions[0].source == "memory"
    assert "config/settings.json" in actions[0].text
    assert "create the file" in actions[0].text
    assert [a.source for a in actions[1:]] == sorted(
        (a.source for a in actions[1:]), key=["rule", "category", "stage"].index
    )
    report = build_report(LOG, similar=None)
    assert report.similar == []


def test_effectiveness_reorders_category_defaults() -> None:
    keys = [f"category:TYPE_ERROR:{slug}" for slug, _ in CATEGORY_ACTIONS[Category.TYPE_ERROR]]
    plain = generate_suggested_actions(Category.TYPE_ERROR)
    assert plain[0].key == keys[0]
    stats = {keys[0]: (10, 0), keys[2]: (4, 4)}
    ranked = generate_suggested_actions(Category.TYPE_ERROR, stats=stats)
    assert ranked[0].key == keys[2]
    assert keys[0] not in [a.key for a in ranked[:2]]


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(list(Category)),
    st.text(max_size=40),
    st.lists(st.booleans(), max_size=5),
    st.one_of(st.none(), st.text(max_size=30)),
    st.text(max_size=200),
)
def test_always_two_to_four_distinct_suggestions(
    category: Category, stage: str, fixed: list[bool], rule: str | None, line: str
) -> None:
    similar = []
    for i, is_fixed in enumerate(fixed):
        item = _fixed(f"p{i}")
        if not is_fixed:
            item.record.resolved_at = None
        similar.append(item)
    actions = generate_suggested_actions(
        category, stage=stage, similar=similar, rule=rule, matched_line=line
    )
    assert MIN_ACTIONS <= len(actions) <= MAX_ACTIONS
    assert len({a.text for a in actions}) == len(actions)
    assert all(a.key and a.text for a in actions)


def test_report_uses_the_memory(tmp_path: Path) -> None:
    memory = FailureMemory(tmp_path / "m.sqlite3")
    found = categorize(LOG)
    failure = memory.record_failure(decisive=found.decisive_lines, category="FILE_ACCESS")
    assert failure is not None
    memory.record_fix(failure, files=["config/settings.json"], suggestion="add the file")
    report = build_report(LOG, memory=memory)
    assert report.memory_status == "ok"
    assert report.similar
    assert report.similar[0].match == "exact"
    assert report.suggestions[0].source == "memory"
    assert "config/settings.json" in render_github(report)


def test_seed_named_functions() -> None:
    import loopctl_context_errors as ce

    assert ce.categorize_error(LOG) == "FILE_ACCESS"
    assert ce.categorize_error("") == "UNKNOWN"
    text = ce.format_context_error_report(LOG, "build", 4, "the goal", "#9", color=False)
    for section in SECTIONS:
        assert section in text
    assert "build" in text
    assert "#9" in text
    comment = ce.format_github_error_comment(LOG, "build", 4, "the goal", "#9")
    assert "<details>" in comment
    assert ce.query_similar_failures(LOG) == []  # the (private, empty) memory has nothing
