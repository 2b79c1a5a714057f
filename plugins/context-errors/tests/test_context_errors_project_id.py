"""A project's identity in the failure memory: its remote, else its root commit, else its path;
never its folder's name, never a credential."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopctl.testing import make_project
from loopctl_context_errors.project_id import normalize_remote, project_identity


def test_two_folders_of_the_same_name_are_two_projects(tmp_path: Path) -> None:
    a = make_project(tmp_path / "one" / "toy")
    b = make_project(tmp_path / "two" / "toy")
    a.git("remote", "add", "origin", "https://github.com/acme/toy.git")
    b.git("remote", "add", "origin", "git@gitlab.example.com:someone/toy.git")
    first, second = project_identity(a.path), project_identity(b.path)
    assert first.id == "git:github.com/acme/toy"
    assert second.id == "git:gitlab.example.com/someone/toy"
    assert first.name == second.name == "toy"
    assert first.source == second.source == "remote"


def test_every_spelling_of_one_remote_is_one_project(tmp_path: Path) -> None:
    spellings = [
        "https://github.com/Acme/Shop.git",
        "https://x-access-token:ghs_secret123@github.com/acme/shop",
        "ssh://git@github.com:22/acme/shop.git/",
        "git@github.com:acme/shop.git",
        "git://github.com/acme/shop",
    ]
    ids = set()
    for n, url in enumerate(spellings):
        project = make_project(tmp_path / f"clone{n}")
        project.git("remote", "add", "origin", url)
        identity = project_identity(project.path)
        assert "ghs_secret123" not in identity.id
        ids.add(identity.id)
    assert ids == {"git:github.com/acme/shop"}


def test_origin_wins_then_the_first_remote_by_name(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p")
    project.git("remote", "add", "zeta", "https://example.org/z/zeta")
    project.git("remote", "add", "beta", "https://example.org/b/beta")
    assert project_identity(project.path).id == "git:example.org/b/beta"
    project.git("remote", "add", "origin", "https://example.org/o/Origin")
    # a host not known to be case-insensitive keeps the path's case
    assert project_identity(project.path).id == "git:example.org/o/Origin"


def test_a_repository_without_remote_is_its_root_commit_wherever_it_moves(tmp_path: Path) -> None:
    project = make_project(tmp_path / "here" / "toy")
    root = project.git("rev-list", "--max-parents=0", "HEAD")
    (project.path / "b.txt").write_text("b\n")
    project.commit("second")
    before = project_identity(project.path)
    assert before.id == f"root:{root}"
    assert before.source == "root-commit"
    moved = tmp_path / "elsewhere" / "renamed"
    moved.parent.mkdir()
    shutil.move(str(project.path), moved)
    after = project_identity(moved)
    assert after.id == before.id
    assert after.name == "renamed"


def test_a_plain_folder_is_its_real_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # git would find a repository around tmp_path (a CI checkout keeps its temporary files
    # inside itself): the folder would rightly be that repository's
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    folder = tmp_path / "plain"
    folder.mkdir()
    link = tmp_path / "link"
    link.symlink_to(folder)
    identity = project_identity(link)
    assert identity.id == f"path:{folder.resolve()}"
    assert identity.source == "path"
    # an empty repository (no commit yet) has no root commit either
    empty = make_project(tmp_path / "empty", git=False)
    empty.git("init", "-q")
    assert project_identity(empty.path).id == f"path:{empty.path.resolve()}"


def test_the_settings_override_identity_and_name(tmp_path: Path) -> None:
    project = make_project(tmp_path / "svc")
    project.git("remote", "add", "origin", "https://github.com/acme/mono")
    assert project_identity(project.path, name="billing").id == "git:github.com/acme/mono"
    assert project_identity(project.path, name="billing").name == "billing"
    chosen = project_identity(project.path, override="acme/mono/billing")
    assert (chosen.id, chosen.name, chosen.source) == ("acme/mono/billing", "svc", "setting")


def test_a_local_remote_is_its_real_path(tmp_path: Path) -> None:
    upstream = tmp_path / "upstream.git"
    upstream.mkdir()
    project = make_project(tmp_path / "p")
    project.git("remote", "add", "origin", "../upstream.git")
    assert project_identity(project.path).id == f"git:{upstream.resolve().as_posix()[:-4]}"
    assert normalize_remote(f"file://{upstream}") == upstream.resolve().as_posix()[:-4]


_word = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_-]{0,12}", fullmatch=True)
#: Credentials drawn from letters the other parts never hold, so finding one is a leak.
_secret = st.from_regex(r"[!~*$]{8,20}", fullmatch=True)


@given(
    host=st.sampled_from(["github.com", "gitlab.com", "git.example.net"]),
    owner=_word,
    repo=_word,
    user=_word,
    secret=_secret,
    port=st.integers(1, 65535),
    suffix=st.sampled_from(["", ".git", "/", ".git/"]),
)
def test_spellings_agree_and_drop_credentials(
    host: str, owner: str, repo: str, user: str, secret: str, port: int, suffix: str
) -> None:
    plain = normalize_remote(f"https://{host}/{owner}/{repo}")
    spellings = [
        f"https://{user}:{secret}@{host}/{owner}/{repo}{suffix}",
        f"ssh://{user}@{host}:{port}/{owner}/{repo}{suffix}",
        f"{user}@{host}:{owner}/{repo}{suffix}",
        f"http://{host.upper()}/{owner}/{repo}{suffix}",
    ]
    for url in spellings:
        found = normalize_remote(url)
        assert found == plain, url
        assert secret not in found
    assert plain.startswith(host + "/")
