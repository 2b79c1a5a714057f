"""The documentation cannot drift from the code: generated pages are current, every hook is
documented the way the hook reference promises, every CLI example is what the command prints
now, and the code the guides spell out works."""

from __future__ import annotations

import importlib.util
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import loopctl
from loopctl import hookspecs

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _examples() -> ModuleType:
    """docs/examples.py (loaded by path, as docs/generate.py loads it)."""
    name = "loopctl_docs_examples"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, DOCS / "examples.py")
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


examples = _examples()


def _generate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(DOCS / "generate.py"), *args],
        capture_output=True,
        text=True,
        check=False,
    )


def test_generated_reference_pages_are_up_to_date():
    done = _generate("--check", "--reference-only")
    assert done.returncode == 0, done.stderr


def test_cli_examples_are_what_the_commands_print_now():
    done = _generate("--check", "--examples-only")
    assert done.returncode == 0, done.stderr


def test_every_marker_names_an_example_and_every_example_is_shown():
    used = {key for page in examples.pages() for key in examples.example_keys(page.read_text())}
    assert used == set(examples.EXAMPLES), (
        f"unknown: {sorted(used - set(examples.EXAMPLES))}; "
        f"never shown: {sorted(set(examples.EXAMPLES) - used)}"
    )


@pytest.mark.parametrize(
    "command", ["demo", "plugins list", "config show", "status", "agents list"]
)
def test_the_main_commands_have_examples(command):
    pattern = rf"(^|\s)loopctl {command}(\s|$)"
    assert any(re.search(pattern, e.command) for e in examples.EXAMPLES.values()), command


def test_a_drifted_example_is_reported_then_rewritten(tmp_path):
    page = tmp_path / "page.md"
    stale = (
        "Before.\n\n<!-- example: loopctl agents list -->\n\n```text\n$ loopctl agents list\n"
        "claude    /usr/bin/claude (2.0.0)\n```\n\n<!-- /example -->\n\nAfter.\n"
    )
    page.write_text(stale)
    assert examples.update(check=True, pages_to_fill=[page]) == [f"{page}: loopctl agents list"]
    assert page.read_text() == stale  # --check never writes
    assert examples.update(check=False, pages_to_fill=[page])
    text = page.read_text()
    assert text.startswith("Before.\n\n<!-- example: loopctl agents list -->\n")
    assert text.endswith("<!-- /example -->\n\nAfter.\n")
    assert "`claude` not found on PATH" in text
    assert examples.update(check=True, pages_to_fill=[page]) == []


def test_an_unknown_example_name_is_an_error_naming_it(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("<!-- example: loopctl frobnicate -->\n<!-- /example -->\n")
    with pytest.raises(examples.ExampleError, match="loopctl frobnicate"):
        examples.update(check=True, pages_to_fill=[page])


_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200).filter(
    lambda text: "<!--" not in text
)


@settings(max_examples=200, deadline=None)
@given(before=_text, after=_text, output=_text)
def test_filling_touches_only_the_block_and_is_idempotent(before, after, output):
    key = "loopctl status"
    text = f"{before}\n<!-- example: {key} -->\nold\n<!-- /example -->\n{after}"
    filled = examples.fill(text, {key: output})
    assert examples.fill(filled, {key: output}) == filled
    assert filled.startswith(f"{before}\n<!-- example: {key} -->\n")
    assert filled.endswith(f"<!-- /example -->\n{after}")
    assert f"\n$ loopctl status\n{output}\n```" in filled
    assert examples.fill(before + after, {}) == before + after


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["/tmp/x", " 12.5 s", "[01:02:03]", "prompt 1,234 chars", "é"])))
def test_masking_is_idempotent_and_hides_the_temporary_home(parts):
    home = Path("/tmp/x")
    masked = examples.mask("".join(parts), home)
    assert examples.mask(masked, home) == masked
    assert "/tmp/x" not in masked
    assert not re.search(r"\d\d:\d\d:\d\d", masked)


def test_the_team_guide_shows_the_config_its_examples_ran_with():
    assert examples.TEAM_CONFIG in (DOCS / "guides" / "team.md").read_text()


def _run_pytest(directory: Path, target: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPCTL_")}
    env["PYTHONPATH"] = str(directory / "src")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", target],
        cwd=directory,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_custom_classifier_guide_works_as_written(tmp_path):
    """The guide's steps: scaffold, replace plugin.py and the tests with the guide's, pass."""
    pytest.importorskip("loopctl_failure_classifier")
    from loopctl.scaffold import write_plugin

    root = write_plugin(tmp_path, "lint-classifier", classifier=True)[0]
    files = examples.guide_files(examples.CLASSIFIER_GUIDE, "loopctl-lint-classifier")
    assert set(files) == {"src/loopctl_lint_classifier/plugin.py", "tests/test_lint_classifier.py"}
    for relative, text in files.items():
        assert (root / relative).exists(), f"the guide replaces {relative}, the scaffold has none"
        (root / relative).write_text(text)
    done = _run_pytest(root, "tests/test_lint_classifier.py")  # the scaffold tests its own part
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"\b5 passed\b", done.stdout), done.stdout


def test_the_agent_adapter_guide_works_as_written(tmp_path):
    """The guide's adapter, fake CLI and tests, written out as the guide lists them, pass."""
    pytest.importorskip("hypothesis")
    root = tmp_path / "loopctl-patchbot"
    files = examples.guide_files(examples.ADAPTER_GUIDE, "loopctl-patchbot")
    assert "src/loopctl_patchbot/adapter.py" in files
    assert "tests/test_patchbot.py" in files
    for relative, text in {**files, "src/loopctl_patchbot/__init__.py": ""}.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    done = _run_pytest(root, "tests")
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"\b4 passed\b", done.stdout), done.stdout


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


def test_the_readme_configuration_example_loads(tmp_path):
    from loopctl.config import load_config

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Configuration", 1)[1]
    example = section.split("```toml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "loopctl.toml").write_text(example, encoding="utf-8")
    loaded = load_config(tmp_path, env={})
    assert loaded.config.withhold_env == ["GITHUB_TOKEN"]
    assert loaded.config.limits.max_iterations == 20
    assert loaded.warnings == []


def test_the_readme_starts_with_the_two_commands():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = text.split("```bash\n")[1:3]
    commands = [block.split("```")[0].strip() for block in blocks]
    assert commands[0].endswith("loopctl demo")
    assert commands[1].endswith("nox")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert commands[1] in ci


# --- the public API: loopctl and the Loop ---------------------------------------------------

LOOP_MEMBERS = [name for name in vars(loopctl.Loop) if not name.startswith("_")]
#: Kept for one minor release under their old names (docs/reference/loop.md, "Deprecation").
DEPRECATED = {"generation"}
#: Where a member counts as used: the shipped plugins and contrib, and the tests.
USERS = [ROOT / "core" / "src" / "loopctl" / "builtin.py", ROOT / "core" / "tests", ROOT / "tests"]
USERS += [p for kind in ("plugins", "contrib") for p in (ROOT / kind).glob("*/src")]
USERS += [p for kind in ("plugins", "contrib") for p in (ROOT / kind).glob("*/tests")]


@pytest.fixture(scope="module")
def users_text() -> str:
    return "\n".join(
        path.read_text(encoding="utf-8")
        for root in USERS
        for path in ([root] if root.is_file() else root.rglob("*.py"))
    )


@pytest.mark.parametrize("name", LOOP_MEMBERS)
def test_every_loop_member_is_documented_on_the_reference_page(name):
    member = inspect.getattr_static(loopctl.Loop, name)
    doc = inspect.getdoc(member) or ""
    assert len(doc) >= 20, f"Loop.{name} needs a docstring"
    page = (DOCS / "reference" / "loop.md").read_text(encoding="utf-8")
    assert re.search(rf"^### `loop\.{name}\b", page, re.M), f"Loop.{name} is not on loop.md"


@pytest.mark.parametrize("name", sorted(set(LOOP_MEMBERS) - DEPRECATED))
def test_every_loop_member_is_used_by_a_shipped_plugin_or_a_test(name, users_text):
    assert re.search(rf"\bloop\.{name}\b", users_text), f"nothing uses Loop.{name}: remove it"


@pytest.mark.parametrize("name", sorted(n for n in loopctl.__all__ if not n.startswith("__")))
def test_every_public_name_is_documented_and_listed(name):
    value = getattr(loopctl, name)
    assert (inspect.getdoc(value) or "").strip(), f"loopctl.{name} needs a docstring"
    page = (DOCS / "reference" / "loop.md").read_text(encoding="utf-8")
    assert f"| `loopctl.{name}` |" in page


def test_the_deprecated_generation_still_answers_with_a_warning():
    class Driver:
        state = loopctl.LoopState(goal="g", original_goal="g", restarts=2)

    with pytest.warns(DeprecationWarning, match="Loop.restarts"):
        assert loopctl.Loop(Driver()).generation == 2  # type: ignore[arg-type]


def test_core_has_no_import_cycle_and_hides_none():
    """The plugin-facing types never import the engine; no import in core is placed inside a
    function or behind TYPE_CHECKING to dodge a cycle (the remaining ones are for start-up
    cost and say so)."""
    import ast

    src = ROOT / "core" / "src" / "loopctl"
    graph: dict[str, set[str]] = {}
    for path in src.rglob("*.py"):
        module = ".".join(path.relative_to(src.parent).with_suffix("").parts)
        module = module.removesuffix(".__init__")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
        names = {
            node.module
            for node in top
            if isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.startswith("loopctl")
        }
        graph[module] = {n for n in names if n in {m for m in graph} or True}
    modules = set(graph)

    def deps(module: str) -> set[str]:
        return {d for d in graph.get(module, ()) if d in modules and d != module}

    for start in ("loopctl.loop", "loopctl.hookspecs", "loopctl.model", "loopctl.report"):
        seen, todo = set(), [start]
        while todo:
            current = todo.pop()
            for dep in deps(current):
                if dep not in seen:
                    seen.add(dep)
                    todo.append(dep)
        assert "loopctl.engine" not in seen, f"{start} reaches the engine"
        assert start not in seen, f"{start} is part of an import cycle"
