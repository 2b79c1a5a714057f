"""Suggested actions: what to try, best evidence first, always two to four of them.

Order of sources: fixes that resolved similar failures before (from the failure memory), then
advice for the rule that fired, then the category's default actions ranked by how often they
worked (their *effectiveness*, learned across runs), then advice for the stage that failed.
Every suggestion has a stable ``key`` so the loop can count, per key, how often it was shown and
how often the failing tests it was about passed afterwards.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import attrs

from loopctl import redact
from loopctl_context_errors.categories import Category
from loopctl_context_errors.memory import SimilarFailure

MIN_ACTIONS = 2
MAX_ACTIONS = 4


@attrs.define(frozen=True)
class Suggestion:
    text: str
    #: memory, rule, category or stage.
    source: str
    key: str

    def to_json(self) -> dict[str, str]:
        return {"text": self.text, "source": self.source, "key": self.key}


#: Default actions per category, in their default order (effectiveness may reorder them).
CATEGORY_ACTIONS: dict[Category, tuple[tuple[str, str], ...]] = {
    Category.FILE_ACCESS: (
        (
            "check-path",
            "Check the path{subject}: is it relative to the directory the code runs "
            "in, and is it spelt the same as on disk (case matters)?",
        ),
        (
            "create-or-fixture",
            "If the file should exist, create it (or the test fixture) and "
            "commit it; if it is generated, run the step that generates it first.",
        ),
        (
            "permissions",
            "If the file exists, check its permissions and that it is a file, not a directory.",
        ),
    ),
    Category.FUNCTION_ERROR: (
        (
            "check-name",
            "Look up the exact name{subject}: is it defined, imported and spelt the "
            "same (including case) where it is used?",
        ),
        (
            "define-or-import",
            "Define the missing function/attribute, or import it from the "
            "module that provides it; check renamed or removed APIs.",
        ),
        (
            "api-version",
            "If it comes from a library, check the installed version's API: the "
            "name may have changed between versions.",
        ),
    ),
    Category.SYNTAX_ERROR: (
        (
            "open-location",
            "Open the file at the reported line and column{subject} and fix the "
            "syntax there (often a missing bracket, quote, colon or comma just before it).",
        ),
        (
            "run-parser",
            "Re-run the parser or compiler alone on that file to confirm it parses "
            "before running the tests again.",
        ),
        (
            "data-format",
            "If it is a data file (JSON, TOML, YAML), validate it: trailing commas "
            "and unquoted strings are the usual culprits.",
        ),
    ),
    Category.ASSERTION_FAILURE: (
        (
            "compare-values",
            "Compare the expected and actual values in the assertion{subject} "
            "and trace where the code computes the actual one.",
        ),
        (
            "fix-code-not-test",
            "Fix the code under test rather than the assertion, unless the "
            "test's expectation is provably wrong.",
        ),
        ("run-one-test", "Run only the failing test while you work, then the whole suite."),
    ),
    Category.TYPE_ERROR: (
        (
            "check-types",
            "Check the types at the reported line{subject}: what the value is, and "
            "what the operation, function or declaration expects.",
        ),
        (
            "guard-none",
            "If a value can be None/null/undefined there, handle that case before using it.",
        ),
        (
            "convert-explicitly",
            "Convert explicitly where a string must become a number (or the "
            "reverse), and keep signatures and call sites in agreement.",
        ),
    ),
    Category.TIMEOUT: (
        (
            "find-hang",
            "Find what the timed-out code waits for (a lock, a network call, a "
            "subprocess, an infinite loop) and make it finish or fail fast.",
        ),
        (
            "bound-waits",
            "Give every external wait its own short timeout so a hang fails with a "
            "clear error instead of the whole run timing out.",
        ),
        ("raise-limit", "Only if the work is legitimately slow, raise the time limit."),
    ),
    Category.MEMORY_ERROR: (
        (
            "find-growth",
            "Look for unbounded growth: recursion without a base case, a loop that "
            "keeps appending, or loading a whole large input at once.",
        ),
        ("stream", "Process large data in chunks or streams instead of all in memory."),
        (
            "native-crash",
            "For a segmentation fault, check native extensions and unsafe code, "
            "and run it under a debugger or sanitizer.",
        ),
    ),
    Category.NETWORK_ERROR: (
        (
            "service-running",
            "Check that the service{subject} is running and listening on that "
            "host and port before the tests start.",
        ),
        (
            "no-real-network",
            "Tests should not need the real network: use a local test server or a fake.",
        ),
        ("config-urls", "Check the configured URLs, host names, ports and proxy settings."),
    ),
    Category.RESOURCE_ERROR: (
        (
            "install-dependency",
            "Install the missing dependency{subject} and declare it in the "
            "project's dependency file, or fix the import/command name.",
        ),
        (
            "free-resource",
            "Free or raise the exhausted resource: disk space, open-file limit, "
            "or the port another process holds.",
        ),
        (
            "close-handles",
            "Close files and sockets you open (use with/try-finally) so they do not pile up.",
        ),
    ),
    Category.UNKNOWN: (
        (
            "read-decisive",
            "Read the decisive lines above and the full log for the first "
            "error; fix that one first.",
        ),
        (
            "reproduce",
            "Reproduce the failure with the single failing command or test, then narrow it down.",
        ),
    ),
}

#: Advice for specific rules, placed before the category defaults.
RULE_ACTIONS: dict[str, str] = {
    "resource.missing-python-module": "Install the module{subject} in the environment the tests "
    "run in (and add it to the project's dependencies), or correct the import name.",
    "resource.missing-js-package": "Install the package{subject} with npm (and add it to "
    "package.json), or correct the require/import name.",
    "resource.missing-crate": "Add the crate{subject} to Cargo.toml ([dependencies]), or fix "
    "the path in the use statement.",
    "resource.missing-java-class": "Put the library that provides{subject} on the classpath "
    "(build tool dependency), or fix the import.",
    "resource.missing-command": "Install the program{subject} or fix PATH; if it should be a "
    "script in the project, check its name and location.",
    "function.shell-undefined": "Define the shell function{subject} before it is called (or "
    "source the file that defines it).",
    "function.pytest-fixture": "Define the fixture{subject} in the test module or a conftest.py "
    "that pytest loads, or fix its name.",
    "function.missing-script": "Add the script{subject} to package.json's scripts, or call one "
    "that exists (`npm run` lists them).",
    "type.null-dereference": "The value{subject} is null/None/undefined where an object is "
    "needed: find why, and handle the empty case.",
    "memory.stack-overflow": "Check the recursion: it needs a base case that is reached; "
    "consider an iterative version.",
    "loopctl.test-command-timeout": "The whole test command hit loopctl's time limit: look for a "
    "test that hangs (run the suite with per-test timeouts).",
    "network.dns": "The host name does not resolve: check it for typos and use a local server "
    "in tests.",
    "resource.address-in-use": "Another process holds the port: stop it, or let the test bind "
    "port 0 and use the port it gets.",
    "resource.disk-full": "Free disk space (build caches, old artefacts, temp files) and check "
    "for runaway output.",
    "module.relative-missing": "The module path{subject} does not exist relative to the file "
    "that imports it: fix the path or create the module.",
}

#: Advice for the stage that failed.
STAGE_ACTIONS: dict[str, str] = {
    "tests": "Re-run the failing tests alone{tests} to confirm the fix before running the suite.",
    "agent": "The agent turn itself failed: check the agent CLI's output, credentials and "
    "limits before changing the code.",
    "build": "Run the build step alone and fix its first error before anything else.",
    "lint": "Run the linter alone on the reported files; apply its autofix where safe.",
}
GENERIC_STAGE_ACTION = (
    "Run the {stage} stage alone to reproduce the failure, then fix its first error."
)

_QUOTED = re.compile(r"'([^'\n]{1,80})'|\"([^\"\n]{1,80})\"|`([^`\n]{1,80})`|‘([^’\n]{1,80})’")


def subject_of(line: str) -> str:
    """The first quoted name in the decisive line (a file, a module, a function), or ""."""
    match = _QUOTED.search(line or "")
    if match is None:
        return ""
    return next(group for group in match.groups() if group is not None).strip()


def _fill(template: str, subject: str, tests: str, stage: str) -> str:
    text = template.replace("{subject}", f" `{subject}`" if subject else "")
    return text.replace("{tests}", tests).replace("{stage}", stage)


def effectiveness(stats: tuple[int, int] | None) -> float:
    """How likely a suggestion is to work: (effective + 1) / (shown + 2); 0.5 when untried."""
    shown, effective = stats if stats is not None else (0, 0)
    return (effective + 1) / (shown + 2)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "stage"


def candidate_keys(category: Category, rule: str | None, stage: str) -> list[str]:
    """Every key the default suggestions may use (to fetch their effectiveness in one query)."""
    keys = [f"category:{category.value}:{slug}" for slug, _ in CATEGORY_ACTIONS[category]]
    if rule and rule in RULE_ACTIONS:
        keys.append(f"rule:{rule}")
    keys.append(f"stage:{_slug(stage)}")
    return keys


def generate_suggested_actions(
    category: Category,
    *,
    stage: str = "tests",
    similar: Sequence[SimilarFailure] = (),
    rule: str | None = None,
    matched_line: str = "",
    failing_tests: Sequence[str] = (),
    stats: Mapping[str, tuple[int, int]] | None = None,
) -> list[Suggestion]:
    """Two to four suggestions, best evidence first. Never raises on odd input."""
    stats = stats or {}
    stage = redact(str(stage))
    subject = redact(subject_of(matched_line))
    shown_tests = ", ".join(failing_tests[:2])
    tests = f" ({shown_tests})" if shown_tests else ""
    picked: list[Suggestion] = []

    def add(suggestion: Suggestion) -> None:
        if len(picked) < MAX_ACTIONS and all(s.text != suggestion.text for s in picked):
            picked.append(suggestion)

    for item in similar:
        record = item.record
        if not record.fixed or len([s for s in picked if s.source == "memory"]) >= 2:
            continue
        files = ", ".join(record.fix_files[:4]) or "the code"
        where = f" {item.place()}" if record.project or not item.same_project else ""
        text = f"A {'matching' if item.match == 'exact' else 'similar'} failure{where} was fixed by changing {files}"
        if record.fix_suggestion:
            text += f' (the suggestion shown then: "{record.fix_suggestion[:300]}")'
        add(Suggestion(redact(text[:600]), "memory", f"memory:{record.signature}"))

    if rule and rule in RULE_ACTIONS:
        add(Suggestion(_fill(RULE_ACTIONS[rule], subject, tests, stage), "rule", f"rule:{rule}"))

    defaults = list(enumerate(CATEGORY_ACTIONS.get(category, CATEGORY_ACTIONS[Category.UNKNOWN])))
    defaults.sort(
        key=lambda pair: (
            -effectiveness(stats.get(f"category:{category.value}:{pair[1][0]}")),
            pair[0],
        )
    )
    room_for_stage = 1
    for _, (slug, template) in defaults:
        if len(picked) >= MAX_ACTIONS - room_for_stage:
            break
        add(
            Suggestion(
                _fill(template, subject, tests, stage),
                "category",
                f"category:{category.value}:{slug}",
            )
        )
    stage_template = STAGE_ACTIONS.get(stage, GENERIC_STAGE_ACTION)
    add(Suggestion(_fill(stage_template, subject, tests, stage), "stage", f"stage:{_slug(stage)}"))
    for slug, template in CATEGORY_ACTIONS[Category.UNKNOWN]:
        if len(picked) >= MIN_ACTIONS:
            break
        add(
            Suggestion(
                _fill(template, subject, tests, stage), "category", f"category:UNKNOWN:{slug}"
            )
        )
    return [attrs.evolve(s, text=redact(s.text)) for s in picked[:MAX_ACTIONS]]


__all__ = [
    "CATEGORY_ACTIONS",
    "RULE_ACTIONS",
    "STAGE_ACTIONS",
    "Suggestion",
    "candidate_keys",
    "effectiveness",
    "generate_suggested_actions",
    "subject_of",
]
