import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopctl import hookimpl
from loopctl.model import Decision
from loopctl.pluginhost import (
    ENTRY_POINT_GROUP,
    PluginError,
    PluginHost,
    PluginSelection,
    _scan_entry_points,
    discover_entry_points,
)

GOOD = """
from loopctl import hookimpl

@hookimpl
def after_iteration(loop, record):
    return None

@hookimpl
def on_event(event):
    pass
"""


def names_and_status(host):
    return {name: info.status for name, info in host.infos.items()}


def entry_points_named(*names):
    return [ep for ep in discover_entry_points() if ep.name in names]


def test_installed_plugins_are_discovered_and_enabled_by_default(fake_site):
    fake_site.add_plugin("alpha", GOOD, version="2.3")
    host = PluginHost()
    host.load(entry_points_named("alpha"))
    info = host.infos["alpha"]
    assert info.status == "enabled"
    assert info.distribution == "loopctl-alpha"
    assert info.version == "2.3"
    assert info.hooks == ["after_iteration", "on_event"]
    assert "loopctl_test_alpha" in info.source
    assert host.infos["core"].status == "enabled"
    assert host.infos["core"].origin == "builtin"
    assert info.origin == "installed"


def test_each_builtin_adapter_is_its_own_plugin_and_can_be_disabled():
    host = PluginHost(PluginSelection(disable=["aider"], enable=["nothing-else"]))
    host.load([])
    adapters = {"claude", "codex", "gemini", "command", "scripted"}
    for name in adapters:
        assert host.infos[name].origin == "builtin"
        assert host.infos[name].status == "enabled"  # the allow-list is for installed plugins
        assert host.infos[name].hooks == ["register_agents"]
    assert host.infos["aider"].status == "disabled"
    assert host.infos["aider"].detail == "listed in plugins.disable"
    registered = host.collect_named("register_agents", "agent adapter")
    assert set(registered) == adapters
    assert {plugin for _, plugin in registered.values()} == adapters


def test_no_plugins_still_loads_the_builtins():
    host = PluginHost(PluginSelection(no_plugins=True))
    host.load([])
    assert host.enabled_names() == [
        "core",
        "claude",
        "codex",
        "gemini",
        "aider",
        "command",
        "scripted",
    ]


def test_a_distribution_cannot_take_a_builtin_name(fake_site):
    fake_site.add_plugin("claude", GOOD)
    host = PluginHost()
    host.load(entry_points_named("claude"))
    assert host.infos["claude"].status == "broken"
    assert "reserved for loopctl" in host.infos["claude"].detail


@pytest.mark.parametrize(
    ("selection", "expected"),
    [
        (PluginSelection(), {"alpha": "enabled", "beta": "enabled"}),
        (PluginSelection(disable=["beta"]), {"alpha": "enabled", "beta": "disabled"}),
        (PluginSelection(enable=["beta"]), {"alpha": "disabled", "beta": "enabled"}),
        (
            PluginSelection(enable=["alpha", "beta"], disable=["alpha"]),
            {"alpha": "disabled", "beta": "enabled"},
        ),
        (PluginSelection(autoload=False), {"alpha": "disabled", "beta": "disabled"}),
        (
            PluginSelection(autoload=False, enable=["alpha"]),
            {"alpha": "enabled", "beta": "disabled"},
        ),
        (
            PluginSelection(no_plugins=True, enable=["alpha"]),
            {"alpha": "disabled", "beta": "disabled"},
        ),
    ],
    ids=[
        "default",
        "disable",
        "allow-list",
        "disable-beats-enable",
        "no-autoload",
        "no-autoload-allow",
        "no-plugins",
    ],
)
def test_enable_disable_matrix_and_disabled_plugins_are_never_imported(
    fake_site, selection, expected
):
    fake_site.add_plugin("alpha", GOOD)
    fake_site.add_plugin("beta", GOOD)
    host = PluginHost(selection)
    host.load(entry_points_named("alpha", "beta"))
    got = {k: v for k, v in names_and_status(host).items() if k in expected}
    assert got == expected
    for name, status in expected.items():
        imported = f"loopctl_test_{name}" in sys.modules
        assert imported == (status == "enabled"), name
        if status == "disabled":
            assert host.infos[name].detail  # says why


def test_a_plugin_that_fails_to_import_is_reported_and_the_rest_load(fake_site, capsys):
    fake_site.add_plugin("broken", "raise RuntimeError('boom at import')\n")
    fake_site.add_plugin("fine", GOOD)
    host = PluginHost()
    host.load(entry_points_named("broken", "fine"))
    assert host.infos["broken"].status == "broken"
    assert "boom at import" in host.infos["broken"].detail
    assert "plugin 'broken' failed to import and is skipped" in capsys.readouterr().err
    assert host.infos["fine"].status == "enabled"


class Raiser:
    @hookimpl
    def after_iteration(self, loop, record):
        raise ValueError("plugin bug")


class Decider:
    @hookimpl
    def after_iteration(self, loop, record):
        return Decision.stop("complete")


def test_a_raising_hookimpl_does_not_stop_other_plugins():
    host = PluginHost()
    failures = []
    host.error_sink = failures.append
    host.register(Decider(), "decider")
    host.register(Raiser(), "raiser")
    results = host.hook.after_iteration(loop=None, record=None, test_run=None)
    # the host names the plugin that decided
    assert results == [attrs.evolve(Decision.stop("complete"), source="decider")]
    assert [(f.plugin, f.hook) for f in failures] == [("raiser", "after_iteration")]
    assert "ValueError: plugin bug" in failures[0].error
    assert "plugin bug" in failures[0].traceback


def test_strict_mode_lets_the_exception_through():
    host = PluginHost(PluginSelection(strict=True))
    host.register(Raiser(), "raiser")
    with pytest.raises(ValueError, match="plugin bug"):
        host.hook.after_iteration(loop=None, record=None, test_run=None)


def test_required_plugins_fail_fast_with_the_reason(fake_site):
    fake_site.add_plugin("alpha", GOOD, version="1.2")
    fake_site.add_plugin("beta", GOOD)
    host = PluginHost(PluginSelection(disable=["beta"]))
    host.load(entry_points_named("alpha", "beta"))
    host.check_required(["alpha>=1.0", "loopctl-alpha"])  # both spellings work
    with pytest.raises(PluginError) as info:
        host.check_required(["alpha>=2", "beta", "gamma", "not a req!"])
    message = str(info.value)
    assert "'alpha>=2' is installed in version 1.2" in message
    assert "'beta' is disabled: listed in plugins.disable" in message
    assert "'gamma' is not installed (pip install loopctl-gamma" in message
    assert "not a valid requirement" in message


def test_two_plugins_registering_the_same_agent_name_is_an_error_naming_both():
    class A:
        name = "same"

    class One:
        @hookimpl
        def register_agents(self):
            return [A]

    class Two:
        @hookimpl
        def register_agents(self):
            return [A]

    host = PluginHost()
    host.register(One(), "one")
    host.register(Two(), "two")
    with pytest.raises(PluginError, match="'same' is registered by both 'one' and 'two'"):
        host.collect_named("register_agents", "agent adapter")


def test_plugins_can_add_hookspecs_for_other_plugins():
    from loopctl.hookspecs import hookspec

    class Spec:
        @hookspec(firstresult=True)
        def classify_failure(self, evidence):
            """a custom hook"""

    class Definer:
        @hookimpl
        def add_hookspecs(self, pluginmanager):
            pluginmanager.add_hookspecs(Spec)

    class Implementer:
        @hookimpl
        def classify_failure(self, evidence):
            return f"mode for {evidence}"

    host = PluginHost()
    host.register(Implementer(), "implementer")  # registered before the spec exists
    host.register(Definer(), "definer")
    assert host.hook.classify_failure(evidence="log") == "mode for log"
    assert host.check_unknown_hooks() == []


def test_unknown_hooks_are_warnings_naming_the_plugin():
    class Orphan:
        @hookimpl
        def some_hook_nobody_defines(self):
            pass

    host = PluginHost()
    host.register(Orphan(), "orphan")
    assert any(
        "'orphan' implements 'some_hook_nobody_defines'" in w for w in host.check_unknown_hooks()
    )


class _Dist:
    """A distribution as importlib-metadata gives it: files by name, full parse on demand."""

    def __init__(self, files, name="parsed-name", version="9.9"):
        self.files, self.name, self.version = files, name, version

    def read_text(self, filename):
        return self.files.get(filename)

    def locate_file(self, path):
        return "/site"


class _EntryPoint:
    def __init__(self, dist):
        self.name, self.value, self.dist = "gamma", "loopctl_test_gamma", dist

    def load(self):
        return sys.modules[__name__]  # any module: the listing is what is checked


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (
            {"METADATA": "Metadata-Version: 2.1\nVersion: 1.2.3\nName: my-plugin\n\nName: body"},
            ("my-plugin", "1.2.3"),
        ),
        (
            {"PKG-INFO": "Metadata-Version: 1.0\nName: old-style\nVersion: 0.1\n"},
            ("old-style", "0.1"),
        ),
        ({"METADATA": "Metadata-Version: 2.1\nName: no-version\n"}, ("no-version", "9.9")),
        ({}, ("parsed-name", "9.9")),
    ],
    ids=["dist-info", "egg-info", "version-from-the-parser", "no-metadata-file"],
)
def test_the_distribution_name_and_version_come_from_the_metadata_headers(files, expected):
    host = PluginHost()
    host.load([_EntryPoint(_Dist(files))])
    info = host.infos["gamma"]
    assert (info.distribution, info.version) == expected


# --- entry points: read from entry_points.txt as importlib-metadata reads them ---------------------

DIST_NAME = st.from_regex(r"[A-Za-z][A-Za-z0-9]{0,4}(?:[-_.][A-Za-z0-9]{1,3})?", fullmatch=True)
EP_NAME = st.from_regex(r"[a-z][a-z0-9-]{0,8}", fullmatch=True)
EP_VALUE = st.from_regex(
    r"[a-z_][a-z0-9_.]{0,8}(?:: ?[a-z_][a-z0-9_.]{0,6})?(?: ?\[[a-z]{1,4}\])?", fullmatch=True
)
SPACE = st.sampled_from(["", " ", "  ", "\t"])
EP_LINE = st.one_of(
    st.tuples(SPACE, EP_NAME, SPACE, st.just("="), SPACE, EP_VALUE, SPACE).map("".join),
    st.sampled_from(["", "# a comment = not an entry point", "   ", "; not = a.comment"]),
)
SECTION = st.sampled_from(
    [
        "loopctl.plugins",
        "console_scripts",
        "loopctl.plugins2",
        "[loopctl.plugins]",
        " loopctl.plugins ",
    ]
)
ENTRY_POINTS_TXT = st.lists(st.tuples(SECTION, st.lists(EP_LINE, max_size=4)), max_size=3).map(
    lambda sections: "".join(
        f"[{name}]\n" + "".join(f"{line}\n" for line in lines) for name, lines in sections
    )
)
DIST = st.tuples(
    DIST_NAME,
    st.sampled_from(["1.0", "2.0.post1"]),
    st.sampled_from(["dist-info", "egg-info"]),
    ENTRY_POINTS_TXT,
)


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _write_site(root: Path, dists: list[tuple[str, str, str, str]]) -> str:
    root.mkdir()
    written: set[str] = set()
    for name, version, kind, entry_points in dists:
        key = _normalized(name.partition("-")[0])  # the name as read from the directory's
        if key in written:  # one distribution of a name per directory
            continue
        written.add(key)
        info = root / f"{name}-{version}.{kind}"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (info / "entry_points.txt").write_text(entry_points)
    return str(root)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first=st.lists(DIST, max_size=4), second=st.lists(DIST, max_size=3))
def test_the_entry_point_scan_reads_what_importlib_metadata_reads(first, second):
    from importlib import metadata

    with tempfile.TemporaryDirectory() as root:
        path = [_write_site(Path(root, "a"), first), _write_site(Path(root, "b"), second)]
        scanned = _scan_entry_points(path)
        saved = sys.path[:]
        sys.path[:] = path
        try:
            expected = metadata.entry_points(group=ENTRY_POINT_GROUP)
            wanted = sorted((ep.name, ep.value, str(ep.dist.locate_file(""))) for ep in expected)
        finally:
            sys.path[:] = saved
    assert scanned is not None
    assert sorted((ep.name, ep.value, str(ep.dist.locate_file(""))) for ep in scanned) == wanted


def test_entry_points_load_and_name_their_distribution(fake_site, tmp_path):
    module = fake_site.add_plugin("alpha", GOOD, version="2.3")
    (ep,) = entry_points_named("alpha")
    assert ep.value == module
    assert ep.load() is sys.modules[module]
    assert (ep.dist.name, ep.dist.version) == ("loopctl-alpha", "2.3")
    assert ep.dist.locate_file("") == fake_site.root
    # `module:attr.attr [extras]`, as importlib-metadata loads it
    info = fake_site.root / "loopctl_beta-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: loopctl-beta\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "# made by hand\n[loopctl.plugins]\nbeta = os.path : join.__name__ [extra]\nno equals sign\n"
    )
    (beta,) = entry_points_named("beta")
    assert beta.load() == "join"


def test_a_zip_on_sys_path_is_left_to_importlib_metadata(tmp_path, monkeypatch):
    archive = tmp_path / "plugins.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr(
            "loopctl_zipped-1.0.dist-info/METADATA", "Name: loopctl-zipped\nVersion: 1.0\n"
        )
        zipped.writestr(
            "loopctl_zipped-1.0.dist-info/entry_points.txt",
            "[loopctl.plugins]\nzipped = zipped_mod\n",
        )
    monkeypatch.syspath_prepend(str(archive))
    assert _scan_entry_points(sys.path) is None
    assert [ep.value for ep in entry_points_named("zipped")] == ["zipped_mod"]


def test_bare_required_plugin_names_do_not_need_packaging(fake_site):
    fake_site.add_plugin("alpha", GOOD)
    host = PluginHost()
    host.load(entry_points_named("alpha"))
    code = (
        "import sys; from loopctl.pluginhost import _requirement; "
        "r = _requirement('loopctl-alpha'); print(r.name, repr(str(r.specifier)), "
        "'packaging' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["loopctl-alpha", "''", "False"]
    host.check_required(["loopctl-alpha", "alpha", "alpha>=0.1"])
    with pytest.raises(PluginError, match=r"'alpha>=9' is installed in version 1\.0"):
        host.check_required(["alpha>=9"])


def test_build_host_takes_the_offered_host_once_when_it_selects_the_same(tmp_path):
    from loopctl.config import load_config
    from loopctl.pluginhost import build_host, offer_host

    loaded = load_config(tmp_path, env={})
    offered = PluginHost(PluginSelection.from_config(loaded))
    offered.load([])
    offered.failures.append("a registration that failed")  # type: ignore[arg-type]
    offer_host(offered)
    assert build_host(loaded) is offered
    assert offered.failures == []
    assert build_host(loaded) is not offered  # once
    other = PluginHost(PluginSelection(disable=["aider"]))
    offer_host(other)
    assert build_host(loaded) is not other  # another selection: not taken
    assert build_host(loaded) is not other  # and the offer is gone
