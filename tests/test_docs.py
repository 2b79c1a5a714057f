"""The documentation cannot drift from the code: generated pages are current, every hook is
documented the way the hook reference promises."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pytest

from loopctl import hookspecs

ROOT = Path(__file__).resolve().parents[1]


def test_generated_reference_pages_are_up_to_date():
    done = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "generate.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("name", hookspecs.hook_names())
def test_every_hook_is_documented_with_its_contract(name):
    doc = inspect.getdoc(getattr(hookspecs, name)) or ""
    assert len(doc.splitlines()) >= 4, f"{name} needs a real docstring"
    assert "versionadded" in doc
    # Says what its result means (or that there is none) and how results combine.
    assert any(word in doc for word in ("Return value", "Return ", "Results:", "first non-")), name
    signature = inspect.signature(getattr(hookspecs, name))
    for parameter in signature.parameters:
        assert f":param {parameter}:" in doc or parameter in ("loop",), (
            f"{name}: document {parameter!r}"
        )


def test_the_hook_reference_page_lists_every_hook_with_its_signature():
    page = (ROOT / "docs" / "reference" / "hooks.md").read_text(encoding="utf-8")
    for name in hookspecs.hook_names():
        signature = str(inspect.signature(getattr(hookspecs, name))).replace("'", "")
        assert f"def {name}{signature}" in page


def test_the_readme_starts_with_the_two_commands():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = text.split("```bash\n")[1:3]
    commands = [block.split("```")[0].strip() for block in blocks]
    assert commands[0].endswith("loopctl demo")
    assert commands[1].endswith("nox")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert commands[1] in ci
