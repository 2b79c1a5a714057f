"""loopctl.trust: where a path from a project's config really leads."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from loopctl.trust import outside, project_roots

#: A project directory that does not exist (nothing on the way is a symbolic link) under the
#: real temporary directory, and a sibling whose name starts with the project's.
ROOT = Path(os.path.realpath(tempfile.gettempdir())) / "loopctl-trust-project"
PARTS = st.sampled_from(["a", "b.c", ".", "..", "loopctl-trust-project", "loopctl-trust-projectX"])


@given(parts=st.lists(PARTS, max_size=8), absolute=st.booleans())
def test_a_path_leads_outside_exactly_when_its_normal_form_leaves_the_root(parts, absolute):
    path = Path("/", *parts) if absolute else ROOT.joinpath(*parts)
    normal = os.path.normpath(path)
    inside = normal == str(ROOT) or normal.startswith(str(ROOT) + os.sep)
    assert (outside(path, [ROOT]) is None) == inside
    if not inside:
        assert outside(path, [ROOT]) == Path(normal)


def test_a_symbolic_link_is_followed_and_either_root_will_do(tmp_path):
    work, config_dir, elsewhere = tmp_path / "work", tmp_path / "repo", tmp_path / "elsewhere"
    for directory in (work, config_dir, elsewhere):
        directory.mkdir()
    (work / "state").symlink_to(elsewhere)
    roots = project_roots(work, config_dir / "loopctl.toml")
    assert roots == (work.resolve(), config_dir.resolve())
    assert outside(work / "state" / "x", roots) == elsewhere.resolve() / "x"
    assert outside(config_dir / ".loopctl", roots) is None
    assert outside(work / "sub" / ".." / "state2", roots) is None
