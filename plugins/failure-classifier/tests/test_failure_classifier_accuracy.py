"""Accuracy on the corpus of real failure output, against the issue's targets, and the
published figures in the docs are the ones the corpus gives now."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "accuracy.py"


def load_accuracy() -> ModuleType:
    spec = importlib.util.spec_from_file_location("failure_classifier_accuracy", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def measured() -> tuple[ModuleType, dict]:
    accuracy = load_accuracy()
    _, report = accuracy.run()
    return accuracy, report


@pytest.mark.slow
def test_the_corpus_is_big_enough_and_covers_every_mode(measured: tuple[ModuleType, dict]) -> None:
    accuracy, report = measured
    assert report["cases"] >= 140
    assert report["sets"]["held-out"]["cases"] >= 30
    for mode in accuracy.MODES:
        assert report["per_mode"][mode]["support"] >= 4, mode
    assert {"pytest", "npm", "cargo", "go test", "tsc", "mypy", "pip", "loopctl"} <= set(
        report["tools"]
    )


def test_accuracy_meets_the_targets(measured: tuple[ModuleType, dict]) -> None:
    accuracy, report = measured
    assert report["crashes"] == 0, report["errors"]
    assert report["macro_f1"] >= accuracy.TARGET_MACRO_F1, report["errors"]
    assert report["per_mode"]["test_flakiness"]["precision"] >= accuracy.TARGET_FLAKY_PRECISION


def test_the_docs_show_the_current_figures(measured: tuple[ModuleType, dict]) -> None:
    accuracy, report = measured
    if not accuracy.DOCS.exists():
        pytest.skip("the docs are not part of this checkout")
    text = accuracy.DOCS.read_text(encoding="utf-8")
    block = text.split(accuracy.START, 1)[1].split(accuracy.END, 1)[0].strip()
    assert block == accuracy.render(report).strip(), (
        "regenerate with: python plugins/failure-classifier/scripts/accuracy.py --write-docs"
    )


def test_every_case_has_provenance() -> None:
    accuracy = load_accuracy()
    import json

    cases = accuracy.case_dirs()
    assert len(cases) >= 140
    for case in cases:
        meta = json.loads((case / "case.json").read_text(encoding="utf-8"))
        assert meta["label"] in accuracy.MODES, case.name
        assert meta["commands"], case.name
        assert meta["tool"], case.name
        assert meta["description"], case.name
        assert (case / "logs").is_dir() or (case / "state").is_dir(), case.name


def test_every_case_classifies_as_labelled_but_the_explained_misses(
    measured: tuple[ModuleType, dict],
) -> None:
    accuracy, report = measured
    missed = {row["id"]: f"{row['label']} -> {row['predicted']}" for row in report["errors"]}
    assert set(missed) == set(accuracy.KNOWN_MISSES), missed
    for case_id, why in accuracy.KNOWN_MISSES.items():
        assert why, case_id


def test_every_ecosystem_has_dependency_failures_and_code_errors(
    measured: tuple[ModuleType, dict],
) -> None:
    _, report = measured
    ecosystems = report["ecosystems"]
    assert "other" not in ecosystems, "give the new tool an ecosystem in accuracy.ECOSYSTEMS"
    for name in ("Python", "JavaScript", "Rust", "Go", "C and C++", "Java"):
        dependency, code = ecosystems[name]["dependency_issue"], ecosystems[name]["code_error"]
        assert dependency[1] >= 5, (name, dependency)
        assert code[1] >= 5, (name, code)
        assert ecosystems[name]["accuracy"] >= 0.9, name
    tools = set(report["tools"])
    assert {"poetry", "tox", "nox", "pnpm", "jest", "vitest", "make", "gcc", "ld", "java"} <= tools


def test_check_fails_when_the_page_drifts(
    measured: tuple[ModuleType, dict], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    accuracy, report = measured
    if not accuracy.DOCS.exists():
        pytest.skip("the docs are not part of this checkout")
    page = tmp_path / "failure-classifier.md"
    page.write_text(accuracy.docs_text(report), encoding="utf-8")
    monkeypatch.setattr(accuracy, "DOCS", page)
    monkeypatch.setattr(accuracy, "run", lambda: ([], report))
    assert accuracy.main(["--check"]) == 0
    page.write_text(page.read_text().replace("| Python |", "| Pyhton |"), encoding="utf-8")
    assert accuracy.main(["--check"]) == 1


#: The ecosystems issue 27 added to the corpus (real runs of their tools on this machine).
NEW_ECOSYSTEMS = (
    "Ruby",
    "PHP",
    "Elixir",
    "Haskell",
    "Kotlin and Gradle",
    "Bazel",
    "Conan",
    "Nix",
    "pre-commit",
)


#: The ecosystems of issue 27's fifth round (``fresh_round.py``): tools and situations neither
#: corpus had, recorded at first sight before their rules.
FIFTH_ROUND = (
    "Perl",
    "Lua",
    "OCaml/dune",
    "Erlang/rebar3",
    "Fortran",
    "Meson",
    "Autotools",
    "Yarn",
    "programs and libraries",
)


def test_the_fifth_rounds_ecosystems_have_both_kinds_and_are_classified_well(
    measured: tuple[ModuleType, dict],
) -> None:
    _, report = measured
    for name in FIFTH_ROUND:
        part = report["ecosystems"][name]
        assert part["dependency_issue"][1] >= 1, (name, part)
        assert part["code_error"][1] >= 1, (name, part)
        assert part["accuracy"] >= 0.9, (name, part)
    fifth = [r for r in report["first_sight"] if set(r["ecosystems"]) & set(FIFTH_ROUND)]
    assert fifth, "the fifth round's first sight is recorded"


def test_the_new_ecosystems_have_both_kinds_of_failure_and_are_classified_well(
    measured: tuple[ModuleType, dict],
) -> None:
    _, report = measured
    ecosystems = report["ecosystems"]
    for name in NEW_ECOSYSTEMS:
        dependency, code = ecosystems[name]["dependency_issue"], ecosystems[name]["code_error"]
        assert dependency[1] >= 2, (name, dependency)
        assert code[1] >= 2, (name, code)
        assert ecosystems[name]["accuracy"] >= 0.9, name


def test_no_code_error_is_called_a_dependency_problem(measured: tuple[ModuleType, dict]) -> None:
    _, report = measured
    assert report["confusion"]["code_error"].get("dependency_issue", 0) == 0, [
        row["id"] for row in report["errors"] if row["label"] == "code_error"
    ]


def test_every_case_of_the_new_ecosystems_was_measured_at_first_sight(
    measured: tuple[ModuleType, dict],
) -> None:
    accuracy, report = measured
    import json

    recorded = {case for round_ in accuracy.first_sight_rounds() for case in round_["cases"]}
    for case in accuracy.case_dirs():
        meta = json.loads((case / "case.json").read_text(encoding="utf-8"))
        ecosystem = meta.get("ecosystem") or accuracy.ECOSYSTEMS.get(meta["tool"])
        if ecosystem in (*NEW_ECOSYSTEMS, *FIFTH_ROUND):
            assert meta["id"] in recorded, meta["id"]
    assert report["first_sight"], "the first-sight rounds are shown"


def test_first_sight_records_only_cases_no_round_holds(tmp_path: Path) -> None:
    accuracy = load_accuracy()
    path = tmp_path / "first-sight.json"
    rows = [
        {
            "id": "a",
            "label": "code_error",
            "predicted": "code_error",
            "ecosystem": "Ruby",
            "generated": "2026-01-02",
        },
        {
            "id": "b",
            "label": "dependency_issue",
            "predicted": "code_error",
            "ecosystem": "Ruby",
            "generated": "2025-12-31",
        },
    ]
    first = accuracy.record_first_sight(rows, "one", "abc", "2026-01-01", path)
    assert set(first["cases"]) == {"a"}  # b was made before the round's date
    later = [{**rows[0], "predicted": "dependency_issue"}, {**rows[1], "generated": "2026-01-05"}]
    second = accuracy.record_first_sight(later, "two", "def", "2026-01-01", path)
    assert set(second["cases"]) == {"b"}  # a keeps the verdict it had at first sight
    rounds = accuracy.first_sight_rounds(path)
    assert [r["name"] for r in rounds] == ["one", "two"]
    assert rounds[0]["cases"]["a"]["predicted"] == "code_error"
    shown = accuracy.first_sight(later, rounds)
    assert shown[0]["ecosystems"]["Ruby"] == {"cases": 1, "first": 1, "now": 0}
    assert shown[1]["ecosystems"]["Ruby"] == {"cases": 1, "first": 0, "now": 0}


#: Cases whose output names no file of the project, so that only the project itself tells
#: whose module is missing: classified outside it, the module is taken for a library's.
ONLY_THE_PROJECT_TELLS = {
    "e4-lua-own-module": "Lua lists the paths it searched, the same for a rock as for the "
    "project's own app/formatting.lua; only the project's app/ says it is its own",
    "e4-erlang-own-undef": "Erlang's `{undef,[{calc,add,…` shows no file; only the project's "
    "src/calc.erl says calc is its own",
}


@pytest.mark.slow
def test_a_log_classified_outside_its_project_gets_the_same_verdict(
    measured: tuple[ModuleType, dict],
) -> None:
    """``loopctl classify --log`` run from another directory: whether a missing module is the
    project's own is read from the output's own paths, so the verdict does not change (but
    where the output shows no path of the project at all)."""
    accuracy, _ = measured
    changed = {}
    for case in accuracy.case_dirs():
        inside = accuracy.classify_case(case)
        outside = accuracy.classify_case(case, elsewhere=True)
        if inside["predicted"] != outside["predicted"]:
            changed[case.name] = f"{inside['predicted']} -> {outside['predicted']}"
    assert set(changed) == set(ONLY_THE_PROJECT_TELLS), changed
