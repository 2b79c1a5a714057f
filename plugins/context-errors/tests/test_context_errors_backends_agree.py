"""The same failures, the same answers: one corpus stored in SQLite and copied into Postgres,
then the same queries asked of both give the same ids in the same order (top 10), because the
memory ranks in Python from integers both stores keep alike. Skipped where the Postgres test
server is not available (pg_testkit says why)."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from loopctl_context_errors.categories import categorize
from loopctl_context_errors.memory import FailureMemory

pg_testkit = pytest.importorskip("pg_testkit", reason="the Postgres backend's test kit")
pg_server, pg_url = pg_testkit.pg_server, pg_testkit.pg_url

CORPUS = Path(__file__).parent / "corpus"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")


def _decisive_sets() -> list[tuple[str, list[str]]]:
    manifest = json.loads((CORPUS / "manifest.json").read_text(encoding="utf-8"))
    found = []
    for case in manifest["cases"]:
        text = (CORPUS / case["file"]).read_text(encoding="utf-8")
        result = categorize(text)
        if result.decisive_lines:
            found.append((result.category.value, list(result.decisive_lines)))
    return found


def _vary(lines: list[str], rng: random.Random) -> list[str]:
    """The lines with some names swapped for others, so failures are alike but not equal."""
    names = ["cart_job", "user_token", "load_config", "parse_order", "render_page"]
    return [
        _NAME.sub(lambda m: rng.choice(names) if rng.random() < 0.3 else m.group(0), line)
        for line in lines
    ]


@pytest.mark.slow
def test_sqlite_and_postgres_rank_the_same_failures_in_the_same_order(
    tmp_path: Path, pg_url: str
) -> None:
    rng = random.Random(16)
    sets = _decisive_sets()
    assert len(sets) > 50
    sqlite = FailureMemory(tmp_path / "f.sqlite3")
    rows = []
    for i in range(1500):
        category, lines = sets[rng.randrange(len(sets))]
        rows.append(
            {
                "decisive": _vary(lines, rng),
                "category": category,
                "project_id": f"git:example.com/acme/p{i % 4}",
                "created_at": 1_700_000_000.0 + i,
                "resolved_at": 1_700_000_100.0 + i if i % 5 == 0 else None,
            }
        )
    assert sqlite.bulk_insert(rows) == len(rows)
    sqlite.record_suggestion_outcome(["rule:a", "rule:b"], effective=True)
    sqlite.record_suggestion_outcome(["rule:a"], effective=False)
    postgres = FailureMemory(pg_url)
    assert sqlite.copy_to(postgres) == (len(rows), len(rows), 2, 2)
    assert sqlite.copy_to(postgres) == (len(rows), 0, 2, 0)  # nothing counted twice
    judged = {"rule:a": (2, 1), "rule:b": (1, 1)}
    assert postgres.suggestion_stats(judged) == sqlite.suggestion_stats(judged) == judged
    compared = 0
    for i in range(120):
        category, lines = sets[rng.randrange(len(sets))]
        query = lines if i % 4 == 0 else _vary(lines, rng)
        project = f"git:example.com/acme/p{i % 5}"  # p4: a project with no failures stored
        answers = [
            memory.query_similar(query, limit=10, category=category, project_id=project)
            for memory in (sqlite, postgres)
        ]
        assert [a.status for a in answers] == ["ok", "ok"]
        ids = [[(r.record.id, r.match, r.same_project) for r in a.results] for a in answers]
        assert ids[0] == ids[1], query
        scores = [[round(r.score, 9) for r in a.results] for a in answers]
        assert scores[0] == scores[1]
        compared += bool(ids[0])
    assert compared > 100  # most queries found something to compare


@pytest.mark.slow
def test_the_cli_copies_into_postgres_and_searches_both_alike(tmp_path: Path, pg_url: str) -> None:
    from test_context_errors_cli import loopctl
    from test_context_errors_store_sqlite import _v1_file

    from loopctl_context_errors.store import parse_location

    old = tmp_path / "old.sqlite3"
    _v1_file(old)  # a schema-1 file: migrated on the way
    location = parse_location(pg_url)
    done = loopctl("memory", "copy", "--memory", str(old), "--to", pg_url, "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "from": str(old), "to": location.display, "read": 3, "inserted": 3,
        "suggestions_read": 0, "suggestions_added": 0,
    }  # fmt: skip
    again = loopctl("memory", "copy", "--memory", str(old), "--to", pg_url, cwd=tmp_path)
    assert "copied 0 failure(s) of 3" in again.stdout
    stats = json.loads(loopctl("memory", "stats", "--json", "--memory", pg_url,
                               cwd=tmp_path).stdout)  # fmt: skip
    assert (stats["backend"], stats["location"], stats["failures"]) == (
        "postgres", location.display, 3,
    )  # fmt: skip
    ids = [
        json.loads(loopctl("memory", "search", "KeyError", "cart_job_17", "--json", "--memory",
                           where, cwd=tmp_path).stdout)["ids"]
        for where in (str(old), pg_url)
    ]  # fmt: skip
    assert ids[0] == ids[1] != []
    for output in (done, again):
        assert location.password not in output.stdout + output.stderr


def test_a_copy_keeps_the_source_ids_batch_after_batch_gaps_included(
    tmp_path: Path, pg_url: str
) -> None:
    source = FailureMemory(tmp_path / "source.sqlite3")
    for i in range(12):
        source.record_failure(decisive=[f"KeyError: 'key_{i}_{'x' * i}'"], category="KEY_ERROR",
                              project=f"p{i % 3}", now=1_700_000_000.0 + i)  # fmt: skip
    assert source.prune(project="p1") == 4  # ids 2, 5, 8, 11 go: gaps
    kept = sorted(r.id for r in source.recent(100))
    for target in (FailureMemory(pg_url), FailureMemory(tmp_path / "target.sqlite3")):
        assert source.copy_to(target, batch=3).inserted == len(kept)
        assert sorted(r.id for r in target.recent(100)) == kept


def test_memory_stats_are_the_same_on_both_for_the_same_rows(tmp_path: Path, pg_url: str) -> None:
    def row(i: int, project: str, project_id: str, category: str) -> dict[str, object]:
        return {
            "decisive": [f"AssertionError: case_{i} failed"],
            "category": category,
            "project": project,
            "project_id": project_id,
            "created_at": 1_700_000_000.0 + i,
            "resolved_at": 1_700_000_500.0 if i % 3 == 0 else None,
        }

    # two projects named "api" (different repositories), a tie on counts, and more projects
    # than the top 10 holds, so both the grouping and the order of ties are compared
    rows = [row(i, "api", "git:example.com/acme/api", "TEST_FAILURE") for i in range(4)]
    rows += [row(10 + i, "api", "git:example.com/other/api", "TYPE_ERROR") for i in range(4)]
    rows += [row(20 + i, "web", "git:example.com/acme/web", "Z_LAST") for i in range(3)]
    rows += [row(30 + i, f"p{i}", f"path:/srv/p{i}", "KEY_ERROR") for i in range(12)]
    sqlite, postgres = FailureMemory(tmp_path / "f.sqlite3"), FailureMemory(pg_url)
    assert sqlite.stats() == {**postgres.stats(), "backend": "sqlite", "location": sqlite.display,
                              "path": str(sqlite.path), "fts5": True}  # fmt: skip
    assert sqlite.bulk_insert(rows) == len(rows)
    sqlite.record_suggestion_outcome(["rule:a", "rule:b"], effective=True)
    sqlite.copy_to(postgres)
    stats = [sqlite.stats(), postgres.stats()]
    assert stats[0].keys() == stats[1].keys()
    assert stats[0]["top_projects"][:3] == [
        {"project": "api", "project_id": "git:example.com/acme/api", "failures": 4},
        {"project": "api", "project_id": "git:example.com/other/api", "failures": 4},
        {"project": "web", "project_id": "git:example.com/acme/web", "failures": 3},
    ]
    assert len(stats[0]["top_projects"]) == 10
    assert (stats[0]["backend"], stats[1]["backend"]) == ("sqlite", "postgres")
    assert (stats[0]["fts5"], stats[1]["fts5"]) == (True, False)
    assert stats[1]["path"] is None
    assert min(s["size_bytes"] for s in stats) > 0
    different = {"backend", "location", "path", "fts5", "size_bytes"}
    assert [{k: v for k, v in s.items() if k not in different} for s in stats] == [
        {k: v for k, v in stats[0].items() if k not in different}
    ] * 2
