"""The two plugins name one failure alike: every dependency failure in the failure
classifier's corpus of real output (``plugins/failure-classifier/tests/corpus``, labelled
``dependency_issue``) is a ``RESOURCE_ERROR`` here, but for the differences listed with their
reason (a rule here reads one line; the classifier also reads the traceback and the project)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopctl_context_errors.categories import categorize

CORPUS = Path(__file__).resolve().parents[2] / "failure-classifier" / "tests" / "corpus"

#: Case id -> why this plugin names it otherwise.
DIFFERENCES = {
    "py-dep-installed-mismatch": "`cannot import name` is a missing member on one line; the "
    "classifier sees from the traceback that an installed package asked for it",
    "py-dep-installed-mismatch-script": "as py-dep-installed-mismatch",
    "pytest-plugin-fixture": "`fixture 'mocker' not found` reads as a fixture the project lacks",
    "cargo-path-dep": "a path dependency's Cargo.toml is a file that does not exist",
    "py-installed-attr-mismatch": "`module … has no attribute` is a missing member on one line; "
    "the classifier sees from the traceback that an installed package asked for it",
    # Issue 27's new ecosystems: one line says nothing about a dependency, and this plugin's
    # own corpus labels the same wording otherwise (its test_no_case_regresses keeps that).
    "kt-unresolved-import": "kotlinc's `unresolved reference: squareup` is a name the compiler "
    "cannot find; only the next line shows it is an import of a library",
    "ex-dep-module-unavailable": "`function Decimal.add/2 is undefined (module Decimal is not "
    "available)` is worded as for the project's own module (e2-elixir-module-missing here is "
    "FUNCTION_ERROR); whose module it is, is not on the line",
    "java-nosuchmethod-old-jar": "`NoSuchMethodError` names a method that does not exist at run "
    "time; this corpus labels it FUNCTION_ERROR (e-java-nosuchmethod), the classifier knows "
    "the jar is a dependency",
    "h-php-extension-function": "`Call to undefined function imagecreatetruecolor()` is an "
    "undefined name; that an extension (gd) provides it is not in the output",
    # The fifth round (fresh_round.py), labelled there before either plugin saw it.
    "e4-exec-tool-permission": "`/opt/tools/bin/fmtcheck: Permission denied` is a FILE_ACCESS "
    "here by definition; the classifier sees the program lies outside the project",
    "e4-erlang-dep-undef": "Erlang's `{undef,[{jsx,encode,…` reads as a function that does not "
    "exist (e4-erlang-own-undef, the project's own, is FUNCTION_ERROR); whose module it is, "
    "is not on the line",
    "e4-cpanm-missing": "cpanm's first line is the mirror's index, a file that does not exist",
    "h-gxx-std-too-new": "g++'s `unrecognized command-line option ‘-std=c++29’` reads as a wrong "
    "build flag as much as a compiler too old for the standard",
}


def _dependency_cases() -> list[Path]:
    found = []
    for case in sorted([*CORPUS.glob("cases/*"), *CORPUS.glob("heldout/*")]):
        meta = json.loads((case / "case.json").read_text(encoding="utf-8"))
        if meta["label"] == "dependency_issue" and meta["kind"] == "logs":
            found.append(case)
    return found


CASES = _dependency_cases()


@pytest.mark.skipif(not CASES, reason="the failure classifier's corpus is not in this checkout")
@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_a_dependency_failure_is_a_resource_error(case: Path) -> None:
    logs = sorted((case / "logs").glob("*.log"), key=lambda p: int(p.stem))
    found = categorize(logs[-1].read_text(encoding="utf-8"))
    if case.name in DIFFERENCES:
        assert found.category.value != "RESOURCE_ERROR", f"{case.name} agrees now: drop it"
    else:
        assert found.category.value == "RESOURCE_ERROR", (case.name, found.rule)


def test_the_corpus_has_the_dependency_failures_of_every_ecosystem() -> None:
    if not CASES:
        pytest.skip("the failure classifier's corpus is not in this checkout")
    assert len(CASES) >= 90
    assert set(DIFFERENCES) <= {case.name for case in CASES}
