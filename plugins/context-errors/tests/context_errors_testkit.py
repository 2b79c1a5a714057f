"""Helpers shared by the context-errors tests (a unique module name: test directories are not
packages, and several plugins' tests run in one pytest session)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).parent / "corpus"
PLUGIN_ROOT = Path(__file__).parent.parent
DOCS_PAGE = PLUGIN_ROOT.parent.parent / "docs" / "plugins" / "context-errors.md"


def corpus_manifest() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CORPUS / "manifest.json").read_text(encoding="utf-8"))
    return data


def corpus_cases() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = corpus_manifest()["cases"]
    return cases


def corpus_text(case: dict[str, Any]) -> str:
    return (CORPUS / case["file"]).read_text(encoding="utf-8")
