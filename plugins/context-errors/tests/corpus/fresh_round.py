"""The fourth ecosystem round (ids ``e4-…``, issue #27), shared by both plugins' corpora.

Tools and situations neither corpus had: Perl with cpanm and prove, Lua and LuaRocks, OCaml with
dune, Erlang with erlc and rebar3, Fortran (gfortran), Meson with Ninja, Autotools (autoreconf,
configure), Yarn 1, and programs and shared libraries at run time. Each scenario is written once
here, with the failure mode (``plugins/failure-classifier``) and the category
(``plugins/context-errors``) it was written to produce, decided before either plugin saw its
output; ``ecosystems.py`` (the categories' corpus, ``generate.py e4-``) and the failure
classifier's ``scripts/generate_corpus.py --only e4-`` both run every one of them for real.

Debian packages used: perl, cpanminus, lua5.4, luarocks, ocaml-nox, ocaml-dune, erlang, rebar3,
gfortran, meson, ninja-build, autoconf, automake (not autoconf-archive: one case needs it
missing),
pkg-config, yarnpkg, gcc. Nothing reaches the network: cpanm and LuaRocks are pointed at an
empty mirror, rebar3 at a git repository that does not exist, Yarn runs ``--offline`` with an
empty cache.
"""

from __future__ import annotations

import textwrap
from typing import NamedTuple

#: A tool installed outside any project (the permission case makes it there).
OUTSIDE = "/opt/corpus-tools"


class Scenario(NamedTuple):
    id: str
    #: The failure classifier's mode.
    mode: str
    #: The context-error category.
    category: str
    #: The tool that printed the output (its ecosystem is :data:`ECOSYSTEM_OF` the id's word).
    tool: str
    cmd: str
    files: dict[str, str]
    description: str


def d(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


#: The ecosystem of a case, from the word after ``e4-`` in its id.
ECOSYSTEM_OF = {
    "perl": "Perl",
    "cpanm": "Perl",
    "prove": "Perl",
    "lua": "Lua",
    "luarocks": "Lua",
    "ocaml": "OCaml/dune",
    "dune": "OCaml/dune",
    "erlang": "Erlang/rebar3",
    "rebar3": "Erlang/rebar3",
    "fortran": "Fortran",
    "meson": "Meson",
    "autotools": "Autotools",
    "yarn": "Yarn",
    "exec": "programs and libraries",
    # the held-out check
    "tcl": "Tcl",
    "tcltest": "Tcl",
    "jni": "Java",
    "ctypes": "Python",
    "sqlite": "SQLite",
    "awk": "awk",
}

#: How each tool of the round tells its version (a shell command).
VERSIONS = {
    "perl": "perl -e 'print $^V'",
    "cpanm": "cpanm --version",
    "prove": "prove --version",
    "lua": "lua5.4 -v",
    "luarocks": "luarocks --version",
    "dune": "dune --version",
    "rebar3": "rebar3 --version",
    "erl": 'erl -noshell -eval \'io:format("OTP ~s~n", [erlang:system_info(otp_release)]), '
    "halt().'",
    "gfortran": "gfortran --version",
    "meson": "meson --version",
    "configure": "autoconf --version",
    "make": "make --version",
    "yarn": "NODE_PATH=/usr/share/nodejs yarnpkg --version",
    "exec": "gcc --version",
    "tclsh": "echo 'puts [info patchlevel]' | tclsh",
    "java": "java -version 2>&1",
    "python": "python3 --version",
    "sqlite3": "sqlite3 --version",
    "awk": "awk -W version 2>&1",
}

DEP, CODE = "dependency_issue", "code_error"
ERL = "mkdir -p ebin && erlc -o ebin src/*.erl && erl -noshell -pa ebin -eval "
DUNE_PROJECT = "(lang dune 2.9)\n"
#: Debian's Yarn 1 finds its own modules on Node's path only with Debian's Node.
YARN = "NODE_PATH=/usr/share/nodejs yarnpkg "
MESON_C = "project('calc', 'c')\nexecutable('calc', 'calc.c')\n"


def _perl() -> list[Scenario]:
    return [
        Scenario(
            "e4-perl-version",
            DEP,
            "RESOURCE_ERROR",
            "perl",
            "perl report.pl",
            {"report.pl": 'use v5.99;\nprint "ok\\n";\n'},
            "the script needs a newer Perl than the one installed",
        ),
        Scenario(
            "e4-cpanm-missing",
            DEP,
            "RESOURCE_ERROR",
            "cpanm",
            "mkdir -p mirror && cpanm --notest --mirror file://$PWD/mirror --mirror-only "
            "-L local --installdeps .",
            {
                "cpanfile": "requires 'Text::Table::Tiny', '1.02';\n",
                "lib/App.pm": "package App;\nuse Text::Table::Tiny;\n1;\n",
            },
            "cpanm finds no distribution for a module the cpanfile requires",
        ),
        Scenario(
            "e4-prove-module-missing",
            DEP,
            "RESOURCE_ERROR",
            "prove",
            "prove -l t/",
            {
                "lib/Report.pm": d(
                    """
                    package Report;
                    use strict;
                    use YAML::Tiny;
                    sub load { return YAML::Tiny->read($_[0]) }
                    1;
                    """
                ),
                "t/report.t": d(
                    """
                    use strict;
                    use Test::More;
                    use Report;
                    ok(Report->can('load'));
                    done_testing;
                    """
                ),
            },
            "a test loads the project's module, which uses a CPAN module that is not installed",
        ),
        Scenario(
            "e4-perl-undef-method",
            CODE,
            "TYPE_ERROR",
            "prove",
            "prove -l t/",
            {
                "lib/Users.pm": d(
                    """
                    package Users;
                    use strict;
                    my %by_id = (1 => { name => 'ann' });
                    sub find { my $u = $by_id{$_[0]}; return $u ? bless({%$u}, 'User') : undef }
                    sub name_of { return find($_[0])->name }
                    package User;
                    sub name { $_[0]{name} }
                    1;
                    """
                ),
                "t/users.t": d(
                    """
                    use strict;
                    use Test::More;
                    use Users;
                    is(Users::name_of(2), 'bob');
                    done_testing;
                    """
                ),
            },
            "a method called on undef: the project's lookup returned nothing",
        ),
        Scenario(
            "e4-prove-is-deeply",
            CODE,
            "ASSERTION_FAILURE",
            "prove",
            "prove -l t/",
            {
                "lib/Split.pm": d(
                    """
                    package Split;
                    use strict;
                    sub words { return [ split / /, $_[0] ] }
                    1;
                    """
                ),
                "t/split.t": d(
                    """
                    use strict;
                    use Test::More;
                    use Split;
                    is_deeply(Split::words("a  b"), ['a', 'b'], 'double spaces');
                    done_testing;
                    """
                ),
            },
            "Test::More's is_deeply finds a wrong result",
        ),
    ]


def _lua() -> list[Scenario]:
    return [
        Scenario(
            "e4-lua-module-missing",
            DEP,
            "RESOURCE_ERROR",
            "lua",
            "lua5.4 main.lua",
            {"main.lua": 'local lpeg = require("lpeg")\nprint(lpeg.version)\n'},
            "a require of a rock that is not installed",
        ),
        Scenario(
            "e4-luarocks-not-found",
            DEP,
            "RESOURCE_ERROR",
            "luarocks",
            "mkdir -p rocks && luarocks --lua-version=5.4 --tree=lua_modules "
            "--only-server=$PWD/rocks install inspect 3.1.3",
            {"main.lua": 'local inspect = require("inspect")\nprint(inspect({1}))\n'},
            "LuaRocks finds no rock of that name on its server",
        ),
        Scenario(
            "e4-lua-own-module",
            CODE,
            "FUNCTION_ERROR",
            "lua",
            "lua5.4 main.lua",
            {
                "app/init.lua": 'return { name = "app" }\n',
                "app/format.lua": "local M = {}\nfunction M.money(n) return string.format('%.2f', n) end\nreturn M\n",
                "main.lua": 'local fmt = require("app.formatting")\nprint(fmt.money(3))\n',
            },
            "a require of the project's own module under a name it does not have",
        ),
        Scenario(
            "e4-lua-nil-index",
            CODE,
            "TYPE_ERROR",
            "lua",
            "lua5.4 main.lua",
            {
                "main.lua": d(
                    """
                    local config = { db = { host = "localhost" } }
                    print(config.cache.size)
                    """
                )
            },
            "indexing a nil field",
        ),
        Scenario(
            "e4-lua-syntax",
            CODE,
            "SYNTAX_ERROR",
            "lua",
            "lua5.4 main.lua",
            {
                "main.lua": d(
                    """
                    local function area(w, h)
                      return w * h
                    print(area(2, 3))
                    """
                )
            },
            "a function without its end",
        ),
    ]


def _ocaml() -> list[Scenario]:
    return [
        Scenario(
            "e4-dune-library-missing",
            DEP,
            "RESOURCE_ERROR",
            "dune",
            "dune build 2>&1",
            {
                "dune-project": DUNE_PROJECT,
                "bin/dune": "(executable (name main) (libraries yojson))\n",
                "bin/main.ml": "let () = print_endline (Yojson.Safe.to_string (`Int 1))\n",
            },
            "dune: the project's executable uses an opam library that is not installed",
        ),
        Scenario(
            "e4-dune-lang-too-new",
            DEP,
            "RESOURCE_ERROR",
            "dune",
            "dune build 2>&1",
            {
                "dune-project": "(lang dune 3.11)\n",
                "bin/dune": "(executable (name main))\n",
                "bin/main.ml": 'let () = print_endline "hi"\n',
            },
            "dune-project asks for a newer dune than the one installed",
        ),
        Scenario(
            "e4-ocaml-type",
            CODE,
            "TYPE_ERROR",
            "dune",
            "dune build 2>&1",
            {
                "dune-project": DUNE_PROJECT,
                "bin/dune": "(executable (name main))\n",
                "bin/main.ml": 'let total = 1 + "2"\nlet () = print_int total\n',
            },
            "an int added to a string",
        ),
        Scenario(
            "e4-dune-test-assert",
            CODE,
            "ASSERTION_FAILURE",
            "dune",
            "dune test 2>&1",
            {
                "dune-project": DUNE_PROJECT,
                "src/dune": "(library (name calc))\n",
                "src/calc.ml": "let double x = x + x + 1\n",
                "test/dune": "(test (name test_calc) (libraries calc))\n",
                "test/test_calc.ml": "let () = assert (Calc.double 2 = 4)\n",
            },
            "a dune test's assert fails",
        ),
    ]


def _erlang() -> list[Scenario]:
    return [
        Scenario(
            "e4-rebar3-dep-fetch",
            DEP,
            "RESOURCE_ERROR",
            "rebar3",
            "HOME=$PWD/.home rebar3 compile",
            {
                "rebar.config": '{deps, [{jsx, {git, "/nonexistent/jsx.git", {tag, "v3.1.0"}}}]}.\n',
                "src/app.app.src": '{application, app, [{vsn, "0.1.0"}, {applications, [kernel, stdlib]}]}.\n',
                "src/app.erl": "-module(app).\n-export([go/0]).\ngo() -> jsx:encode(#{a => 1}).\n",
            },
            "rebar3 cannot fetch a dependency of rebar.config",
        ),
        Scenario(
            "e4-erlang-dep-undef",
            DEP,
            "RESOURCE_ERROR",
            "erl",
            ERL + "'io:format(\"~s~n\", [app:go()]), halt().'",
            {"src/app.erl": "-module(app).\n-export([go/0]).\ngo() -> jsx:encode(#{a => 1}).\n"},
            "the code calls a library module (jsx) that is not on the code path",
        ),
        Scenario(
            "e4-erlang-own-undef",
            CODE,
            "FUNCTION_ERROR",
            "erl",
            ERL + "'io:format(\"~p~n\", [app:go()]), halt().'",
            {
                "src/app.erl": "-module(app).\n-export([go/0]).\ngo() -> calc:add(1, 2).\n",
                "src/calc.erl": "-module(calc).\n-export([sum/2]).\nsum(A, B) -> A + B.\n",
            },
            "the code calls a function the project's own module does not export",
        ),
        Scenario(
            "e4-erlang-badarith",
            CODE,
            "TYPE_ERROR",
            "erl",
            ERL + "'io:format(\"~p~n\", [price:total([1, 2])]), halt().'",
            {
                "src/price.erl": '-module(price).\n-export([total/1]).\ntotal(L) -> lists:sum(L) + "0".\n'
            },
            "arithmetic on a string",
        ),
        Scenario(
            "e4-rebar3-eunit",
            CODE,
            "ASSERTION_FAILURE",
            "rebar3",
            "HOME=$PWD/.home rebar3 eunit",
            {
                "rebar.config": "{deps, []}.\n",
                "src/calc.app.src": '{application, calc, [{vsn, "0.1.0"}, {applications, [kernel, stdlib]}]}.\n',
                "src/calc.erl": "-module(calc).\n-export([double/1]).\ndouble(X) -> X * 3.\n",
                "test/calc_tests.erl": '-module(calc_tests).\n-include_lib("eunit/include/eunit.hrl").\n'
                "double_test() -> ?assertEqual(4, calc:double(2)).\n",
            },
            "an EUnit assertion fails",
        ),
    ]


def _fortran() -> list[Scenario]:
    return [
        Scenario(
            "e4-fortran-module-missing",
            DEP,
            "RESOURCE_ERROR",
            "gfortran",
            "gfortran -o main main.f90",
            {
                "main.f90": d(
                    """
                    program main
                      use json_module
                      implicit none
                      type(json_file) :: json
                      call json%initialize()
                    end program main
                    """
                )
            },
            "a module of a library (json-fortran) that is not installed",
        ),
        Scenario(
            "e4-fortran-syntax",
            CODE,
            "SYNTAX_ERROR",
            "gfortran",
            "gfortran -o main main.f90",
            {
                "main.f90": d(
                    """
                    program main
                      implicit none
                      integer :: i
                      do i = 1, 3
                        print *, i
                    end program main
                    """
                )
            },
            "a do loop without its end do",
        ),
        Scenario(
            "e4-fortran-type",
            CODE,
            "TYPE_ERROR",
            "gfortran",
            "gfortran -o main main.f90",
            {
                "main.f90": d(
                    """
                    program main
                      implicit none
                      integer :: n
                      n = "twelve"
                      print *, n
                    end program main
                    """
                )
            },
            "a character value assigned to an integer",
        ),
    ]


def _meson() -> list[Scenario]:
    return [
        Scenario(
            "e4-meson-dependency",
            DEP,
            "RESOURCE_ERROR",
            "meson",
            "meson setup build",
            {
                "meson.build": "project('calc', 'c')\nzstd = dependency('libzstd-corpus')\n"
                "executable('calc', 'calc.c', dependencies: zstd)\n",
                "calc.c": "int main(void) { return 0; }\n",
            },
            "a dependency() that neither pkg-config nor CMake finds",
        ),
        Scenario(
            "e4-meson-version",
            DEP,
            "RESOURCE_ERROR",
            "meson",
            "meson setup build",
            {
                "meson.build": "project('calc', 'c', meson_version: '>=1.9.0')\nexecutable('calc', 'calc.c')\n",
                "calc.c": "int main(void) { return 0; }\n",
            },
            "meson.build needs a newer Meson than the one installed",
        ),
        Scenario(
            "e4-meson-compile-error",
            CODE,
            "FUNCTION_ERROR",
            "meson",
            "meson setup build >/dev/null && meson compile -C build",
            {
                "meson.build": MESON_C,
                "calc.c": d(
                    """
                    #include <stdio.h>
                    int main(void) {
                        printf("%d\\n", totl(2, 3));
                        return 0;
                    }
                    """
                ),
            },
            "an undeclared function (a typo) in the project's C file",
        ),
        Scenario(
            "e4-meson-test-fail",
            CODE,
            "ASSERTION_FAILURE",
            "meson",
            "meson setup build >/dev/null && meson test -C build --print-errorlogs",
            {
                "meson.build": "project('calc', 'c')\nt = executable('test_calc', 'test_calc.c')\n"
                "test('calc', t)\n",
                "test_calc.c": d(
                    """
                    #include <assert.h>
                    static int square(int x) { return x * 2; }
                    int main(void) {
                        assert(square(3) == 9);
                        return 0;
                    }
                    """
                ),
            },
            "a C test's assert fails under meson test",
        ),
    ]


def _autotools() -> list[Scenario]:
    configure = "AC_INIT([calc], [1.0])\nAC_PROG_CC\n"
    return [
        Scenario(
            "e4-autotools-pkg-missing",
            DEP,
            "RESOURCE_ERROR",
            "configure",
            "autoreconf -fi 2>/dev/null && ./configure",
            {
                "configure.ac": configure
                + "PKG_CHECK_MODULES([ZSTD], [libzstd-corpus >= 1.4])\nAC_OUTPUT\n",
            },
            "configure: a library the project needs has no pkg-config file",
        ),
        Scenario(
            "e4-autotools-macro-missing",
            DEP,
            "RESOURCE_ERROR",
            "configure",
            "autoreconf -fi && ./configure",
            {
                "configure.ac": configure
                + 'AX_CHECK_COMPILE_FLAG([-Wall], [CFLAGS="$CFLAGS -Wall"])\n'
                "AC_CONFIG_FILES([Makefile])\nAC_OUTPUT\n",
                "Makefile.in": "all:\n\t@CC@ -o calc calc.c\n",
                "calc.c": "int main(void) { return 0; }\n",
            },
            "configure.ac uses a macro of autoconf-archive, which is not installed: configure"
            " keeps it unexpanded and the shell cannot parse it",
        ),
        Scenario(
            "e4-autotools-make-type",
            CODE,
            "TYPE_ERROR",
            "make",
            "autoreconf -fi && ./configure >/dev/null && make",
            {
                "configure.ac": configure + "AC_CONFIG_FILES([Makefile])\nAC_OUTPUT\n",
                "Makefile.in": "all: calc\ncalc: calc.c\n\t@CC@ -Werror -o calc calc.c\n",
                "calc.c": d(
                    """
                    struct point { int x, y; };
                    int main(void) {
                        struct point p = {1, 2};
                        int n = p;
                        return n;
                    }
                    """
                ),
            },
            "a struct assigned to an int, built by configure and make",
        ),
    ]


def _yarn() -> list[Scenario]:
    package = '{"name": "app", "version": "1.0.0", "private": true, %s}\n'
    return [
        Scenario(
            "e4-yarn-offline",
            DEP,
            "RESOURCE_ERROR",
            "yarn",
            YARN + "install --offline --cache-folder $PWD/.yarn-cache --non-interactive",
            {"package.json": package % '"dependencies": {"left-pad": "^1.3.0"}'},
            "yarn --offline with a dependency its cache does not hold",
        ),
        Scenario(
            "e4-yarn-bin-missing",
            DEP,
            "RESOURCE_ERROR",
            "yarn",
            YARN + "--offline run test",
            {
                "package.json": package
                % '"scripts": {"test": "ava"}, "devDependencies": {"ava": "^6.1.0"}',
                "test/calc.test.js": "const test = require('ava');\ntest('adds', (t) => t.is(1 + 1, 2));\n",
            },
            "yarn run: the test runner of devDependencies is not installed",
        ),
        Scenario(
            "e4-yarn-test-fail",
            CODE,
            "ASSERTION_FAILURE",
            "yarn",
            YARN + "--offline run test",
            {
                "package.json": package % '"scripts": {"test": "node --test test/"}',
                "src/calc.js": "exports.half = (n) => n / 3;\n",
                "test/calc.test.js": "const test = require('node:test');\nconst assert = require('node:assert');\n"
                "const { half } = require('../src/calc');\ntest('half', () => assert.strictEqual(half(8), 4));\n",
            },
            "yarn run test: node's test runner finds a wrong result",
        ),
    ]


def _exec() -> list[Scenario]:
    return [
        Scenario(
            "e4-exec-shared-library",
            DEP,
            "RESOURCE_ERROR",
            "exec",
            f"mkdir -p {OUTSIDE}/lib && gcc -shared -fPIC -o {OUTSIDE}/lib/libcorpuscalc.so calc.c "
            f"&& gcc -o main main.c -L{OUTSIDE}/lib -lcorpuscalc "
            f"&& rm {OUTSIDE}/lib/libcorpuscalc.so && ./main",
            {
                "calc.c": "int add(int a, int b) { return a + b; }\n",
                "main.c": '#include <stdio.h>\nint add(int, int);\nint main(void) { printf("%d\\n", add(1, 2)); return 0; }\n',
            },
            "a program linked to a shared library that is not installed where it runs",
        ),
        Scenario(
            "e4-exec-tool-permission",
            DEP,
            "FILE_ACCESS",
            "exec",
            f"mkdir -p {OUTSIDE}/bin && printf '#!/bin/sh\\necho ok\\n' > {OUTSIDE}/bin/fmtcheck "
            f"&& chmod 644 {OUTSIDE}/bin/fmtcheck && sh check.sh",
            {
                "check.sh": f"set -e\n{OUTSIDE}/bin/fmtcheck src/\necho checked\n",
                "src/a.c": "int a;\n",
            },
            "the check runs a tool installed outside the project without its execute bit",
        ),
        Scenario(
            "e4-exec-own-script-permission",
            CODE,
            "FILE_ACCESS",
            "exec",
            "chmod 644 scripts/lint.sh && sh check.sh",
            {
                "check.sh": "set -e\n./scripts/lint.sh\necho checked\n",
                "scripts/lint.sh": "#!/bin/sh\necho lint ok\n",
            },
            "the project's own script lacks its execute bit",
        ),
    ]


def scenarios() -> list[Scenario]:
    """Every scenario of the round, in the order both corpora list them."""
    return [
        *_perl(),
        *_lua(),
        *_ocaml(),
        *_erlang(),
        *_fortran(),
        *_meson(),
        *_autotools(),
        *_yarn(),
        *_exec(),
    ]


def held_out() -> list[Scenario]:
    """A held-out check (ids ``e5-…``) written after the fifth round's rules were frozen: other
    tools in the same situations (a package, a version, a library at run time), recorded at
    first sight before any rule for them (the honest estimate of the round's rules); the rules
    were generalised from them afterwards."""
    tcltest_exit = (
        "set failed $::tcltest::numTests(Failed)\ncleanupTests\nexit [expr {$failed > 0}]\n"
    )
    return [
        Scenario(
            "e5-tcl-package-missing",
            DEP,
            "RESOURCE_ERROR",
            "tclsh",
            "tclsh report.tcl",
            {"report.tcl": "package require json\nputs [json::json2dict {{}}]\n"},
            "a Tcl package (tcllib's json) that is not installed",
        ),
        Scenario(
            "e5-tcl-version",
            DEP,
            "RESOURCE_ERROR",
            "tclsh",
            "tclsh main.tcl",
            {"main.tcl": "package require Tcl 9.0\nputs [lseq 3]\n"},
            "the script needs a newer Tcl than the one installed",
        ),
        Scenario(
            "e5-tcl-undefined-variable",
            CODE,
            "FUNCTION_ERROR",
            "tclsh",
            "tclsh main.tcl",
            {"main.tcl": "set items {1 2 3}\nforeach i $items { incr sum $i }\nputs $totl\n"},
            "a misspelt variable",
        ),
        Scenario(
            "e5-tcltest-fail",
            CODE,
            "ASSERTION_FAILURE",
            "tclsh",
            "tclsh tests/all.tcl",
            {
                "lib/calc.tcl": "proc half {n} { expr {$n / 3} }\n",
                "tests/all.tcl": "package require tcltest\nnamespace import tcltest::*\n"
                "source [file join [file dirname [info script]] .. lib calc.tcl]\n"
                "test half-1 {half of 8} {half 8} 4\n" + tcltest_exit,
            },
            "a tcltest case gives a wrong result",
        ),
        Scenario(
            "e5-jni-native-library",
            DEP,
            "RESOURCE_ERROR",
            "java",
            "javac -d out Main.java && java -cp out Main",
            {
                "Main.java": d(
                    """
                    public class Main {
                        static { System.loadLibrary("zstdcorpusjni"); }
                        public static void main(String[] args) { System.out.println("ok"); }
                    }
                    """
                )
            },
            "a JNI library the code loads is not installed",
        ),
        Scenario(
            "e5-ctypes-library",
            DEP,
            "RESOURCE_ERROR",
            "python",
            "python3 compress.py",
            {
                "compress.py": "import ctypes\n\nlib = ctypes.CDLL('libzstdcorpus.so.1')\n"
                "print(lib.ZSTD_versionNumber())\n"
            },
            "ctypes loads a shared library that is not installed",
        ),
        Scenario(
            "e5-sqlite-extension",
            DEP,
            "RESOURCE_ERROR",
            "sqlite3",
            "sqlite3 -bail :memory: < schema.sql",
            {"schema.sql": ".load /usr/lib/sqlite3/corpus_vec0\nSELECT 1;\n"},
            "a SQLite extension the schema loads is not installed",
        ),
        Scenario(
            "e5-sqlite-syntax",
            CODE,
            "SYNTAX_ERROR",
            "sqlite3",
            "sqlite3 -bail :memory: < schema.sql",
            {
                "schema.sql": "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT);\nSELEC name FROM users;\n"
            },
            "a misspelt SQL keyword in the project's schema",
        ),
        Scenario(
            "e5-awk-syntax",
            CODE,
            "SYNTAX_ERROR",
            "awk",
            "awk -f sum.awk data.txt",
            {"sum.awk": "{ total += $2 \nEND { print total }\n", "data.txt": "a 1\nb 2\n"},
            "a missing closing brace in the project's awk script",
        ),
    ]
