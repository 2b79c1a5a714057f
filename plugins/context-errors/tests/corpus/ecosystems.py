"""The ecosystem batch of the corpus (ids ``e-<ecosystem>-…``): tools the rules were not written for.

Issue #27: real runs of Ruby (ruby, RSpec, minitest, Bundler), PHP (php, PHPUnit, Composer),
Elixir (elixir, ExUnit, Mix), Kotlin (kotlinc) and Gradle, Haskell (GHC, Cabal), Bazel, CMake
(with make and ctest) and Conan, Nix, pre-commit, Go, Java (JUnit 4, new forms), C/C++ (gcc,
g++ syntax errors) and Python's pytest-timeout and doctest. The batch was generated and measured
with the rules as they were ("first sight", kept in ``first_sight.json``) before any rule was
written for it. The second round (ids ``e2-…``, :func:`blind`) was written after the rules for
the first were frozen, and measured the same way; so were the third (:func:`third`) and the
fourth (:func:`fourth`, whose scenarios ``fresh_round.py`` shares with the failure classifier's
corpus). Every log is what the real tool printed;
nothing is written by hand.

``generate.py`` calls :func:`cases` with its ``Case`` class; :data:`ECO_BIN` is where
pytest-timeout, conan and pre-commit are installed (a scratch venv: ``pip install pytest
pytest-timeout conan pre-commit``), ``$CORPUS_ECO_BIN`` to override. Debian packages used: ruby,
ruby-rspec, bundler, php-cli, phpunit, composer, elixir, ghc, cabal-install, gradle, kotlin,
junit4, nix-bin, bazel-bootstrap, golang-go, cmake, gcc, g++.
"""

from __future__ import annotations

import os
import subprocess
import textwrap
from collections.abc import Callable
from typing import Any, NamedTuple

import fresh_round

ECO_BIN = os.environ.get("CORPUS_ECO_BIN", "/tmp/loopctl-corpus-venv/bin")
#: Packagist is switched off: the scenarios are about the platform, not the network.
COMPOSER_JSON = (
    '{"name": "corpus/app", "repositories": [{"packagist.org": false}], "require": {%s}}\n'
)
#: Cabal with a config of its own and no package server (no index to download).
CABAL = "CABAL_DIR=$PWD/.cabal cabal --config-file=cabal.cfg build --offline"
JUNIT_CP = "/usr/share/java/junit4.jar:/usr/share/java/hamcrest-core.jar"


#: The ecosystem of a case, from the word after ``e-`` in its id.
ECOSYSTEM_OF = {
    "ruby": "Ruby",
    "rspec": "Ruby",
    "minitest": "Ruby",
    "bundler": "Ruby",
    "php": "PHP/Composer",
    "phpunit": "PHP/Composer",
    "composer": "PHP/Composer",
    "elixir": "Elixir/Mix",
    "mix": "Elixir/Mix",
    "kotlin": "Kotlin/Gradle",
    "gradle": "Kotlin/Gradle",
    "haskell": "Haskell/Cabal",
    "cabal": "Haskell/Cabal",
    "bazel": "Bazel",
    "cmake": "CMake/Conan",
    "ctest": "CMake/Conan",
    "conan": "CMake/Conan",
    "nix": "Nix",
    "precommit": "pre-commit",
    "go": "Go",
    "junit": "Java",
    "java": "Java",
    "gcc": "C/C++ (gcc)",
    "gxx": "C/C++ (gcc)",
    "pytest": "Python (pytest-timeout, doctest)",
    "doctest": "Python (pytest-timeout, doctest)",
    "perl": "Perl",
    "prove": "Perl",
    **fresh_round.ECOSYSTEM_OF,
}


def stop_daemons(tools: set[str]) -> None:
    """Stop what the run left behind: Gradle starts a daemon that outlives the build."""
    if "gradle" in tools:
        subprocess.run(["gradle", "--stop", "-q"], capture_output=True, timeout=120, check=False)


class Helpers(NamedTuple):
    """The first round's scenario helpers, which the later rounds use too."""

    add: Callable[..., None]
    rb: Callable[..., None]
    php: Callable[..., None]
    ex: Callable[..., None]
    kt: Callable[..., None]
    hs: Callable[..., None]
    nx: Callable[..., None]
    go: Callable[..., None]
    gomain: Callable[[str], dict[str, str]]
    cc: Callable[..., None]
    cm: Callable[..., None]


def d(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def cases(make: Callable[..., Any]) -> list[Any]:
    out: list[Any] = []

    def add(
        cid: str, label: str, tool: str, cmd: str, files: dict[str, str], note: str = ""
    ) -> None:
        files = {k: d(v) for k, v in files.items()}
        ecosystem = ECOSYSTEM_OF[cid.split("-")[1]]
        out.append(make(cid, label, tool, cmd, files, note, ecosystem=ecosystem))

    # ------------------------------------------------------------------ Ruby
    def rb(cid: str, label: str, code: str, note: str = "") -> None:
        add(cid, label, "ruby", "ruby main.rb", {"main.rb": code}, note)

    rb(
        "e-ruby-nil-method",
        "TYPE_ERROR",
        """
        users = { "ann" => "Ann Lee" }
        puts users["bob"].upcase
        """,
        "a method called on nil (a missing hash key): Ruby's null dereference",
    )
    rb(
        "e-ruby-nomethod",
        "FUNCTION_ERROR",
        """
        title = "release notes"
        puts title.shout
        """,
    )
    rb(
        "e-ruby-nameerror",
        "FUNCTION_ERROR",
        """
        def total(items)
          items.sum
        end
        puts totl([1, 2])
        """,
    )
    rb(
        "e-ruby-syntax",
        "SYNTAX_ERROR",
        """
        def greet(name)
          if name
            puts "hi #{name}"
        end
        greet("x")
        """,
    )
    rb(
        "e-ruby-typeerror",
        "TYPE_ERROR",
        """
        count = 3
        puts count + " items"
        """,
    )
    rb(
        "e-ruby-file",
        "FILE_ACCESS",
        """
        config = File.read("config/settings.yml")
        puts config
        """,
    )
    rb(
        "e-ruby-loaderror",
        "RESOURCE_ERROR",
        """
        require "nokogiri"
        puts Nokogiri::VERSION
        """,
    )
    rb(
        "e-ruby-timeout",
        "TIMEOUT",
        """
        require "timeout"
        Timeout.timeout(0.2) { sleep 5 }
        """,
    )
    rb(
        "e-ruby-net-refused",
        "NETWORK_ERROR",
        """
        require "socket"
        TCPSocket.new("127.0.0.1", ENV.fetch("PORT_REFUSED").to_i)
        """,
    )
    rb(
        "e-ruby-stack",
        "MEMORY_ERROR",
        """
        def depth(n) = depth(n + 1) + 1
        depth(0)
        """,
    )
    rb(
        "e-ruby-unknown-keyerror",
        "UNKNOWN",
        """
        settings = { mode: "fast" }
        puts settings.fetch(:level)
        """,
    )
    rb(
        "e-ruby-json-parse",
        "SYNTAX_ERROR",
        """
        require "json"
        JSON.parse('{"name": "x",}')
        """,
    )

    def pair(tool: str, cmd: str, first: str, second: str) -> Callable[..., None]:
        """Cases of two files (code and its test) run by one command."""

        def make(cid: str, label: str, one: str, two: str, note: str = "") -> None:
            add(cid, label, tool, cmd, {first: one, second: two}, note)

        return make

    rspec = pair("rspec", "rspec --no-color", "lib/calc.rb", "spec/calc_spec.rb")

    rspec(
        "e-rspec-eq",
        "ASSERTION_FAILURE",
        """
        def add(a, b) = a - b
        """,
        """
        require_relative "../lib/calc"

        RSpec.describe "add" do
          it "adds two numbers" do
            expect(add(1, 2)).to eq(3)
          end
        end
        """,
    )
    rspec(
        "e-rspec-include",
        "ASSERTION_FAILURE",
        """
        def tags(text) = text.split(",")
        """,
        """
        require_relative "../lib/calc"

        RSpec.describe "tags" do
          it "keeps every tag" do
            expect(tags("a, b")).to include("b")
          end
        end
        """,
    )
    rspec(
        "e-rspec-raise",
        "ASSERTION_FAILURE",
        """
        def age!(value) = value
        """,
        """
        require_relative "../lib/calc"

        RSpec.describe "age!" do
          it "rejects negative ages" do
            expect { age!(-1) }.to raise_error(ArgumentError)
          end
        end
        """,
    )
    rspec(
        "e-rspec-nil",
        "TYPE_ERROR",
        """
        def initials(people, key) = people[key].split.map { |w| w[0] }.join
        """,
        """
        require_relative "../lib/calc"

        RSpec.describe "initials" do
          it "reads a person's initials" do
            expect(initials({ "a" => "Ann Lee" }, "b")).to eq("AL")
          end
        end
        """,
    )
    rspec(
        "e-rspec-undefined",
        "FUNCTION_ERROR",
        """
        def add(a, b) = a + b
        """,
        """
        require_relative "../lib/calc"

        RSpec.describe "sum" do
          it "sums" do
            expect(sum_all([1, 2])).to eq(3)
          end
        end
        """,
    )
    add(
        "e-minitest-assert",
        "ASSERTION_FAILURE",
        "ruby",
        "ruby test_slug.rb",
        {
            "test_slug.rb": """
            require "minitest/autorun"

            def slug(title) = title.downcase

            class SlugTest < Minitest::Test
              def test_slug
                assert_equal "hello-world", slug("Hello World")
              end
            end
            """
        },
    )
    add(
        "e-bundler-missing-gem",
        "RESOURCE_ERROR",
        "bundler",
        "bundle exec ruby -e 'puts 1'",
        {
            "Gemfile": """
            source "https://rubygems.org"
            gem "corpus-missing-gem", "1.2.3"
            """
        },
        "a gem in the Gemfile that is not installed",
    )

    # ------------------------------------------------------------------ PHP
    def php(cid: str, label: str, code: str, note: str = "", args: str = "") -> None:
        add(cid, label, "php", f"php {args}main.php", {"main.php": code}, note)

    php(
        "e-php-syntax",
        "SYNTAX_ERROR",
        """
        <?php
        function greet($name) {
            echo "hi " . $name
        }
        greet("x");
        """,
    )
    php(
        "e-php-undefined-function",
        "FUNCTION_ERROR",
        """
        <?php
        echo format_price(3);
        """,
    )
    php(
        "e-php-undefined-method",
        "FUNCTION_ERROR",
        """
        <?php
        class Cart { public function total() { return 0; } }
        echo (new Cart())->subtotal();
        """,
    )
    php(
        "e-php-null-method",
        "TYPE_ERROR",
        """
        <?php
        class User { public function name() { return "ann"; } }
        function find_user($id) { return $id === 1 ? new User() : null; }
        echo find_user(2)->name();
        """,
        "a method called on null",
    )
    php(
        "e-php-typeerror",
        "TYPE_ERROR",
        """
        <?php
        declare(strict_types=1);
        function area(int $w, int $h): int { return $w * $h; }
        echo area("3", 4);
        """,
    )
    php(
        "e-php-file",
        "FILE_ACCESS",
        """
        <?php
        $text = file_get_contents("config/settings.json");
        if ($text === false) { exit(1); }
        """,
    )
    php(
        "e-php-memory",
        "MEMORY_ERROR",
        """
        <?php
        $rows = [];
        while (true) { $rows[] = str_repeat("x", 1024); }
        """,
        args="-d memory_limit=16M ",
    )
    php(
        "e-php-unknown-divzero",
        "UNKNOWN",
        """
        <?php
        function per_item($total, $count) { return intdiv($total, $count); }
        echo per_item(10, 0);
        """,
    )
    php(
        "e-php-json",
        "SYNTAX_ERROR",
        """
        <?php
        json_decode('{"name": "x",}', flags: JSON_THROW_ON_ERROR);
        """,
    )

    phpunit = pair("phpunit", "phpunit --colors=never tests", "src/Calc.php", "tests/CalcTest.php")

    phpunit(
        "e-phpunit-assert",
        "ASSERTION_FAILURE",
        """
        <?php
        function add($a, $b) { return $a - $b; }
        """,
        """
        <?php
        use PHPUnit\\Framework\\TestCase;
        require_once __DIR__ . '/../src/Calc.php';

        final class CalcTest extends TestCase {
            public function testAdd(): void { $this->assertSame(3, add(1, 2)); }
        }
        """,
    )
    phpunit(
        "e-phpunit-null",
        "TYPE_ERROR",
        """
        <?php
        function first_word($words) { return $words[0] ?? null; }
        """,
        """
        <?php
        use PHPUnit\\Framework\\TestCase;
        require_once __DIR__ . '/../src/Calc.php';

        final class CalcTest extends TestCase {
            public function testFirst(): void {
                $this->assertSame("A", first_word([])->upper());
            }
        }
        """,
    )
    add(
        "e-composer-php-version",
        "RESOURCE_ERROR",
        "composer",
        "composer install --no-interaction --no-plugins",
        {"composer.json": COMPOSER_JSON % '"php": ">=9.1"'},
        "the project needs a PHP that is not installed",
    )
    add(
        "e-composer-extension",
        "RESOURCE_ERROR",
        "composer",
        "composer install --no-interaction --no-plugins",
        {"composer.json": COMPOSER_JSON % '"ext-mongodb": "*"'},
        "a PHP extension that is not installed",
    )
    add(
        "e-composer-json-syntax",
        "SYNTAX_ERROR",
        "composer",
        "composer install --no-interaction --no-plugins",
        {"composer.json": '{"name": "corpus/app", "require": {}\n'},
    )

    # ------------------------------------------------------------------ Elixir
    def ex(cid: str, label: str, code: str, note: str = "") -> None:
        add(cid, label, "elixir", "elixir main.exs", {"main.exs": code}, note)

    ex(
        "e-elixir-undefined",
        "FUNCTION_ERROR",
        """
        defmodule Price do
          def total(items), do: Enum.sum(items)
        end
        IO.puts(Price.totl([1, 2]))
        """,
    )
    ex(
        "e-elixir-syntax",
        "SYNTAX_ERROR",
        """
        defmodule Price do
          def total(items) do
            Enum.sum(items
          end
        end
        """,
    )
    ex(
        "e-elixir-arith",
        "TYPE_ERROR",
        """
        defmodule Label do
          def line(name, count), do: name <> ": " <> count
        end
        IO.puts(Label.line("apples", 3))
        """,
    )
    ex(
        "e-elixir-file",
        "FILE_ACCESS",
        """
        File.read!("config/settings.json") |> IO.puts()
        """,
    )
    ex(
        "e-elixir-task-timeout",
        "TIMEOUT",
        """
        task = Task.async(fn -> Process.sleep(5_000) end)
        Task.await(task, 200)
        """,
    )
    ex(
        "e-elixir-unknown-keyerror",
        "UNKNOWN",
        """
        settings = %{mode: "fast"}
        IO.puts(Map.fetch!(settings, :level))
        """,
    )
    ex(
        "e-elixir-nil-access",
        "TYPE_ERROR",
        """
        user = nil
        IO.puts(String.upcase(user.name))
        """,
        "a field read on nil",
    )

    def mix(cid: str, label: str, lib: str, test: str, note: str = "", deps: str = "[]") -> None:
        files = {
            "mix.exs": f"""
            defmodule Corpus.MixProject do
              use Mix.Project
              def project, do: [app: :corpus, version: "0.1.0", deps: {deps}]
            end
            """,
            "lib/corpus.ex": lib,
            "test/test_helper.exs": "ExUnit.start()\n",
            "test/corpus_test.exs": test,
        }
        add(cid, label, "mix", "mix test", files, note)

    mix(
        "e-mix-assert",
        "ASSERTION_FAILURE",
        """
        defmodule Corpus do
          def add(a, b), do: a - b
        end
        """,
        """
        defmodule CorpusTest do
          use ExUnit.Case
          test "adds" do
            assert Corpus.add(1, 2) == 3
          end
        end
        """,
    )
    mix(
        "e-mix-test-timeout",
        "TIMEOUT",
        """
        defmodule Corpus do
          def slow, do: Process.sleep(5_000)
        end
        """,
        """
        defmodule CorpusTest do
          use ExUnit.Case
          @tag timeout: 300
          test "finishes" do
            Corpus.slow()
          end
        end
        """,
    )
    mix(
        "e-mix-compile-undefined",
        "FUNCTION_ERROR",
        """
        defmodule Corpus do
          def total(items), do: sum_all(items)
        end
        """,
        """
        defmodule CorpusTest do
          use ExUnit.Case
          test "total", do: assert Corpus.total([1]) == 1
        end
        """,
    )
    mix(
        "e-mix-deps-missing",
        "RESOURCE_ERROR",
        """
        defmodule Corpus do
          def encode(x), do: Jason.encode!(x)
        end
        """,
        """
        defmodule CorpusTest do
          use ExUnit.Case
          test "encode", do: assert Corpus.encode(1) == "1"
        end
        """,
        "a Hex dependency that was never fetched",
        deps='[{:jason, "~> 1.4"}]',
    )

    # ------------------------------------------------------------------ Kotlin and Gradle
    def kt(cid: str, label: str, code: str, note: str = "") -> None:
        add(
            cid,
            label,
            "kotlinc",
            "kotlinc main.kt -include-runtime -d main.jar 2>&1 && kotlin -cp main.jar MainKt",
            {"main.kt": code},
            note,
        )

    kt(
        "e-kotlin-type-mismatch",
        "TYPE_ERROR",
        """
        fun area(w: Int, h: Int): Int = w * h
        fun main() { println(area("3", 4)) }
        """,
    )
    kt(
        "e-kotlin-unresolved",
        "FUNCTION_ERROR",
        """
        fun total(xs: List<Int>): Int = xs.sum()
        fun main() { println(totl(listOf(1, 2))) }
        """,
    )
    kt(
        "e-kotlin-syntax",
        "SYNTAX_ERROR",
        """
        fun main() {
            val xs = listOf(1, 2
            println(xs)
        }
        """,
    )
    kt(
        "e-kotlin-npe",
        "TYPE_ERROR",
        """
        fun find(name: String): String? = if (name == "ann") "Ann" else null
        fun main() { println(find("bob")!!.length) }
        """,
    )
    kt(
        "e-kotlin-null-safety",
        "TYPE_ERROR",
        """
        fun find(name: String): String? = if (name == "ann") "Ann" else null
        fun main() { println(find("bob").length) }
        """,
        "the compiler rejects a member call on a nullable type",
    )

    gradle_build = """
    plugins { id 'java' }
    repositories { flatDir { dirs '/usr/share/java' } }
    dependencies { testImplementation name: 'junit4'; testImplementation name: 'hamcrest-core' }
    """

    def gr(cid: str, label: str, files: dict[str, str], note: str = "", build: str = "") -> None:
        files = {
            "settings.gradle": "rootProject.name = 'corpus'\n",
            "build.gradle": build or gradle_build,
            **files,
        }
        add(cid, label, "gradle", "gradle --offline --console=plain -q test", files, note)

    gr(
        "e-gradle-junit-assert",
        "ASSERTION_FAILURE",
        {
            "src/main/java/Calc.java": "public class Calc { static int add(int a, int b) { return a - b; } }\n",
            "src/test/java/CalcTest.java": """
            import org.junit.Test;
            import static org.junit.Assert.assertEquals;

            public class CalcTest {
                @Test public void adds() { assertEquals(3, Calc.add(1, 2)); }
            }
            """,
        },
    )
    gr(
        "e-gradle-compile-symbol",
        "FUNCTION_ERROR",
        {
            "src/main/java/Calc.java": "public class Calc { static int add(int a, int b) { return sum(a, b); } }\n",
        },
    )
    gr(
        "e-gradle-compile-type",
        "TYPE_ERROR",
        {
            "src/main/java/Calc.java": "public class Calc { static int add(int a, int b) { String s = a + b; return s; } }\n",
        },
    )
    gr(
        "e-gradle-missing-dependency",
        "RESOURCE_ERROR",
        {"src/main/java/Calc.java": "public class Calc {}\n"},
        "a dependency that is not in any repository reachable offline",
        build="""
        plugins { id 'java' }
        repositories { flatDir { dirs '/usr/share/java' } }
        dependencies { implementation 'com.example.corpus:missing-lib:1.0.0' }
        """,
    )
    gr(
        "e-gradle-script-syntax",
        "SYNTAX_ERROR",
        {"src/main/java/Calc.java": "public class Calc {}\n"},
        build="""
        plugins { id 'java'
        repositories { mavenCentral() }
        """,
    )
    gr(
        "e-gradle-junit-timeout",
        "TIMEOUT",
        {
            "src/main/java/Calc.java": "public class Calc { static void slow() throws Exception { Thread.sleep(5000); } }\n",
            "src/test/java/CalcTest.java": """
            import org.junit.Test;

            public class CalcTest {
                @Test(timeout = 200) public void fast() throws Exception { Calc.slow(); }
            }
            """,
        },
    )

    # ------------------------------------------------------------------ Haskell and Cabal
    def hs(cid: str, label: str, code: str, note: str = "") -> None:
        add(cid, label, "ghc", "runghc Main.hs", {"Main.hs": code}, note)

    hs(
        "e-haskell-type",
        "TYPE_ERROR",
        """
        area :: Int -> Int -> Int
        area w h = w * h

        main :: IO ()
        main = print (area "3" 4)
        """,
    )
    hs(
        "e-haskell-scope",
        "FUNCTION_ERROR",
        """
        total :: [Int] -> Int
        total = sum

        main :: IO ()
        main = print (totl [1, 2])
        """,
    )
    hs(
        "e-haskell-parse",
        "SYNTAX_ERROR",
        """
        main :: IO ()
        main = do
          let xs = [1, 2
          print xs
        """,
    )
    hs(
        "e-haskell-missing-module",
        "RESOURCE_ERROR",
        """
        import qualified Data.Aeson as A

        main :: IO ()
        main = print (A.encode (1 :: Int))
        """,
    )
    hs(
        "e-haskell-file",
        "FILE_ACCESS",
        """
        main :: IO ()
        main = readFile "config/settings.json" >>= putStrLn
        """,
    )
    hs(
        "e-haskell-unknown-head",
        "UNKNOWN",
        """
        main :: IO ()
        main = print (head ([] :: [Int]))
        """,
    )
    hs(
        "e-haskell-assert",
        "ASSERTION_FAILURE",
        """
        import Control.Exception (assert)

        add :: Int -> Int -> Int
        add a b = a - b

        main :: IO ()
        main = print (assert (add 1 2 == 3) "ok")
        """,
    )
    hs(
        "e-haskell-timeout",
        "TIMEOUT",
        """
        import System.Timeout (timeout)
        import Control.Concurrent (threadDelay)
        import System.Exit (die)

        main :: IO ()
        main = do
          r <- timeout 200000 (threadDelay 5000000)
          maybe (die "fetch: timed out after 0.2s") return r
        """,
    )
    cabal_file = """
    cabal-version: 2.4
    name:          corpus
    version:       0.1.0
    executable corpus
      main-is:          Main.hs
      build-depends:    base, {dep}
      default-language: Haskell2010
    """
    add(
        "e-cabal-missing-dep",
        "RESOURCE_ERROR",
        "cabal",
        CABAL,
        {
            "corpus.cabal": cabal_file.format(dep="aeson"),
            "cabal.cfg": "jobs: 1\n",
            "Main.hs": "main :: IO ()\nmain = pure ()\n",
        },
        "a package that is not installed and cannot be downloaded",
    )
    add(
        "e-cabal-type",
        "TYPE_ERROR",
        "cabal",
        CABAL,
        {
            "corpus.cabal": cabal_file.format(dep="containers"),
            "cabal.cfg": "jobs: 1\n",
            "Main.hs": 'main :: IO ()\nmain = putStrLn (length "abc")\n',
        },
    )

    # ------------------------------------------------------------------ Bazel
    def bz(
        cid: str, label: str, build: str, files: dict[str, str] | None = None, note: str = ""
    ) -> None:
        add(
            cid,
            label,
            "bazel",
            "bazel --batch build --color=no --curses=no //:all",
            {"WORKSPACE": "", "BUILD": build, **(files or {})},
            note,
        )

    bz(
        "e-bazel-syntax",
        "SYNTAX_ERROR",
        """
        genrule(
            name = "g",
            outs = ["out.txt"],
            cmd = "echo hi > $@"
        """,
    )
    bz(
        "e-bazel-undefined",
        "FUNCTION_ERROR",
        """
        corpus_library(name = "lib", srcs = ["a.txt"])
        """,
        {"a.txt": "a\n"},
    )
    bz(
        "e-bazel-missing-input",
        "FILE_ACCESS",
        """
        genrule(name = "g", srcs = ["data/input.txt"], outs = ["out.txt"], cmd = "cp $< $@")
        """,
    )
    bz(
        "e-bazel-genrule-missing-tool",
        "RESOURCE_ERROR",
        """
        genrule(name = "g", outs = ["out.pb"], cmd = "corpus-protoc --out $@ schema.proto")
        """,
        note="a build step's program is not installed",
    )

    # ------------------------------------------------------------------ CMake, ctest and Conan
    def cm(
        cid: str,
        label: str,
        lists: str,
        files: dict[str, str] | None = None,
        note: str = "",
        then: str = "",
    ) -> None:
        cmd = "cmake -S . -B build" + (f" && {then}" if then else "")
        add(cid, label, "cmake", cmd, {"CMakeLists.txt": lists, **(files or {})}, note)

    cm(
        "e-cmake-syntax",
        "SYNTAX_ERROR",
        """
        cmake_minimum_required(VERSION 3.16)
        project(corpus C)
        add_executable(app main.c
        """,
        {"main.c": "int main(void) { return 0; }\n"},
    )
    cm(
        "e-cmake-missing-source",
        "FILE_ACCESS",
        """
        cmake_minimum_required(VERSION 3.16)
        project(corpus C)
        add_executable(app src/main.c)
        """,
    )
    cm(
        "e-cmake-find-package",
        "RESOURCE_ERROR",
        """
        cmake_minimum_required(VERSION 3.16)
        project(corpus C)
        find_package(CorpusMissingLib REQUIRED)
        """,
    )
    cm(
        "e-cmake-version",
        "RESOURCE_ERROR",
        """
        cmake_minimum_required(VERSION 9.2)
        project(corpus C)
        """,
        note="the project needs a newer CMake than the one installed",
    )
    cm(
        "e-cmake-unknown-command",
        "FUNCTION_ERROR",
        """
        cmake_minimum_required(VERSION 3.16)
        project(corpus C)
        corpus_add_plugin(app)
        """,
    )
    cm(
        "e-cmake-build-type",
        "TYPE_ERROR",
        """
        cmake_minimum_required(VERSION 3.16)
        project(corpus CXX)
        add_executable(app main.cpp)
        """,
        {
            "main.cpp": "#include <string>\nint main() { std::string s = 42.5; int n = s; return n; }\n"
        },
        then="cmake --build build",
    )
    cm(
        "e-ctest-assert",
        "ASSERTION_FAILURE",
        """
        cmake_minimum_required(VERSION 3.16)
        project(corpus C)
        enable_testing()
        add_executable(calc_test calc_test.c)
        add_test(NAME calc COMMAND calc_test)
        """,
        {
            "calc_test.c": d("""
            #include <assert.h>
            static int add(int a, int b) { return a - b; }
            int main(void) { assert(add(1, 2) == 3); return 0; }
            """)
        },
        then="cmake --build build && ctest --test-dir build --output-on-failure",
    )
    cm(
        "e-ctest-timeout",
        "TIMEOUT",
        """
        cmake_minimum_required(VERSION 3.16)
        project(corpus C)
        enable_testing()
        add_executable(slow_test slow_test.c)
        add_test(NAME slow COMMAND slow_test)
        set_tests_properties(slow PROPERTIES TIMEOUT 1)
        """,
        {"slow_test.c": "#include <unistd.h>\nint main(void) { sleep(10); return 0; }\n"},
        then="cmake --build build && ctest --test-dir build --output-on-failure",
    )
    conan_env = f"CONAN_HOME=$PWD/.conan {ECO_BIN}/conan"
    add(
        "e-conan-missing-package",
        "RESOURCE_ERROR",
        "conan",
        f"{conan_env} profile detect >/dev/null 2>&1; {conan_env} remote remove conancenter; "
        f"{conan_env} install . --build=missing",
        {"conanfile.txt": "[requires]\ncorpusmissinglib/1.2.3\n"},
        "a requirement that is in no cache and no remote (the default remote is removed)",
    )
    add(
        "e-conan-syntax",
        "SYNTAX_ERROR",
        "conan",
        f"{conan_env} profile detect >/dev/null 2>&1; {conan_env} install .",
        {
            "conanfile.py": """
            from conan import ConanFile

            class Corpus(ConanFile):
                settings = "os", "arch"
                def requirements(self)
                    pass
            """
        },
    )

    # ------------------------------------------------------------------ Nix
    def nx(
        cid: str, label: str, expr: str, files: dict[str, str] | None = None, note: str = ""
    ) -> None:
        add(
            cid,
            label,
            "nix",
            "nix-instantiate --eval --strict default.nix",
            {"default.nix": expr, **(files or {})},
            note,
        )

    nx(
        "e-nix-syntax",
        "SYNTAX_ERROR",
        """
        let
          name = "corpus"
          version = "1.0";
        in name + version
        """,
    )
    nx(
        "e-nix-undefined",
        "FUNCTION_ERROR",
        """
        let
          mkName = n: "corpus-" + n;
        in mkNmae "x"
        """,
    )
    nx(
        "e-nix-type",
        "TYPE_ERROR",
        """
        let
          port = 8080;
        in "http://localhost:" + port
        """,
    )
    nx(
        "e-nix-assert",
        "ASSERTION_FAILURE",
        """
        let
          add = a: b: a - b;
        in assert add 1 2 == 3; "ok"
        """,
    )
    nx(
        "e-nix-file",
        "FILE_ACCESS",
        """
        import ./nix/overlay.nix
        """,
    )
    nx(
        "e-nix-attr-missing",
        "FUNCTION_ERROR",
        """
        let
          lib = { mkName = n: "corpus-" + n; };
        in lib.mkVersion "1"
        """,
        note="an attribute that the set does not define",
    )
    nx(
        "e-nix-recursion",
        "MEMORY_ERROR",
        """
        let
          a = { x = a.x; };
        in a.x
        """,
        note="infinite recursion, which Nix detects",
    )

    # ------------------------------------------------------------------ pre-commit
    def pc(
        cid: str, label: str, config: str, files: dict[str, str] | None = None, note: str = ""
    ) -> None:
        cmd = (
            "git init -q . && git add -A && "
            f"PRE_COMMIT_HOME=$PWD/.pre-commit-home {ECO_BIN}/pre-commit run --all-files --color=never"
        )
        add(
            cid,
            label,
            "pre-commit",
            cmd,
            {".pre-commit-config.yaml": config, **(files or {})},
            note,
        )

    pc(
        "e-precommit-missing-exe",
        "RESOURCE_ERROR",
        """
        repos:
          - repo: local
            hooks:
              - id: lint
                name: lint
                entry: corpus-missing-linter
                language: system
                files: \\.py$
        """,
        {"app.py": "x = 1\n"},
        "a hook whose program is not installed",
    )
    pc(
        "e-precommit-config-syntax",
        "SYNTAX_ERROR",
        """
        repos:
          - repo: local
            hooks:
              - id: lint
                name: lint
              entry: true
        """,
    )
    pc(
        "e-precommit-json",
        "SYNTAX_ERROR",
        f"""
        repos:
          - repo: local
            hooks:
              - id: json
                name: check json
                entry: {ECO_BIN}/python -m json.tool
                language: system
                files: \\.json$
        """,
        {"data.json": '{"name": "x",}\n'},
    )
    pc(
        "e-precommit-pytest",
        "ASSERTION_FAILURE",
        f"""
        repos:
          - repo: local
            hooks:
              - id: tests
                name: tests
                entry: {ECO_BIN}/python -m pytest -q -p no:cacheprovider
                language: system
                pass_filenames: false
        """,
        {
            "test_calc.py": "def add(a, b):\n    return a - b\n\ndef test_add():\n    assert add(1, 2) == 3\n"
        },
    )
    pc(
        "e-precommit-python-syntax",
        "SYNTAX_ERROR",
        f"""
        repos:
          - repo: local
            hooks:
              - id: compile
                name: compile
                entry: {ECO_BIN}/python -m py_compile
                language: system
                files: \\.py$
        """,
        {"app.py": "def f(x:\n    return x\n"},
    )

    # ------------------------------------------------------------------ Go
    go_mod = "module example.com/corpus\n\ngo 1.19\n"

    def go(
        cid: str, label: str, files: dict[str, str], cmd: str = "go run .", note: str = ""
    ) -> None:
        add(cid, label, "go", cmd, {"go.mod": go_mod, **files}, note)

    def gomain(body: str) -> dict[str, str]:
        return {"main.go": body}

    go(
        "e-go-type",
        "TYPE_ERROR",
        gomain("""
        package main

        import "fmt"

        func area(w, h int) int { return w * h }

        func main() { fmt.Println(area("3", 4)) }
        """),
    )
    go(
        "e-go-type-assign",
        "TYPE_ERROR",
        gomain("""
        package main

        import "fmt"

        func main() {
            var count int = "three"
            fmt.Println(count)
        }
        """),
    )
    go(
        "e-go-undefined",
        "FUNCTION_ERROR",
        gomain("""
        package main

        import "fmt"

        func total(xs []int) int { return len(xs) }

        func main() { fmt.Println(totl([]int{1})) }
        """),
    )
    go(
        "e-go-syntax",
        "SYNTAX_ERROR",
        gomain("""
        package main

        import "fmt"

        func main() {
            xs := []int{1, 2
            fmt.Println(xs)
        }
        """),
    )
    go(
        "e-go-nil-pointer",
        "TYPE_ERROR",
        gomain("""
        package main

        import "fmt"

        type User struct{ Name string }

        func find(id int) *User { return nil }

        func main() { fmt.Println(find(2).Name) }
        """),
        note="a nil pointer dereference (Go reports it with SIGSEGV)",
    )
    go(
        "e-go-nil-map",
        "TYPE_ERROR",
        gomain("""
        package main

        func main() {
            var counts map[string]int
            counts["a"]++
        }
        """),
        note="a write to a nil map",
    )
    go(
        "e-go-file",
        "FILE_ACCESS",
        gomain("""
        package main

        import (
            "fmt"
            "os"
        )

        func main() {
            data, err := os.ReadFile("config/settings.json")
            if err != nil {
                fmt.Fprintln(os.Stderr, "error:", err)
                os.Exit(1)
            }
            fmt.Println(string(data))
        }
        """),
    )
    go(
        "e-go-missing-module",
        "RESOURCE_ERROR",
        gomain("""
        package main

        import "github.com/corpus/missinglib"

        func main() { missinglib.Run() }
        """),
    )
    go(
        "e-go-unknown-index",
        "UNKNOWN",
        gomain("""
        package main

        import "fmt"

        func main() {
            xs := []int{1, 2}
            i := len(xs) + 1
            fmt.Println(xs[i])
        }
        """),
    )
    go(
        "e-go-net-refused",
        "NETWORK_ERROR",
        gomain("""
        package main

        import (
            "fmt"
            "net/http"
            "os"
        )

        func main() {
            _, err := http.Get("http://127.0.0.1:" + os.Getenv("PORT_REFUSED") + "/")
            if err != nil {
                fmt.Println(err)
                os.Exit(1)
            }
        }
        """),
    )
    calc_go = "package corpus\n\nfunc Add(a, b int) int { return a - b }\n"

    def gotest(cid: str, label: str, test: str, src: str = calc_go, **kw: str) -> None:
        cmd = f"go test {kw.get('flags', '')}./..."
        go(cid, label, {"calc.go": src, "calc_test.go": d(test)}, cmd=cmd, note=kw.get("note", ""))

    gotest(
        "e-go-test-fail",
        "ASSERTION_FAILURE",
        """
            package corpus

            import "testing"

            func TestAdd(t *testing.T) {
                if got := Add(1, 2); got != 3 {
                    t.Errorf("Add(1, 2) = %d; want 3", got)
                }
            }
        """,
    )
    gotest(
        "e-go-test-timeout",
        "TIMEOUT",
        """
            package corpus

            import "testing"

            func TestSlow(t *testing.T) { Slow() }
        """,
        src='package corpus\n\nimport "time"\n\nfunc Slow() { time.Sleep(10 * time.Second) }\n',
        flags="-timeout 1s ",
    )
    gotest(
        "e-go-test-type",
        "TYPE_ERROR",
        """
            package corpus

            import "testing"

            func TestAdd(t *testing.T) {
                if Add(1, "2") != 3 {
                    t.Fatal("wrong")
                }
            }
        """,
    )
    gotest(
        "e-go-vet-printf",
        "TYPE_ERROR",
        """
            package corpus

            import "testing"

            func TestAdd(t *testing.T) {
                t.Logf("sum %d", "three")
            }
        """,
        note="go test runs vet: a printf verb of the wrong type",
    )

    # ------------------------------------------------------------------ Java (JUnit 4, new forms)
    def ju(cid: str, label: str, test: str, src: str, note: str = "") -> None:
        cmd = (
            f"javac -cp {JUNIT_CP} -d out Calc.java CalcTest.java && "
            f"java -cp out:{JUNIT_CP} org.junit.runner.JUnitCore CalcTest"
        )
        add(cid, label, "junit", cmd, {"Calc.java": src, "CalcTest.java": test}, note)

    calc_java = "public class Calc { static int add(int a, int b) { return a - b; } }\n"
    ju(
        "e-junit-assert",
        "ASSERTION_FAILURE",
        """
        import org.junit.Test;
        import static org.junit.Assert.assertEquals;

        public class CalcTest {
            @Test public void adds() { assertEquals(3, Calc.add(1, 2)); }
        }
        """,
        calc_java,
    )
    ju(
        "e-junit-timeout",
        "TIMEOUT",
        """
        import org.junit.Test;

        public class CalcTest {
            @Test(timeout = 200) public void fast() throws Exception { Thread.sleep(5000); }
        }
        """,
        calc_java,
    )
    ju(
        "e-junit-expected-exception",
        "ASSERTION_FAILURE",
        """
        import org.junit.Test;

        public class CalcTest {
            @Test(expected = IllegalArgumentException.class)
            public void rejects() { Calc.add(-1, 2); }
        }
        """,
        calc_java,
    )
    ju(
        "e-junit-npe",
        "TYPE_ERROR",
        """
        import org.junit.Test;
        import static org.junit.Assert.assertEquals;

        public class CalcTest {
            @Test public void name() { assertEquals(3, Calc.name(null)); }
        }
        """,
        "public class Calc { static int name(String s) { return s.length(); } }\n",
    )
    add(
        "e-java-nosuchmethod",
        "FUNCTION_ERROR",
        "java",
        "mkdir -p v1 v2 && javac -d v2 lib2/Lib.java && javac -cp v2 -d app Main.java && "
        "javac -d v1 lib1/Lib.java && java -cp app:v1 Main",
        {
            "lib1/Lib.java": 'public class Lib { public static String hello() { return "hi"; } }\n',
            "lib2/Lib.java": (
                'public class Lib { public static String hello() { return "hi"; }\n'
                '  public static String greet(String n) { return "hi " + n; } }\n'
            ),
            "Main.java": 'public class Main { public static void main(String[] a) { System.out.println(Lib.greet("x")); } }\n',
        },
        "compiled against a newer library than the one on the class path",
    )

    # ------------------------------------------------------------------ C and C++ (gcc, g++)
    def cc(cid: str, label: str, code: str, compiler: str = "gcc", note: str = "") -> None:
        ext = "c" if compiler == "gcc" else "cpp"
        add(cid, label, compiler, f"{compiler} -Wall -c main.{ext}", {f"main.{ext}": code}, note)

    cc(
        "e-gcc-syntax-semicolon",
        "SYNTAX_ERROR",
        """
        int main(void) {
            int x = 1
            return x;
        }
        """,
    )
    cc(
        "e-gcc-syntax-string",
        "SYNTAX_ERROR",
        """
        #include <stdio.h>
        int main(void) {
            puts("unterminated);
            return 0;
        }
        """,
    )
    cc(
        "e-gcc-syntax-eof",
        "SYNTAX_ERROR",
        """
        int add(int a, int b) {
            return a + b;
        """,
    )
    cc(
        "e-gcc-syntax-decl",
        "SYNTAX_ERROR",
        """
        int add(int a, int b) {
            return a + b;
        }}
        """,
    )
    cc(
        "e-gxx-syntax-class",
        "SYNTAX_ERROR",
        """
        class Point {
            int x;
        }
        int main() { return 0; }
        """,
        compiler="g++",
    )
    cc(
        "e-gxx-syntax-paren",
        "SYNTAX_ERROR",
        """
        #include <vector>
        int main() {
            std::vector<int> xs{1, 2};
            if (xs.size() > 1 {
                return 1;
            }
            return 0;
        }
        """,
        compiler="g++",
    )
    cc(
        "e-gcc-type-struct",
        "TYPE_ERROR",
        """
        struct point { int x, y; };
        int main(void) {
            struct point p = {1, 2};
            int n = p;
            return n;
        }
        """,
    )
    cc(
        "e-gxx-type-conversion",
        "TYPE_ERROR",
        """
        #include <string>
        int main() {
            std::string name = "x";
            int n = name;
            return n;
        }
        """,
        compiler="g++",
    )
    cc(
        "e-gcc-undeclared",
        "FUNCTION_ERROR",
        """
        int main(void) {
            return totl;
        }
        """,
    )

    # ------------------------------------------------------------------ Python: pytest-timeout, doctest
    py = f"{ECO_BIN}/python"
    add(
        "e-pytest-timeout-signal",
        "TIMEOUT",
        "pytest-timeout",
        f"{py} -m pytest -p no:cacheprovider --timeout=1 test_slow.py",
        {"test_slow.py": "import time\n\ndef test_slow():\n    time.sleep(10)\n"},
    )
    add(
        "e-pytest-timeout-thread",
        "TIMEOUT",
        "pytest-timeout",
        f"{py} -m pytest -p no:cacheprovider --timeout=1 --timeout-method=thread test_slow.py",
        {"test_slow.py": "import time\n\ndef test_slow():\n    time.sleep(10)\n"},
    )
    calc_doc = '''
    def add(a, b):
        """
        >>> add(1, 2)
        3
        """
        return a - b
    '''
    add(
        "e-doctest-module",
        "ASSERTION_FAILURE",
        "doctest",
        f"{py} -m doctest calc.py",
        {"calc.py": calc_doc},
    )
    add(
        "e-doctest-pytest",
        "ASSERTION_FAILURE",
        "doctest",
        f"{py} -m pytest -p no:cacheprovider --doctest-modules calc.py",
        {"calc.py": calc_doc},
    )
    add(
        "e-doctest-verbose",
        "ASSERTION_FAILURE",
        "doctest",
        f"{py} -m doctest -v calc.py",
        {"calc.py": calc_doc},
    )
    helpers = Helpers(add, rb, php, ex, kt, hs, nx, go, gomain, cc, cm)
    blind(helpers)
    third(helpers)
    fourth(add)
    return out


def blind(helpers: Helpers) -> None:
    """The second round (ids ``e2-…``): written after the rules for the first were frozen, and
    measured once, as they stood (other failure forms in the same ecosystems, and Perl, which
    no rule was written for)."""
    add, rb, php, ex, kt, hs, nx, go, gomain, cc, cm = helpers
    rb(
        "e2-ruby-arity",
        "TYPE_ERROR",
        """
        def greet(name) = "hi #{name}"
        puts greet("a", "b")
        """,
    )
    rb(
        "e2-ruby-constant",
        "FUNCTION_ERROR",
        """
        puts Settings.load
        """,
    )
    rb(
        "e2-ruby-unknown-zerodiv",
        "UNKNOWN",
        """
        def per_item(total, count) = total / count
        puts per_item(10, 0)
        """,
    )
    add(
        "e2-minitest-nil",
        "TYPE_ERROR",
        "ruby",
        "ruby test_user.rb",
        {
            "test_user.rb": """
        require "minitest/autorun"

        def display_name(users, id) = users[id].capitalize

        class UserTest < Minitest::Test
          def test_name
            assert_equal "Ann", display_name({ 1 => "ann" }, 2)
          end
        end
        """
        },
    )
    add(
        "e2-rspec-truthy",
        "ASSERTION_FAILURE",
        "rspec",
        "rspec --no-color",
        {
            "lib/calc.rb": "def even?(n) = n.odd?\n",
            "spec/calc_spec.rb": """
        require_relative "../lib/calc"

        RSpec.describe "even?" do
          it "knows 4 is even" do
            expect(even?(4)).to be_truthy
          end
        end
        """,
        },
    )
    php(
        "e2-php-arg-count",
        "TYPE_ERROR",
        """
        <?php
        function add($a, $b) { return $a + $b; }
        echo add(1);
        """,
    )
    php(
        "e2-php-undefined-constant",
        "FUNCTION_ERROR",
        """
        <?php
        echo MAX_ITEMS * 2;
        """,
    )
    php(
        "e2-php-require-missing",
        "FILE_ACCESS",
        """
        <?php
        require 'lib/helpers.php';
        """,
    )
    add(
        "e2-phpunit-equals",
        "ASSERTION_FAILURE",
        "phpunit",
        "phpunit --colors=never tests",
        {
            "src/Tags.php": "<?php\nfunction tags($s) { return explode(',', $s); }\n",
            "tests/TagsTest.php": """
        <?php
        use PHPUnit\\Framework\\TestCase;
        require_once __DIR__ . '/../src/Tags.php';

        final class TagsTest extends TestCase {
            public function testTags(): void { $this->assertEquals(['a', 'b'], tags('a, b')); }
        }
        """,
        },
    )
    ex(
        "e2-elixir-module-missing",
        "FUNCTION_ERROR",
        """
        IO.puts(Pricing.total([1, 2]))
        """,
    )
    ex(
        "e2-elixir-badarith",
        "TYPE_ERROR",
        """
        defmodule Count do
          def next(n), do: n + 1
        end
        IO.puts(Count.next("3"))
        """,
    )
    ex(
        "e2-elixir-assert-raise",
        "ASSERTION_FAILURE",
        """
        ExUnit.start(autorun: false)
        defmodule AgeTest do
          use ExUnit.Case
          def age!(n), do: n
          test "rejects negatives" do
            assert_raise ArgumentError, fn -> age!(-1) end
          end
        end
        ExUnit.configure(colors: [enabled: false])
        result = ExUnit.run()
        if result.failures > 0, do: System.halt(1)
        """,
    )
    kt(
        "e2-kotlin-classcast",
        "TYPE_ERROR",
        """
        fun main() {
            val items: List<Any> = listOf("3", 4)
            val first = items[0] as Int
            println(first + 1)
        }
        """,
    )
    kt(
        "e2-kotlin-missing-library",
        "RESOURCE_ERROR",
        """
        import kotlinx.coroutines.runBlocking

        fun main() = runBlocking { println("hi") }
        """,
        "a library that is not on the class path",
    )
    hs(
        "e2-haskell-no-instance",
        "TYPE_ERROR",
        """
        main :: IO ()
        main = print id
        """,
    )
    hs(
        "e2-haskell-arity",
        "TYPE_ERROR",
        """
        double :: Int -> Int
        double x = x * 2

        main :: IO ()
        main = print (double 1 2)
        """,
    )
    hs(
        "e2-haskell-unknown-error",
        "UNKNOWN",
        """
        main :: IO ()
        main = error "release notes are empty"
        """,
    )
    nx(
        "e2-nix-not-function",
        "FUNCTION_ERROR",
        """
        let
          version = "1.0";
        in version "x"
        """,
        note="relabelled from TYPE_ERROR after its first sight: calling what is not a function is a "
        "FUNCTION_ERROR by the documented definitions (`x is not a function`)",
    )
    nx(
        "e2-nix-missing-arg",
        "TYPE_ERROR",
        """
        let
          mkPkg = { name, version }: name + "-" + version;
        in mkPkg { name = "corpus"; }
        """,
    )
    nx(
        "e2-nix-unknown-throw",
        "UNKNOWN",
        """
        throw "release notes are empty"
        """,
    )
    go(
        "e2-go-interface-conversion",
        "TYPE_ERROR",
        gomain("""
        package main

        import "fmt"

        func main() {
            var v interface{} = "3"
            n := v.(int)
            fmt.Println(n + 1)
        }
        """),
    )
    go(
        "e2-go-context-deadline",
        "TIMEOUT",
        gomain("""
        package main

        import (
            "context"
            "fmt"
            "os"
            "time"
        )

        func main() {
            ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
            defer cancel()
            select {
            case <-time.After(2 * time.Second):
            case <-ctx.Done():
                fmt.Println("fetch:", ctx.Err())
                os.Exit(1)
            }
        }
        """),
    )
    go(
        "e2-go-read-dir",
        "FILE_ACCESS",
        gomain("""
        package main

        import (
            "log"
            "os"
        )

        func main() {
            if err := os.MkdirAll("config", 0o755); err != nil {
                log.Fatal(err)
            }
            if _, err := os.ReadFile("config"); err != nil {
                log.Fatal(err)
            }
        }
        """),
    )
    go(
        "e2-go-test-equal",
        "ASSERTION_FAILURE",
        {
            "tags.go": 'package corpus\n\nimport "strings"\n\nfunc Tags(s string) []string { return strings.Split(s, ",") }\n',
            "tags_test.go": d("""
        package corpus

        import (
            "reflect"
            "testing"
        )

        func TestTags(t *testing.T) {
            got := Tags("a, b")
            want := []string{"a", "b"}
            if !reflect.DeepEqual(got, want) {
                t.Fatalf("Tags() = %q, want %q", got, want)
            }
        }
        """),
        },
        cmd="go test ./...",
    )
    cc(
        "e2-gcc-else",
        "SYNTAX_ERROR",
        """
        int sign(int x) {
            if (x > 0) return 1;
            return 0;
            else return -1;
        }
        """,
    )
    cc(
        "e2-gcc-too-many-args",
        "TYPE_ERROR",
        """
        static int add(int a, int b) { return a + b; }
        int main(void) { return add(1, 2, 3); }
        """,
    )
    cc(
        "e2-gxx-primary",
        "SYNTAX_ERROR",
        """
        int main() {
            int x = (1 + );
            return x;
        }
        """,
        compiler="g++",
    )
    cm(
        "e2-cmake-include-missing",
        "FILE_ACCESS",
        """
        cmake_minimum_required(VERSION 3.16)
        project(corpus C)
        include(cmake/Warnings.cmake)
        """,
    )
    add(
        "e2-cmake-link-undefined",
        "FUNCTION_ERROR",
        "cmake",
        "cmake -S . -B build && cmake --build build",
        {
            "CMakeLists.txt": """
        cmake_minimum_required(VERSION 3.16)
        project(corpus C)
        add_executable(app main.c)
        """,
            "main.c": 'int checksum(const char *s);\nint main(void) { return checksum("x"); }\n',
        },
    )

    def pl(cid: str, label: str, code: str, note: str = "") -> None:
        add(cid, label, "perl", "perl main.pl", {"main.pl": code}, note)

    pl(
        "e2-perl-missing-module",
        "RESOURCE_ERROR",
        """
        use strict;
        use JSON::XS::Corpus;
        print "ok\\n";
        """,
    )
    pl(
        "e2-perl-syntax",
        "SYNTAX_ERROR",
        """
        use strict;
        my $x = (1 + ;
        print $x;
        """,
    )
    pl(
        "e2-perl-undefined-sub",
        "FUNCTION_ERROR",
        """
        use strict;
        print total(1, 2);
        """,
    )
    pl(
        "e2-perl-file",
        "FILE_ACCESS",
        """
        use strict;
        open(my $fh, "<", "config/settings.json") or die "cannot open config/settings.json: $!\\n";
        """,
    )
    add(
        "e2-prove-fail",
        "ASSERTION_FAILURE",
        "prove",
        "prove t/",
        {
            "t/calc.t": """
        use strict;
        use Test::More tests => 1;
        sub add { return $_[0] - $_[1] }
        is(add(1, 2), 3, "adds");
        """
        },
    )


def third(helpers: Helpers) -> None:
    """The third round (ids ``e3-…``): written after the second round's rules were frozen, and
    measured once, as they stood."""
    add, rb, php, ex, kt, hs, nx, go, gomain, cc, cm = helpers
    rb(
        "e3-ruby-integer",
        "TYPE_ERROR",
        """
        count = Integer("twelve")
        puts count
        """,
    )
    add(
        "e3-minitest-nil",
        "ASSERTION_FAILURE",
        "ruby",
        "ruby test_cache.rb",
        {
            "test_cache.rb": """
        require "minitest/autorun"

        def cached(key) = { "a" => 1 }.fetch(key, 3)

        class CacheTest < Minitest::Test
          def test_missing_key_is_nil
            assert_nil cached("b")
          end
        end
        """
        },
    )
    php(
        "e3-php-class-missing",
        "FUNCTION_ERROR",
        """
        <?php
        $cart = new ShoppingCart();
        """,
    )
    add(
        "e3-phpunit-exception",
        "ASSERTION_FAILURE",
        "phpunit",
        "phpunit --colors=never tests",
        {
            "src/Age.php": "<?php\nfunction age($n) { return $n; }\n",
            "tests/AgeTest.php": """
        <?php
        use PHPUnit\\Framework\\TestCase;
        require_once __DIR__ . '/../src/Age.php';

        final class AgeTest extends TestCase {
            public function testNegative(): void {
                $this->expectException(InvalidArgumentException::class);
                age(-1);
            }
        }
        """,
        },
    )
    ex(
        "e3-elixir-to-integer",
        "TYPE_ERROR",
        """
        IO.puts(String.to_integer("twelve") + 1)
        """,
    )
    ex(
        "e3-elixir-token-missing",
        "SYNTAX_ERROR",
        """
        defmodule Price do
          def total(items) do
            Enum.sum(items)
        end
        """,
    )
    go(
        "e3-go-atoi",
        "TYPE_ERROR",
        gomain("""
        package main

        import (
            "fmt"
            "os"
            "strconv"
        )

        func main() {
            n, err := strconv.Atoi("twelve")
            if err != nil {
                fmt.Println(err)
                os.Exit(1)
            }
            fmt.Println(n)
        }
        """),
        note='a failed conversion that Go words as "invalid syntax"',
    )
    go(
        "e3-go-unused",
        "UNKNOWN",
        gomain("""
        package main

        func main() {
            count := 3
        }
        """),
        note="an unused variable: a lint finding the compiler enforces",
    )
    hs(
        "e3-haskell-read",
        "TYPE_ERROR",
        """
        main :: IO ()
        main = print (read "twelve" :: Int)
        """,
    )
    add(
        "e3-cabal-test-fail",
        "ASSERTION_FAILURE",
        "cabal",
        CABAL.replace(" build ", " test "),
        {
            "cabal.cfg": "jobs: 1\n",
            "corpus.cabal": """
        cabal-version: 2.4
        name:          corpus
        version:       0.1.0
        test-suite corpus-test
          type:             exitcode-stdio-1.0
          main-is:          Test.hs
          build-depends:    base
          default-language: Haskell2010
        """,
            "Test.hs": """
        import System.Exit (exitFailure)

        add :: Int -> Int -> Int
        add a b = a - b

        main :: IO ()
        main = if add 1 2 == 3 then pure () else putStrLn "add 1 2: expected 3, got -1" >> exitFailure
        """,
        },
    )
    kt(
        "e3-kotlin-number-format",
        "TYPE_ERROR",
        """
        fun main() { println("twelve".toInt() + 1) }
        """,
    )
    kt(
        "e3-kotlin-lateinit",
        "TYPE_ERROR",
        """
        class Repo { lateinit var url: String }
        fun main() { println(Repo().url.length) }
        """,
        "a lateinit property read before it was set: Kotlin's null dereference",
    )
    add(
        "e3-junit-hamcrest",
        "ASSERTION_FAILURE",
        "junit",
        f"javac -cp {JUNIT_CP} -d out Calc.java CalcTest.java && "
        f"java -cp out:{JUNIT_CP} org.junit.runner.JUnitCore CalcTest",
        {
            "Calc.java": "public class Calc { static int add(int a, int b) { return a - b; } }\n",
            "CalcTest.java": """
        import org.junit.Test;
        import static org.hamcrest.CoreMatchers.is;
        import static org.junit.Assert.assertThat;

        public class CalcTest {
            @Test public void adds() { assertThat(Calc.add(1, 2), is(3)); }
        }
        """,
        },
    )
    add(
        "e3-gcc-format",
        "TYPE_ERROR",
        "gcc",
        "gcc -Wall -Werror=format -c main.c",
        {
            "main.c": """
        #include <stdio.h>
        int main(void) { printf("%d\\n", "three"); return 0; }
        """
        },
    )
    cc(
        "e3-gxx-no-member",
        "FUNCTION_ERROR",
        """
        #include <vector>
        int main() { std::vector<int> xs; return xs.length(); }
        """,
        compiler="g++",
    )
    cm(
        "e3-cmake-subdirectory",
        "FILE_ACCESS",
        """
        cmake_minimum_required(VERSION 3.16)
        project(corpus C)
        add_subdirectory(src/plugins)
        """,
    )
    nx(
        "e3-nix-readfile",
        "FILE_ACCESS",
        """
        builtins.readFile ./config/settings.json
        """,
    )
    nx(
        "e3-nix-select-int",
        "TYPE_ERROR",
        """
        let
          cfg = { port = 8080; };
        in cfg.port.number
        """,
    )
    add(
        "e3-precommit-module",
        "RESOURCE_ERROR",
        "pre-commit",
        "git init -q . && git add -A && "
        f"PRE_COMMIT_HOME=$PWD/.pre-commit-home {ECO_BIN}/pre-commit run --all-files --color=never",
        {
            ".pre-commit-config.yaml": f"""
        repos:
          - repo: local
            hooks:
              - id: lint
                name: lint
                entry: {ECO_BIN}/python -m corpus_missing_linter
                language: system
                files: \\.py$
        """,
            "app.py": "x = 1\n",
        },
    )
    add(
        "e3-perl-numeric",
        "TYPE_ERROR",
        "perl",
        "perl main.pl",
        {
            "main.pl": """
        use strict;
        use warnings FATAL => "all";
        my $total = "twelve" + 1;
        print "$total\\n";
        """
        },
    )


def fourth(add: Callable[..., None]) -> None:
    """The fourth round (ids ``e4-…``, ``fresh_round.py``): tools and situations neither corpus
    had, shared with the failure classifier's corpus, measured once before any rule for them."""
    for scenario in [*fresh_round.scenarios(), *fresh_round.held_out()]:
        add(
            scenario.id,
            scenario.category,
            scenario.tool,
            scenario.cmd,
            scenario.files,
            f"{scenario.description} (failure classifier: {scenario.mode})",
        )
