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
