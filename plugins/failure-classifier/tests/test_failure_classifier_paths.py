"""The project read from the output's own paths (``paths``), and the localities that use it."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from loopctl_failure_classifier.locality import Locality
from loopctl_failure_classifier.paths import OutputPaths, window

PYTEST_OUTPUT = """\
ImportError while importing test module '{root}/tests/test_core.py'.
Traceback:
tests/test_core.py:2: in <module>
    from helpers import sample
E   ModuleNotFoundError: No module named 'helpers'
"""


def test_the_root_is_an_absolute_path_less_the_relative_one_the_output_shows(
    tmp_path: Path,
) -> None:
    project = tmp_path / "shop"
    (project / "tests").mkdir(parents=True)
    paths = OutputPaths(PYTEST_OUTPUT.format(root=project))
    assert paths.roots()[0] == str(project)
    assert {"tests", "test_core"} <= paths.names(paths.roots())


def test_pytest_rootdir_comes_first_and_only_existing_directories_count(tmp_path: Path) -> None:
    text = f"rootdir: {tmp_path}\nrootdir: /no/such/dir\nsrc/app.py:3: error\n"
    assert OutputPaths(text).roots() == [str(tmp_path)]


def test_a_frame_climbs_to_the_directory_with_a_project_marker(tmp_path: Path) -> None:
    (tmp_path / "proj" / "pkg").mkdir(parents=True)
    (tmp_path / "proj" / "pyproject.toml").write_text("", encoding="utf-8")
    text = f'  File "{tmp_path}/proj/pkg/mod.py", line 3, in <module>\n'
    assert OutputPaths(text).roots() == [str(tmp_path / "proj")]


def test_a_missing_file_is_not_a_place_of_the_project() -> None:
    text = "calc.c:1:10: fatal error: zstd.h: No such file or directory\n"
    names = OutputPaths(text).names()
    assert "calc" in names
    assert "zstd" not in names


def test_a_projects_lib_directory_is_the_projects_own() -> None:
    text = "lib/calc/rates.ex:3: warning: x\n    from lib/calculator.rb:2:in `add'\n"
    assert {"lib", "calc", "rates", "calculator"} <= OutputPaths(text).names()


def test_installed_code_is_not_the_project() -> None:
    text = (
        '  File "/venv/lib/python3.12/site-packages/httpx/_client.py", line 9, in get\n'
        "node_modules/left-pad/index.js:3:1\n"
        "from /usr/lib/ruby/3.1.0/json.rb:12:in `require'\n"
    )
    paths = OutputPaths(text)
    assert paths.absolute == []
    assert paths.relative == []
    assert paths.names() == set()


def test_a_log_outside_its_project_still_knows_the_project_modules(tmp_path: Path) -> None:
    """The working directory is elsewhere and the project is not on this machine: the names
    of the project's files that the output shows still decide."""
    output = (
        "tests/test_invoice.py:1: in <module>\n    from billing.invoice import gross\n"
        "billing/invoice.py:1: in <module>\n    from billing.rates import vat\n"
        "E   ModuleNotFoundError: No module named 'billing.rates'\n"
    )
    locality = Locality(tmp_path, output)
    assert locality.is_own("python_module", "billing.rates")[0]
    assert not Locality(tmp_path, output).is_own("python_module", "httpx")[0]


def test_ruby_elixir_and_haskell_localities(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "calculator.rb").write_text("", encoding="utf-8")
    (tmp_path / "test_calc.rb").write_text("", encoding="utf-8")
    (tmp_path / "calc_test.exs").write_text("", encoding="utf-8")
    where = Locality(tmp_path)
    assert where.is_own("ruby_feature", "/abs/calc")[0]  # require_relative
    assert where.is_own("ruby_feature", "calculator")[0]
    assert where.is_own("ruby_feature", "calc")[0]  # what test_calc.rb is named after
    assert not where.is_own("ruby_feature", "nokogiri")[0]
    assert where.is_own("elixir_module", "Calc")[0]
    assert not where.is_own("elixir_module", "Decimal")[0]
    assert where.is_own("haskell_module", "Calc")[0]  # a flat name is the project's
    assert not where.is_own("haskell_module", "Data.Aeson")[0]


def test_an_unresolved_name_is_a_dependency_only_on_an_import_line(tmp_path: Path) -> None:
    importing = (
        "Main.kt:1:12: error: unresolved reference: squareup\nimport com.squareup.moshi.Moshi\n"
    )
    calling = "Main.kt:4:11: error: unresolved reference: sum\n    check(sum(2, 3) == 5)\n"
    assert not Locality(tmp_path, importing).is_own(
        "import_line", "squareup", importing.splitlines()[0]
    )[0]
    assert Locality(tmp_path, calling).is_own("import_line", "sum", calling.splitlines()[0])[0]
    (tmp_path / "com" / "squareup" / "moshi").mkdir(parents=True)
    assert Locality(tmp_path, importing).is_own(
        "import_line", "squareup", importing.splitlines()[0]
    )[0]


def test_a_go_internal_package_is_always_the_modules_own() -> None:
    assert Locality(None).is_own("go_package", "example.com/demo/internal/store")[0]
    assert not Locality(None).is_own("go_package", "github.com/acme/store")[0]


_PATHISH = st.lists(
    st.sampled_from(
        [*"abc/._-:'\" \n()0123456789", ".py", ".rb", ".c", "site-packages/", "rootdir: /tmp"]
    ),
    max_size=80,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.one_of(_PATHISH, st.text(max_size=300)))
def test_reading_paths_never_raises_and_keeps_its_promises(text: str) -> None:
    paths = OutputPaths(text)
    roots = paths.roots()
    assert all(Path(root).is_dir() for root in roots)
    assert all(path.startswith("/") for path in paths.absolute)
    assert not any(path.startswith("/") for path in paths.relative)
    assert set(paths.located) <= set(paths.absolute) | set(paths.relative)
    assert "" not in paths.names(roots)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True), min_size=1, max_size=4),
    st.sampled_from(["py", "rb", "c", "go", "hs"]),
)
def test_every_part_of_a_located_path_is_a_project_name(parts: list[str], suffix: str) -> None:
    path = "/".join(parts) + f".{suffix}"
    names = OutputPaths(f"{path}:12: error: something\n").names()
    assert set(parts) <= names


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=2000), st.lists(st.text(max_size=40), max_size=3))
def test_the_window_holds_small_outputs_whole(text: str, around: list[str]) -> None:
    assert text in window(text, around)
