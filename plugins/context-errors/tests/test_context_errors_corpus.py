"""Accuracy on the labelled corpus of real tool output (targets: >= 90 %, UNKNOWN <= 5 %)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from context_errors_testkit import CORPUS, DOCS_PAGE, PLUGIN_ROOT, corpus_cases, corpus_manifest

from loopctl_context_errors.categories import Category

CATEGORY_NAMES = {c.value for c in Category}

#: The cases the categorizer gets wrong, and why; any other miss is a regression.
KNOWN_MISSES = {
    "h-nodetest-reject": "a node --test failure with a plain Error: the failed-test hint "
    "calls it an assertion",
    "e-gradle-junit-timeout": "Gradle 4.4 prints only `1 test completed, 1 failed`: the JUnit "
    "timeout is in its HTML report, not in the output",
    "e2-kotlin-missing-library": "kotlinc says `unresolved reference: kotlinx` on an import: "
    "a missing library reads as a missing name",
    # the fourth round (fresh_round.py): one line does not tell whose module it is, or
    # what a missing file is
    "e4-lua-own-module": "Lua's `module 'app.formatting' not found` is worded as for a rock "
    "that is not installed; only the project's app/ shows it is its own (the failure "
    "classifier reads that)",
    "e4-erlang-dep-undef": "Erlang's `{undef,[{jsx,encode,…` is worded as for the project's "
    "own function that does not exist; only the project shows jsx is not its own",
    "e4-cpanm-missing": "cpanm first says the mirror's package index is a file that does not "
    "exist (`cannot open file '…02packages.details.txt.gz'`), then which module it lacks",
}


def _accuracy_script() -> ModuleType:
    path = PLUGIN_ROOT / "scripts" / "accuracy.py"
    spec = importlib.util.spec_from_file_location("context_errors_accuracy", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def scores() -> tuple[object, ...]:
    return _accuracy_script().evaluate()  # type: ignore[no-any-return]


def test_corpus_is_real_generated_output_with_provenance() -> None:
    manifest = corpus_manifest()
    assert manifest["generated_by"] == "tests/corpus/generate.py"
    assert {"python", "node", "cargo", "javac", "jest", "tsc"} <= set(manifest["tools"])
    cases = corpus_cases()
    assert len(cases) >= 200
    tools = {case["tool"] for case in cases}
    assert {"python", "pytest", "unittest", "mypy", "ruff", "node", "node-test", "jest", "tsc",
            "npm", "cargo", "rustc", "java", "shell"} <= tools  # fmt: skip
    for case in cases:
        assert case["label"] in CATEGORY_NAMES, case["id"]
        assert case["command"], case["id"]
        assert case["exit_code"] != 0, f"{case['id']} did not fail"
        assert (CORPUS / case["file"]).is_file(), case["id"]
    # every category occurs, and the holdout covers most of them
    assert {case["label"] for case in cases} == CATEGORY_NAMES
    holdout = {case["label"] for case in cases if case["id"].startswith("h-")}
    assert len(holdout) >= 9


def test_accuracy_and_unknown_rate_meet_the_targets(scores: tuple) -> None:  # type: ignore[type-arg]
    dev, holdout, *_ = scores
    for part in (dev, holdout):
        assert part.total > 50
        assert part.accuracy >= 0.90, (part.name, part.misses())
        assert part.unknown_rate <= 0.05, (part.name, part.misses())


def test_the_ecosystem_batch_meets_the_targets_per_ecosystem(scores: tuple) -> None:  # type: ignore[type-arg]
    _, _, ecosystems, *_ = scores
    assert ecosystems.total >= 100
    assert ecosystems.accuracy >= 0.90, ecosystems.misses()
    assert ecosystems.unknown_rate <= 0.05, ecosystems.misses()
    for name, predictions in ecosystems.by_ecosystem().items():
        right = sum(1 for p in predictions if p.label == p.predicted)
        assert name, "an ecosystem case without its ecosystem"
        assert right / len(predictions) >= 0.90, (name, right, len(predictions))


def test_no_case_regresses(scores: tuple) -> None:  # type: ignore[type-arg]
    """Every case but the known misses is categorized as labelled (a fixed miss: drop it)."""
    missed = {p.id: (p.label, p.predicted, p.rule) for part in scores for p in part.misses()}
    assert set(missed) == set(KNOWN_MISSES), missed


def test_first_sight_was_recorded_for_every_ecosystem_case(scores: tuple) -> None:  # type: ignore[type-arg]
    """What the rules said before any was written for the batch stays on record."""
    _, _, ecosystems, second, third, fourth, fourth_held_out = scores
    seen = _accuracy_script().first_sight()
    rounds = (ecosystems, second, third, fourth, fourth_held_out)
    assert set(seen) == {p.id for part in rounds for p in part.predictions}
    assert set(seen.values()) <= CATEGORY_NAMES
    first = sum(1 for p in ecosystems.predictions if seen[p.id] == p.label)
    assert first == 54  # 43.5 %: the figure the docs give as first sight
    first = sum(1 for p in second.predictions if seen[p.id] == p.label)
    # 52.9 % (18/34) as labelled then; e2-nix-not-function was relabelled to the documented
    # definition afterwards, which its first-sight prediction already gave
    assert first == 19
    assert second.accuracy >= 0.90, second.misses()
    first = sum(1 for p in third.predictions if seen[p.id] == p.label)
    assert first == 8  # 40.0 %: the third round's
    assert third.accuracy >= 0.90, third.misses()
    first = sum(1 for p in fourth.predictions if seen[p.id] == p.label)
    assert first == 12  # 34.3 %: the fourth round's (fresh_round.py), before its rules
    assert fourth.accuracy >= 0.90, fourth.misses()
    first = sum(1 for p in fourth_held_out.predictions if seen[p.id] == p.label)
    assert first == 2  # 22.2 %: its held-out check, after the fourth round's rules


def test_confusion_matrix_accounts_for_every_case(scores: tuple) -> None:  # type: ignore[type-arg]
    dev, *_ = scores
    matrix = dev.confusion()
    assert sum(sum(row.values()) for row in matrix.values()) == dev.total
    assert sum(matrix[c][c] for c in matrix) == dev.correct


def test_docs_page_shows_the_current_numbers(scores: tuple) -> None:  # type: ignore[type-arg]
    if not DOCS_PAGE.exists():
        pytest.skip("the docs page is not part of this checkout")
    script = _accuracy_script()
    block = script.render_block(*scores, seen=script.first_sight())
    assert script.docs_block(DOCS_PAGE) == block, (
        "docs/plugins/context-errors.md is stale: run plugins/context-errors/scripts/accuracy.py"
    )


def test_generator_defines_every_case_in_the_manifest() -> None:
    text = "".join(
        (CORPUS / name).read_text(encoding="utf-8")
        for name in ("generate.py", "ecosystems.py", "fresh_round.py")
    )
    for case in corpus_cases():
        assert f'"{case["id"]}"' in text, case["id"]


def test_case_logs_are_not_empty_where_tools_speak() -> None:
    silent = {"sh-unknown-grep"}  # grep -q says nothing by design
    for case in corpus_cases():
        if case["id"] in silent:
            continue
        assert Path(CORPUS / case["file"]).read_text(encoding="utf-8").strip(), case["id"]


def test_first_sight_is_recorded_once_and_never_rewritten(tmp_path: Path) -> None:
    script = _accuracy_script()
    path = tmp_path / "first_sight.json"

    def scores(**predicted: str) -> object:
        cases = [script.Prediction(i, "t", "TYPE_ERROR", c, "r") for i, c in predicted.items()]
        return script.Scores("new", cases)

    assert script.record_first_sight(scores(a="UNKNOWN"), path) == 1
    # a later run with better rules keeps what was seen first, and adds only new cases
    assert script.record_first_sight(scores(a="TYPE_ERROR", b="TIMEOUT"), path) == 1
    assert script.first_sight(path) == {"a": "UNKNOWN", "b": "TIMEOUT"}
    assert script.record_first_sight(scores(a="TYPE_ERROR"), path) == 0
    assert script.first_sight(path) == {"a": "UNKNOWN", "b": "TIMEOUT"}
