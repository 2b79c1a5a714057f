"""The categorizer: precedence, decisive lines, plugin rules, robustness."""

from __future__ import annotations

import pytest
from context_errors_testkit import corpus_cases, corpus_text
from hypothesis import given, settings
from hypothesis import strategies as st
from needles import better_needles, implied_needles

from loopctl_context_errors.categories import (
    BUILTIN_RULES,
    CATEGORY_MEANING,
    DEFAULT_RULES,
    LINE_CHARS,
    Category,
    Rule,
    RuleSet,
    Tier,
    categorize,
)

PYTEST_OUTPUT = """\
============================= test session starts ==============================
collected 2 items

test_calc.py F.                                                          [100%]

=================================== FAILURES ===================================
___________________________________ test_add ___________________________________

    def test_add():
>       assert add(2, 3) == 5
E       assert -1 == 5
E        +  where -1 = add(2, 3)

test_calc.py:4: AssertionError
=========================== short test summary info ============================
FAILED test_calc.py::test_add - assert -1 == 5
========================= 1 failed, 1 passed in 0.03s ==========================
"""


def test_every_real_category_has_rules_and_a_meaning() -> None:
    covered = {rule.category for rule in BUILTIN_RULES}
    assert covered >= set(Category) - {Category.UNKNOWN}
    assert set(CATEGORY_MEANING) == set(Category)


def test_builtin_rules_are_in_tier_order_with_unique_names() -> None:
    tiers = [int(rule.tier) for rule in BUILTIN_RULES]
    assert tiers == sorted(tiers)
    names = [rule.name for rule in BUILTIN_RULES]
    assert len(names) == len(set(names))
    assert all(rule.description for rule in BUILTIN_RULES)


def test_pytest_assertion_names_rule_and_decisive_lines() -> None:
    found = categorize(PYTEST_OUTPUT)
    assert found.category is Category.ASSERTION_FAILURE
    assert found.rule_name == "assertion.pytest"
    assert found.matched_line == "E       assert -1 == 5"
    assert "E        +  where -1 = add(2, 3)" in found.decisive_lines
    assert found.source == "decisive"
    assert found.runner == "pytest"


def test_overriding_rule_beats_an_earlier_cause() -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "a.py", line 1, in <module>\n'
        "FileNotFoundError: [Errno 2] No such file or directory: 'x'\n"
        "later: MemoryError\n"
    )
    found = categorize(text)
    assert found.category is Category.MEMORY_ERROR
    assert found.rule_name == "memory.out-of-memory"


def test_cause_tier_beats_an_earlier_symptom() -> None:
    # mypy reports the knock-on type complaint first; the missing attribute is the cause.
    lines = [
        'app.py:4: error: Returning Any from function declared to return "str"  [no-any-return]',
        'app.py:4: error: Module has no attribute "get_home"  [attr-defined]',
    ]
    found = categorize("\n".join(lines))
    assert found.category is Category.FUNCTION_ERROR
    assert found.rule_name == "mypy.missing-name"
    assert found.matched_line == lines[1]


def test_earliest_line_wins_within_a_tier() -> None:
    text = "ModuleNotFoundError: No module named 'yaml'\nPermissionError: [Errno 13] denied\n"
    found = categorize(text, decisive_lines=text.splitlines())
    assert found.category is Category.RESOURCE_ERROR
    found = categorize(text, decisive_lines=list(reversed(text.splitlines())))
    assert found.category is Category.FILE_ACCESS


def test_on_one_line_the_first_rule_in_order_wins() -> None:
    found = categorize("TypeError: fetch failed")
    assert (found.category, found.rule_name) == (Category.NETWORK_ERROR, "network.fetch-failed")
    found = categorize("AttributeError: 'NoneType' object has no attribute 'group'")
    assert (found.category, found.rule_name) == (Category.TYPE_ERROR, "type.null-dereference")


def test_decisive_lines_outrank_the_rest_of_the_output() -> None:
    text = "INFO retrying after Connection refused\nAssertionError: 1 != 2\n"
    found = categorize(text, decisive_lines=["AssertionError: 1 != 2"])
    assert found.category is Category.ASSERTION_FAILURE
    assert found.source == "decisive"
    # without decisive lines, the cause in the output is found
    found = categorize(text, decisive_lines=[])
    assert found.category is Category.NETWORK_ERROR
    assert found.source == "output"


def test_the_cause_of_a_wrapped_error_is_decisive() -> None:
    text = (
        "AbortError: The operation was aborted\n    at x (y.js:1:1) {\n  code: 'ABORT_ERR',\n"
        "  [cause]: DOMException [TimeoutError]: The operation was aborted due to timeout\n}\n"
    )
    found = categorize(text)
    assert found.category is Category.TIMEOUT
    assert found.matched_line.startswith("[cause]:")


#: Exception names as test runners print them alone on a line (RSpec: "NoMethodError:").
EXCEPTION_NAMES = st.from_regex(r"\A(?:[a-z]{1,8}(?:\.|::))?[A-Z][a-z]{1,10}(?:Error|Exception)\Z")


@settings(max_examples=60, deadline=None)
@given(EXCEPTION_NAMES, st.from_regex(r"\A[a-z_]{1,12}\Z"), st.integers(0, 6))
def test_a_bare_exception_line_brings_its_message(name: str, method: str, indent: int) -> None:
    """The runner's decisive line names the exception; the message on the next line decides."""
    pad = " " * indent
    text = (
        "Failures:\n\n  1) it works\n     Failure/Error: run\n\n"
        f"     {name}:\n{pad}  undefined method `{method}' for nil:NilClass\n"
        "     # ./spec/a_spec.rb:5\n"
    )
    found = categorize(text, decisive_lines=["Failure/Error: run", f"{name}:"])
    assert found.category is Category.TYPE_ERROR, found
    assert found.matched_line == f"undefined method `{method}' for nil:NilClass"
    assert found.source == "decisive"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=40), max_size=12), st.text(max_size=400))
def test_messages_are_only_added_after_their_exception_line(decisive: list[str], text: str) -> None:
    from loopctl_context_errors.categories import _MAX_MESSAGES, _with_messages

    found = _with_messages(decisive, text)
    # the given lines stay, in order; what is added follows a bare exception line
    it = iter(found)
    assert all(any(line == seen for seen in it) for line in decisive)
    assert len(found) - len(decisive) <= _MAX_MESSAGES
    added = [line for line in found if line not in decisive]
    assert all(line in text for line in added)


def test_a_go_nil_pointer_panic_is_a_type_error_not_a_crash() -> None:
    go = (
        "panic: runtime error: invalid memory address or nil pointer dereference\n"
        "[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x480fdc]\n"
    )
    assert categorize(go).category is Category.TYPE_ERROR
    assert categorize("Segmentation fault (core dumped)\n").category is Category.MEMORY_ERROR


def test_an_undeclared_c_name_yields_to_a_missing_library() -> None:
    undeclared = "calc.c:4:9: error: \u2018ZSTD_VERSION\u2019 undeclared here (not in a function)\n"
    assert categorize(undeclared).category is Category.FUNCTION_ERROR
    missing = "Package libzstd was not found in the pkg-config search path.\n" + undeclared
    assert categorize(missing).category is Category.RESOURCE_ERROR


def test_loopctl_test_command_timeout_overrides() -> None:
    decisive = ["loopctl: the test command timed out after 5 s", "E   assert 1 == 2"]
    found = categorize("", decisive_lines=decisive)
    assert found.category is Category.TIMEOUT
    assert found.rule_name == "loopctl.test-command-timeout"


def test_weak_uncategorized_exception_is_unknown_and_named() -> None:
    found = categorize(
        "Traceback (most recent call last):\n  File \"a.py\", line 2\nKeyError: 'pear'\n"
    )
    assert found.category is Category.UNKNOWN
    assert found.rule_name == "exception.uncategorized"
    assert found.matched_line == "KeyError: 'pear'"


def test_nothing_recognisable_gives_unknown_with_the_last_lines() -> None:
    found = categorize("building\nchecking release\nversion tag missing\n")
    assert found.category is Category.UNKNOWN
    assert found.rule is None
    assert found.rule_name == "none"
    assert found.decisive_lines[-1] == "version tag missing"


def test_ansi_colour_codes_are_ignored() -> None:
    found = categorize("\x1b[31mE       \x1b[1mAssertionError\x1b[0m: boom\n")
    assert found.category is Category.ASSERTION_FAILURE
    assert "\x1b" not in found.matched_line


def test_plugin_rules_run_before_builtins_of_their_tier() -> None:
    lock = Rule(
        "terraform.state-lock",
        "RESOURCE_ERROR",
        r"Error acquiring the state lock",
        needles=("state lock",),
        tier=1,
        description="another run holds the state lock",
    )
    rules = RuleSet.with_extra([lock])
    found = categorize("Error: Error acquiring the state lock\nTimeoutError: x\n", rules=rules)
    assert found.rule_name == "terraform.state-lock"
    assert found.category is Category.RESOURCE_ERROR
    assert rules.rules.index(lock) < [r.name for r in rules.rules].index("timeout.timed-out")
    # the default rules are untouched
    assert categorize("Error acquiring the state lock").rule_name != "terraform.state-lock"


def test_rule_validation_names_the_problem() -> None:
    with pytest.raises(ValueError, match="lowercase"):
        Rule("x", "UNKNOWN", "X", needles=("Upper",))
    with pytest.raises(ValueError, match="unique"):
        RuleSet([BUILTIN_RULES[0], BUILTIN_RULES[0]])
    with pytest.raises(ValueError):
        Rule("x", "NOT_A_CATEGORY", "x", needles=("x",))


def test_needles_only_save_time_on_the_whole_corpus() -> None:
    """Every rule tried on every line gives the same answers as the needle-filtered scan."""
    exhaustive = RuleSet(BUILTIN_RULES, use_needles=False)
    for case in corpus_cases():
        text = corpus_text(case)
        fast, slow = categorize(text), categorize(text, rules=exhaustive)
        assert (fast.category, fast.rule_name) == (slow.category, slow.rule_name), case["id"]


def test_combined_prefilter_matches_per_rule_search() -> None:
    for tier in Tier:
        combined = DEFAULT_RULES.combined[tier]
        assert combined is not None
        for case in corpus_cases()[:80]:
            for line in corpus_text(case).splitlines()[:60]:
                any_rule = any(p.search(line) for _, p in DEFAULT_RULES.by_tier[tier])
                assert bool(combined.search(line)) == any_rule


def test_a_huge_single_line_is_categorized() -> None:
    text = "x" * 5_000_000 + " TypeError: bad\n"
    found = categorize(text)  # the speed on big logs is measured by bench_context_errors.py
    # lines are read up to LINE_CHARS: the error past the cut is not seen, and nothing is huge
    assert found.category is Category.UNKNOWN
    assert [len(line) for line in found.decisive_lines] == [LINE_CHARS]


@settings(max_examples=150, deadline=None)
@given(
    st.text(max_size=3000),
    st.one_of(st.none(), st.lists(st.text(max_size=200), max_size=10)),
)
def test_categorize_never_raises_and_bounds_its_evidence(
    text: str, decisive: list[str] | None
) -> None:
    found = categorize(text, decisive_lines=decisive)
    assert isinstance(found.category, Category)
    assert len(found.decisive_lines) <= 8
    assert all(len(line) <= LINE_CHARS for line in found.decisive_lines)
    assert len(found.matched_line) <= LINE_CHARS
    assert (found.rule is None) == (found.rule_name == "none")


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(corpus_cases()), st.text(alphabet="abc \n", max_size=500))
def test_noise_before_a_real_failure_does_not_change_its_category(
    case: dict[str, str], noise: str
) -> None:
    text = corpus_text(case)
    assert categorize(noise + "\n" + text).category == categorize(text).category


#: Lines of passing output as runners print them by the thousand: a rule's literals (its
#: prefilter) must not occur in them, or every such line pays for the rules' regexes (the
#: dependency rules' first literals, `module`, `npm ` and `-l`, made a 1 MB log 14x slower).
PASSING_OUTPUT = (
    "2024-05-01T12:00:01.123Z INFO worker-3 processed request id=17 in 12 ms",
    "tests/test_module_4.py::test_case_17 PASSED                          [ 42%]",
    "   Compiling serde_derive v1.0.197",
    "    Finished `test` profile [unoptimized + debuginfo] target(s) in 2.31s",
    "     Running unittests src/lib.rs (target/debug/deps/mylib-0d5f4c1b2a3e4f56)",
    "test tests::parses_release_notes ... ok",
    "npm http fetch GET 200 https://registry.npmjs.org/left-pad 12ms (cache hit)",
    "added 214 packages, and audited 215 packages in 3s",
    "WARN deprecated option --legacy-peer-deps used in config line 12",
    "ok  \texample.com/project/module/resolver\t0.012s",
    "=== RUN   TestResolveModuleRelease",
    "--- PASS: TestResolveModuleRelease (0.00s)",
    "gcc -O2 -Wall -c src/solution.c -o build/solution.o -lm",
    "[INFO] Building jar: /home/user/project/target/app-1.0-SNAPSHOT.jar",
    "ok 12 - handles input variant 3",
)


@pytest.mark.parametrize("line", PASSING_OUTPUT)
def test_no_rules_literal_occurs_in_passing_output(line: str) -> None:
    from loopctl_context_errors.categories import BUILTIN_RULES

    lowered = line.lower()
    assert not [(r.name, n) for r in BUILTIN_RULES for n in r.needles if n in lowered]


# --- the rules' needles ------------------------------------------------------------------------


@pytest.mark.parametrize("rule", BUILTIN_RULES, ids=lambda rule: rule.name)
def test_a_rule_s_needles_are_as_selective_as_its_pattern_allows(rule: Rule) -> None:
    """The needles kept in the source are the ones the pattern implies, wherever those are
    more selective (an edited pattern with stale needles fails here): an AssertionError line
    holds ``error``, which sent it through every rule that named that word."""
    assert rule.needles == better_needles(rule.pattern, rule.flags, rule.needles)


@pytest.mark.parametrize("rule", BUILTIN_RULES, ids=lambda rule: rule.name)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_every_match_of_a_rule_holds_one_of_its_needles(rule: Rule, data: st.DataObject) -> None:
    text = data.draw(st.from_regex(rule.compiled()))
    found = rule.compiled().search(text)
    if found is not None:  # lookarounds can make a drawn text miss
        assert any(needle in found.group(0).lower() for needle in rule.needles), found.group(0)


def test_the_implied_needles_of_some_patterns() -> None:
    assert implied_needles(r"\b[Tt]imed out\b|\bETIMEDOUT\b") == {"timed out", "etimedout"}
    assert implied_needles(r"(?:Foo|Bar)Error: \d+") == {"error: "}  # the longer offer
    assert implied_needles(r"(?:FooError|BarError)\b") == {"fooerror", "barerror"}
    assert implied_needles(r"x+y(?:abcd)+") == {"abcd"}
    assert implied_needles(r"(?:abcd)?|efgh") is None  # the first branch can match nothing
    assert implied_needles(r"\d+") is None


# --- environment problems by what is missing ---------------------------------------------------

#: Lines in the corpus's forms from programs, daemons and runtimes the corpus does not hold.
MISSING_FROM_THE_ENVIRONMENT = (
    '  failed to run flatc: Os { code: 2, kind: NotFound, message: "No such file or directory" }',
    "  Could not find SWIG using the following names: swig4.0 swig",
    "  No CMAKE_CUDA_COMPILER could be found.",
    "/bin/sh: ./gen.py: /usr/bin/python2: bad interpreter: No such file or directory",
    "/usr/bin/env: 'node18': No such file or directory",
    "Cannot connect to the Podman daemon. Is the daemon running?",
    "redis-cli: Could not connect. Is the server running?",
    "error: toolchain 'nightly-2024-01-01-x86_64-unknown-linux-gnu' is not installed",
    "Your Ruby version is 3.1.2, but your Gemfile specified ~> 3.3",
    "ERROR: JAVA_HOME is not set and no 'java' command could be found in your PATH.",
    "mylib 2.0 requires requests, which is not installed.",
    "ERROR: Missing prebuilt package for 'zlib/1.3.1'. You can try:",
)


@pytest.mark.parametrize("line", MISSING_FROM_THE_ENVIRONMENT)
def test_what_the_environment_lacks_is_a_resource_error(line: str) -> None:
    assert categorize(line).category is Category.RESOURCE_ERROR


@pytest.mark.parametrize(
    ("line", "category"),
    [
        # the project's own code failing to run something it was given is not a missing program
        ("thread 'main' panicked at src/main.rs:9:5: failed to run query: timed out", "TIMEOUT"),
        ("Error: ENOENT: no such file or directory, open 'data/input.csv'", "FILE_ACCESS"),
    ],
)
def test_near_misses_keep_their_category(line: str, category: str) -> None:
    assert categorize(line).category.value == category


#: Issue 27's fifth round, generalised: what is missing in the words of tools no corpus holds
#: (other modules, versions and tools than the corpus's, in the same situations).
NAMED_AS_MISSING = (
    "lua5.4: app.lua:3: module 'cjson' not found:",
    'Error: Library "cmdliner" not found.',
    'src/meson.build:4:0: ERROR: Dependency "gtk4" not found, tried pkgconfig',
    "Package 'libpng16', required by 'virtual:world', not found",
    "configure: error: Package requirements (glib-2.0 >= 2.70) were not met:",
    "Fatal Error: Cannot open module file 'netcdf.mod' for reading at (1): No such file",
    'error Couldn\'t find any versions for "chalk" that matches "^5.0.0" in our cache',
    '===> Failed to fetch and copy dep: {pkg,<<"cowboy">>,<<"2.10.0">>}',
    "Error: No results matching query were found for Lua 5.1.",
    "./configure: line 4411: syntax error near unexpected token `newline'",
    "Perl v5.40.0 required--this is only v5.36.0, stopped at bin/app line 3.",
    "Error: Version 3.16 of the dune language is not supported.",
    "meson.build:1:0: ERROR: Meson version is 1.0.1 but project requires >= 1.3",
    # (the held-out check's situations, in other words)
    "can't find package tdom",
    'version conflict for package "http": have 2.9.5, need 3',
    'Exception in thread "main" java.lang.UnsatisfiedLinkError: no rocksdbjni in java.library.path',
    "Error: /usr/lib/sqlite3/pcre.so: cannot open shared object file: No such file or directory",
)


@pytest.mark.parametrize("line", NAMED_AS_MISSING)
def test_what_any_tool_names_as_missing_is_a_resource_error(line: str) -> None:
    assert categorize(line).category is Category.RESOURCE_ERROR, categorize(line).rule


@pytest.mark.parametrize(
    ("line", "category"),
    [
        # a test's message about a missing thing is the test's failure, not the environment's
        ("E       AssertionError: Library 'x' not found", "ASSERTION_FAILURE"),
        # the same tools' code errors
        ("lua5.4: main.lua:7: attempt to index a nil value (local 'user')", "TYPE_ERROR"),
        ("lua: init.lua:2: attempt to perform arithmetic on a nil value (field 'n')", "TYPE_ERROR"),
        ("lua5.4: main.lua:9: 'then' expected near 'print'", "SYNTAX_ERROR"),
        ("lua5.4: main.lua:4: unexpected symbol near '}'", "SYNTAX_ERROR"),
        ('Can\'t call method "save" on an undefined value at lib/Store.pm line 12.', "TYPE_ERROR"),
        (
            "Error: This expression has type float but an expression was expected of type int",
            "TYPE_ERROR",
        ),
        ('Fatal error: exception Assert_failure("test/t.ml", 4, 2)', "ASSERTION_FAILURE"),
        ("Error: Cannot convert REAL(8) to LOGICAL(4) at (1)", "TYPE_ERROR"),
        ("Error: Expecting END SUBROUTINE statement at (1)", "SYNTAX_ERROR"),
        ('{"init terminating in do_boot",{undef,[{shop,total,[[]],[]}]}}', "FUNCTION_ERROR"),
        ('can\'t read "user": no such variable', "FUNCTION_ERROR"),
        ("---- Result should have been (exact matching):", "ASSERTION_FAILURE"),
        ("awk: report.awk: line 9: missing ) near {", "SYNTAX_ERROR"),
        ("{\"init terminating in do_boot\",{badarith,[{erlang,'*',[2,a],[]}]}}", "TYPE_ERROR"),
    ],
)
def test_the_new_tools_code_errors_keep_their_categories(line: str, category: str) -> None:
    assert categorize(line).category.value == category, categorize(line).rule
